"""The training-cost benchmark runs every job of the study's trainers at tiny sizes (figures, not timed
assertions); its per-step arithmetic is checked on a fake clock."""

import json

import pytest

from longdoc.bench import training
from longdoc.bench.training import DEFAULT_JOBS, main, per_step_seconds, random_corpus

TINY = [
    "--hidden", "32", "--layers", "2", "--heads", "2", "--precision", "fp32",
    "--block", "16", "--blocks", "2", "--batch", "2", "--encode-docs", "6",
    "--pair-batch", "2", "--matchbert-length", "16", "--sentence-block", "8", "--sentence-blocks", "3",
    "--sentence-layers", "1", "--pretrain-batch", "2", "--pretrain-blocks", "2",
    "--nci-batch", "2", "--nci-documents", "40", "--nci-decoder-layers", "1", "--nci-adaptor-layers", "1",
    "--nci-beam", "3", "--nci-decode-batch", "2", "--decode-queries", "2", "--qg-queries", "2",
    "--qg-input-length", "16", "--qg-max-length", "4", "--qg-batch", "2",
    "--warmup", "1", "--steps", "1", "--device", "cpu",
]  # fmt: skip
RATE_OF = {"encode": "documents_per_second", "generate": "documents_per_second", "decode": "queries_per_second"}


def test_every_default_job_runs_with_the_study_trainers_and_writes_its_rows(tmp_path, capsys):
    out = tmp_path / "rows.json"
    rows = main(TINY + ["--out", str(out)])
    assert [r["job"] for r in rows] == list(DEFAULT_JOBS)
    assert not any(r.get("oom") for r in rows)
    for row in rows:
        kind = row["job"].partition(":")[0]
        assert RATE_OF.get(kind, "seconds_per_step") in row, row
    assert all(r[RATE_OF[r["job"].partition(":")[0]]] > 0 for r in rows if r["job"].partition(":")[0] in RATE_OF)
    assert next(r for r in rows if r["job"] == "decode:nci")["beam"] == 3
    saved = json.loads(out.read_text())
    assert saved["rows"] == json.loads(json.dumps(rows)) and saved["header"]["shape"]["hidden"] == 32
    assert '"job": "nci"' in capsys.readouterr().out


def test_per_step_time_is_the_difference_of_two_timed_runs_after_an_untimed_one(monkeypatch):
    clock = {"now": 0.0}
    calls = []

    def train(n):  # a first call pays 100 s of compilation, every call 5 s of set-up, each step 2 s
        calls.append(n)
        clock["now"] += (100 if len(calls) == 1 else 0) + 5 + 2 * n

    monkeypatch.setattr(training.time, "perf_counter", lambda: clock["now"])
    assert per_step_seconds(train, warmup=3, steps=10) == pytest.approx(2.0)
    assert calls == [3, 3, 13]


def test_the_random_corpus_has_full_blocks_of_content_ids():
    corpus = random_corpus(documents=5, blocks=3, block=10, vocabulary=30522)
    assert len(corpus) == 5 and corpus.doc_ids[0] == "d0"
    assert all(len(d) == 3 and all(len(s) == 8 and min(s) >= 1000 for s in d) for d in corpus.segments)


def test_an_unknown_job_is_refused_naming_the_option():
    with pytest.raises(ValueError, match="--jobs: unknown job 'train:X'"):
        main(TINY + ["--jobs", "train:X"])
