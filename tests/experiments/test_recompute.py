"""Every interval of a record is recomputed from the per-item scores written beside it
(``python -m longdoc.experiments.recompute``)."""

import gzip
import json

import pytest
from tests.conftest import committed_records

from longdoc.experiments import recompute
from longdoc.experiments.families.retrieval import BM25, Dense
from longdoc.experiments.settings import EncoderSettings
from longdoc.experiments.systems import System
from longdoc.experiments.verdicts import INTERVAL, Claim


def test_the_recompute_command_reproduces_a_records_intervals_and_names_a_changed_one(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study, capsys
):
    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0, 1], learning_rates=[1e-3])
    study.run_all(
        [System("BM25", BM25()), System("MaxP", Dense("MaxP", study.settings(EncoderSettings).encoder("MaxP")))]
    )
    study.findings([Claim("MaxP beats BM25", "MaxP", "BM25", "0.3 vs 0.2"), Claim("BM25 beats MaxP", "BM25", "MaxP")])
    directory = study.record()
    scores = recompute.read_scores(directory)
    assert set(scores) == {"BM25", "MaxP"} and scores["MaxP"]["seeds"] == [0, 1]
    assert len(scores["MaxP"]["measures"]["MRR@100"]) == 2  # one dict of per-query values per seed
    rows = recompute.check_record(directory)
    assert [r["agrees"] for r in rows] == [True, True]
    assert recompute.main([str(directory)]) == 0
    assert "STALE" not in capsys.readouterr().out
    record = json.loads((directory / "metrics.json").read_text())
    assert record["metrics"]["findings"]["claims"][0]["margin"] is None  # a "beats" claim has none
    (directory / "metrics.json").write_text(json.dumps(record | {"record_fingerprint": "0123456789abcdef+0"}))
    assert recompute.main([str(directory)]) == 0
    assert "(STALE record, made by 0123456789abcdef+0: recomputed by this checkout's code)" in capsys.readouterr().out
    assert record["metrics"]["findings"]["claims"][0]["system"] == "MaxP"  # the rows it compares are recorded
    record["metrics"]["findings"]["claims"][0][INTERVAL] = "+0.500 [+0.400, +0.600]"
    (directory / "metrics.json").write_text(json.dumps(record))
    assert recompute.main([str(directory)]) == 1
    assert "DIFFERS: MaxP beats BM25: recorded +0.500 [+0.400, +0.600]" in capsys.readouterr().out
    # the interval as recorded, but a verdict the interval does not give (issue 49's review: recompute
    # checked intervals only)
    record["metrics"]["findings"]["claims"][0][INTERVAL] = rows[0]["recorded"]
    wrong = "reversed" if rows[0]["recorded verdict"] != "reversed" else "holds"
    record["metrics"]["findings"]["claims"][0]["verdict"] = wrong
    (directory / "metrics.json").write_text(json.dumps(record))
    assert recompute.main([str(directory)]) == 1
    mdd = rows[0]["recorded MDD"]
    expected = f"({wrong}; MDD {mdd}), recomputed {rows[0]['recorded']} ({rows[0]['recorded verdict']}; MDD {mdd})"
    assert expected in capsys.readouterr().out


def test_a_recomputed_verdict_reads_the_recorded_conditions_the_papers_delta_and_a_margin():
    claim = {"claim": "A beats B", "paper": "0.310 vs 0.300", "condition": ""}
    assert recompute.recomputed_verdict(claim, -0.02, 0.03, 0.04) == "underpowered here"  # paper Δ 0.01 < MDD
    assert recompute.recomputed_verdict(claim | {"paper": "Figure 3"}, -0.02, 0.03, 0.04) == "not shown at this scale"
    assert recompute.recomputed_verdict(claim, 0.01, 0.03, 0.04) == "holds"
    assert recompute.recomputed_verdict(claim | {"condition": "NOT met: one seed"}, 0.01, 0.03, 0.04) == (
        "not testable at this scale"
    )
    near = {"claim": "C = 100 performs near C = 50 (our threshold: |Δ| < 0.01)", "paper": "", "condition": ""}
    assert recompute.recomputed_verdict(near, -0.005, 0.005, 0.04) == "holds"
    assert recompute.recomputed_verdict(near, -0.02, 0.005, 0.04) == "not shown at this scale"
    # the margin as the record keeps it (the statement is read only in a record made before it kept one)
    assert recompute.recomputed_verdict(near | {"margin": 0.03}, -0.02, 0.005, 0.04) == "holds"
    assert recompute.recomputed_verdict(near | {"margin": None}, -0.005, 0.005, 0.04) == "not shown at this scale"


def test_the_scores_file_is_the_same_bytes_for_the_same_scores(tmp_path):
    scores = {"A": {"seeds": [0], "measures": {"MRR@100": [{"q2": 0.5, "q1": 1 / 3}]}}}
    first = recompute.write_scores(tmp_path, scores).read_bytes()
    assert recompute.write_scores(tmp_path, scores).read_bytes() == first
    assert json.loads(gzip.decompress(first))["A"]["measures"]["MRR@100"] == [{"q1": 1 / 3, "q2": 0.5}]


def test_every_committed_records_intervals_recompute_from_its_scores():
    """Where a committed record has its scores (records made after they were written) and was made by
    the checkout's verdict code (a record made by other verdict code is stale, and the report's first
    screen says so), every claim that names two rows recomputes to the interval and detectable difference
    it shows."""
    import json

    from longdoc.experiments.cache import verdicts_fingerprint

    def current(path) -> bool:
        return json.loads(path.read_text()).get("record_fingerprint", "+").split("+")[1] == verdicts_fingerprint()

    folders = [p.parent for p in committed_records() if (p.parent / recompute.SCORES).is_file() and current(p)]
    if not folders:
        pytest.skip("no committed record with its scores was made by the checkout's verdict code")
    for folder in folders:
        for row in recompute.check_record(folder):
            assert row["agrees"] is not False, (folder, row)


def test_the_recompute_command_names_a_folder_without_a_record(tmp_path, capsys):
    with pytest.raises(SystemExit):
        recompute.main([str(tmp_path)])
    assert "no metrics.json in" in capsys.readouterr().err


def test_a_pair_comparison_recomputes_to_its_t_interval():
    """Document pairs take the t interval with the dyadic-robust SE (no resampling): recomputed from the
    scores it is the interval the study would record, every time."""
    from longdoc.eval.significance import seed_query_bootstrap
    from longdoc.experiments.verdicts import interval_text

    rng = __import__("numpy").random.default_rng(0)
    keys = [f"s{i % 7}\tt{i % 11}" for i in range(40)]
    a = [{k: float(rng.random() < 0.7) for k in keys} for _ in range(2)]
    b = [{k: float(rng.random() < 0.5) for k in keys} for _ in range(2)]
    scores = {"A": {"seeds": [0, 1], "measures": {"Accuracy": a}}, "B": {"seeds": [0, 1], "measures": {"Accuracy": b}}}
    claim = {"claim": "A beats B", "system": "A", "against": "B", "measure": "Accuracy", "paper": "", "condition": ""}
    stats = seed_query_bootstrap(a, b)
    found = recompute.recompute_claim(scores, claim)
    assert found[INTERVAL] == interval_text(stats["mean_difference"], stats["ci_low"], stats["ci_high"])
    assert found == recompute.recompute_claim(scores, claim) and stats["degrees_of_freedom"] < 60


def test_a_claim_without_an_interval_is_told_apart_from_one_the_scores_cannot_recompute(tmp_path, capsys):
    """A check or an untestable bucket has no interval to recompute; a claim with an interval that names no
    two rows (a per-bucket or per-document comparison) is not recomputable from the scores, and says so."""
    claims = [
        {"claim": "a bucket's claim", INTERVAL: "+0.0338 [-0.00776, +0.0786]", "verdict": "not shown at this scale"},
        {"claim": "an empty bucket's claim", INTERVAL: "—", "verdict": "not testable at this scale"},
        {"claim": "a check", INTERVAL: None, "verdict": "holds"},
    ]
    (tmp_path / "metrics.json").write_text(
        json.dumps({"notebook": "24_x", "metrics": {"findings": {"claims": claims}}})
    )
    recompute.write_scores(tmp_path, {})  # scores beside it, none of a row these claims name
    assert [recompute.has_interval(c[INTERVAL]) for c in claims] == [True, False, False]
    assert recompute.has_interval("nan [nan, nan]") is False
    assert recompute.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0 of 1 intervals and verdicts recomputed and equal (2 of its 3 claims have none)" in out
    assert (
        "not recomputable from the scores (it names no two rows; its notebook recomputes it): a bucket's claim" in out
    )
    assert "no interval to recompute: an empty bucket's claim" in out and "no interval to recompute: a check" in out
    (tmp_path / recompute.SCORES).unlink()
    assert recompute.main([str(tmp_path)]) == 0
    assert "not recomputable here (no per-item scores beside this record): a bucket's claim" in capsys.readouterr().out
    ladder = {"claim": "a rung's claim", "ours there: Δ [95% CI]": "+0.02 [-0.01, +0.05]"}
    assert recompute.recorded_interval(ladder) == "+0.02 [-0.01, +0.05]" and recompute.recorded_interval({}) is None
