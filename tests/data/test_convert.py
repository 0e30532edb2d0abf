"""``python -m longdoc.data.convert``: published formats to a BEIR folder the notebooks read."""

import os
import shutil
import signal
import subprocess
import sys

from longdoc.data.beir import files_checksum, load_beir, read_corpus
from longdoc.data.convert import main
from longdoc.data.pairs import load_pairs
from longdoc.io import exclusive


def test_msmarco_with_trec_dl_becomes_a_beir_folder_with_a_checksum(fixtures, tmp_path, capsys):
    d = fixtures / "msmarco"
    out = tmp_path / "marco"
    args = [
        "msmarco",
        "--docs",
        str(d / "msmarco-docs.tsv.gz"),
        "--out",
        str(out),
        "--split",
        f"train={d / 'msmarco-doctrain-queries.tsv.gz'},{d / 'msmarco-doctrain-qrels.tsv.gz'}",
        "--split",
        f"test={d / 'msmarco-test2019-queries.tsv.gz'},{d / '2019qrels-docs.txt'}",
    ]
    assert main(args) == 0
    dataset = load_beir(out)
    assert sorted(dataset.corpus) == ["D1359209", "D1555982", "D301595", "D3300001"]
    assert dataset.qrels["test"]["1037798"] == {"D1555982": 0, "D1359209": 3}
    assert len(dataset.checksum) == 64 and dataset.checksum == files_checksum(out)
    assert f"checksum {dataset.checksum[:16]}" in capsys.readouterr().out
    assert main(args) == 2  # never over an existing folder without --force
    assert "exists and is not empty (pass --force" in capsys.readouterr().err
    assert main(args + ["--force"]) == 0 and load_beir(out).checksum == dataset.checksum  # same bytes


def test_the_streamed_conversion_holds_what_the_in_memory_reader_reads(fixtures, tmp_path):
    """The converter streams the documents (only ids in memory); the dataset it writes is the one
    ``load_msmarco_documents`` builds in memory from the same files, TREC DL 2020 (graded, judging the
    empty D999 that is skipped) included."""
    from longdoc.data.msmarco import load_msmarco_documents

    d = fixtures / "msmarco"
    splits = {
        "train": (d / "msmarco-doctrain-queries.tsv.gz", d / "msmarco-doctrain-qrels.tsv.gz"),
        "dl19": (d / "msmarco-test2019-queries.tsv.gz", d / "2019qrels-docs.txt"),
        "dl20": (d / "msmarco-test2020-queries.tsv.gz", d / "2020qrels-docs.txt"),
    }
    command = ["msmarco", "--docs", str(d / "msmarco-docs.tsv.gz"), "--out", str(tmp_path / "marco")]
    for name, (queries, qrels) in splits.items():
        command += ["--split", f"{name}={queries},{qrels}"]
    assert main(command) == 2  # D999 is judged in 2020 and skipped as empty: said, not dropped silently
    assert main(command + ["--skip-unknown-docs"]) == 0
    written = load_beir(tmp_path / "marco")
    in_memory = load_msmarco_documents(d / "msmarco-docs.tsv.gz", splits, on_unknown_doc="skip")
    assert dict(written.corpus) == in_memory.corpus
    assert written.queries == in_memory.queries and written.qrels == in_memory.qrels
    assert written.qrels["dl20"] == {"1030303": {"D3300001": 3, "D301595": 0}, "1037496": {"D1359209": 2}}
    assert written.manifest["import_stats"] == {
        "skipped_empty": 1,
        "train_skipped_unknown": 0,
        "dl19_skipped_unknown": 0,
        "dl20_skipped_unknown": 1,
    }


def test_a_bad_input_writes_nothing(fixtures, tmp_path, capsys):
    docs = tmp_path / "docs.tsv"
    docs.write_text("D1\tu\tt\tbody\nD2\tu\tt\n")
    queries = fixtures / "msmarco" / "msmarco-doctrain-queries.tsv.gz"
    qrels = fixtures / "msmarco" / "msmarco-doctrain-qrels.tsv.gz"
    out = tmp_path / "out"
    assert main(["msmarco", "--docs", str(docs), "--split", f"train={queries},{qrels}", "--out", str(out)]) == 2
    assert "docs.tsv, line 2: expected 4 tab-separated fields" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [docs]
    assert main(["msmarco", "--docs", str(docs), "--split", f"train={queries}", "--out", str(out)]) == 2
    assert "expected NAME=QUERIES,QRELS" in capsys.readouterr().err


def test_nq320k_and_pairs(fixtures, tmp_path):
    out = tmp_path / "nq"
    assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(out)]) == 0
    assert set(load_beir(out).qrels) >= {"train", "test"}
    wiki = tmp_path / "wiki"
    shutil.copytree(fixtures / "beir", wiki)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("1\td1\td2\n0\td1\td9\n")
    command = ["pairs", "--format", "smash", "--split", f"test={pairs}", "--out", str(wiki)]
    assert main(command) == 2  # d9 is not in the corpus
    assert main(command + ["--skip-unknown-docs"]) == 0
    assert [(p.source, p.target, p.label) for p in load_pairs(wiki)["test"]] == [("d1", "d2", 1)]


def test_a_converter_never_writes_over_or_around_its_input(fixtures, tmp_path, capsys):
    """``nq320k --dir X --out X --force`` would have replaced its own input files; so would an --out that
    holds an input file, or one inside an input folder. Nothing is touched; the message names the input."""
    nq = tmp_path / "nq"
    shutil.copytree(fixtures / "nq320k", nq)
    before = sorted(p.name for p in nq.iterdir())
    for out in (nq, nq / "converted"):
        assert main(["nq320k", "--dir", str(nq), "--out", str(out), "--force"]) == 2
        assert f"--out {out}: overlaps the input {nq}" in capsys.readouterr().err
    assert sorted(p.name for p in nq.iterdir()) == before
    d = tmp_path / "marco"
    shutil.copytree(fixtures / "msmarco", d)
    split = f"train={d / 'msmarco-doctrain-queries.tsv.gz'},{d / 'msmarco-doctrain-qrels.tsv.gz'}"
    assert (
        main(["msmarco", "--docs", str(d / "msmarco-docs.tsv.gz"), "--split", split, "--out", str(d), "--force"]) == 2
    )
    assert "overlaps the input" in capsys.readouterr().err and (d / "msmarco-docs.tsv.gz").is_file()


def test_a_split_name_is_a_plain_name(fixtures, tmp_path, capsys):
    d = fixtures / "msmarco"
    for name in ("../outside", "a/b", ".hidden", ""):
        split = f"{name}={d / 'msmarco-doctrain-queries.tsv.gz'},{d / 'msmarco-doctrain-qrels.tsv.gz'}"
        assert (
            main(["msmarco", "--docs", str(d / "msmarco-docs.tsv.gz"), "--split", split, "--out", str(tmp_path / "o")])
            == 2
        )
        error = capsys.readouterr().err
        assert "must be letters, digits" in error or "expected NAME=QUERIES,QRELS" in error
    assert not (tmp_path / "o").exists() and not (tmp_path / "outside.tsv").exists()


def test_pairs_replace_the_whole_pairs_folder_and_need_force(fixtures, tmp_path, capsys):
    """A rerun without a dev split used to keep the old pairs/dev.tsv, loaded beside the new train and test."""
    wiki = tmp_path / "wiki"
    shutil.copytree(fixtures / "beir", wiki)
    with open(wiki / "corpus.jsonl", "a") as corpus:
        corpus.write('{"_id": "d3", "text": "A third page."}\n')
    train, test = tmp_path / "train.tsv", tmp_path / "test.tsv"
    train.write_text("1\td1\td2\n")
    test.write_text("0\td2\td3\n")
    first = ["pairs", "--format", "smash", "--split", f"train={train}", "--split", f"dev={test}", "--out", str(wiki)]
    assert main(first) == 0
    again = ["pairs", "--format", "smash", "--split", f"train={train}", "--split", f"test={test}", "--out", str(wiki)]
    assert main(again) == 2
    assert "pairs: exists and is not empty (pass --force to replace it)" in capsys.readouterr().err
    assert main(again + ["--force"]) == 0
    assert sorted(load_pairs(wiki)) == ["test", "train"]
    assert sorted(p.name for p in (*wiki.iterdir(), *tmp_path.iterdir()) if p.name.startswith(".")) == []  # no lock


def test_a_second_converter_of_the_same_out_is_refused_at_once(fixtures, tmp_path, capsys):
    out = tmp_path / "nq"
    with exclusive(out):  # another converter, mid-way (a lock is per open file, so this process counts)
        assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: process {os.getpid()} on " in err and "is writing it now" in err
    assert not out.exists()
    assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(out)]) == 0


def test_an_out_changed_during_the_conversion_is_kept_and_ours_discarded(fixtures, tmp_path, capsys, monkeypatch):
    """A writer that ignores the lock (another host on a network disk): the check at the final rename."""
    import longdoc.data.nq320k as nq320k

    out = tmp_path / "nq"
    real = nq320k.convert_nq320k_files

    def meanwhile(*args, **kwargs):
        out.mkdir()
        (out / "theirs.txt").write_text("theirs")
        return real(*args, **kwargs)

    monkeypatch.setattr(nq320k, "convert_nq320k_files", meanwhile)
    assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(out)]) == 2
    assert "changed by another writer while this one ran; kept theirs" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nq"]


def test_a_file_of_out_edited_in_place_during_the_conversion_is_seen(fixtures, tmp_path, capsys, monkeypatch):
    import longdoc.data.nq320k as nq320k

    out = tmp_path / "nq"
    assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(out)]) == 0
    real = nq320k.convert_nq320k_files

    def meanwhile(*args, **kwargs):
        with open(out / "qrels" / "test.tsv", "a") as handle:  # the folder itself keeps its inode and time
            handle.write("")
            handle.flush()
        os.utime(out / "qrels" / "test.tsv", ns=(1, 1))
        return real(*args, **kwargs)

    monkeypatch.setattr(nq320k, "convert_nq320k_files", meanwhile)
    assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(out), "--force"]) == 2
    assert "changed by another writer" in capsys.readouterr().err


def test_a_converter_sweeps_only_its_own_leftovers_beside_out(fixtures, tmp_path):
    """--out is the user's folder: a hidden .keep.old or .ssh.old beside it is theirs, never ours."""
    for name in (".keep.old", ".ssh.old"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "secret").write_text("theirs")
    (tmp_path / "ssh").mkdir()
    assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(tmp_path / "nq")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".keep.old", ".ssh.old", "nq", "ssh"]
    assert (tmp_path / ".ssh.old" / "secret").read_text() == "theirs"


def test_out_given_as_dot_is_the_current_folder(fixtures, tmp_path, monkeypatch):
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert main(["nq320k", "--dir", str(fixtures / "nq320k"), "--out", "."]) == 0
    assert load_beir(tmp_path / "here").qrels


KILLED_MID_WRITE = """
import os, signal, sys
import longdoc.data.convert as convert
real = convert._landed
def write_then_die(folder, out, manifest):
    real(folder, out, manifest)
    os.kill(os.getpid(), signal.SIGKILL)
convert._landed = write_then_die
convert.main(sys.argv[1:])
"""


def test_a_converter_killed_mid_write_loses_nothing_and_a_rerun_sweeps_its_leftovers(fixtures, tmp_path):
    out = tmp_path / "nq"
    command = ["nq320k", "--dir", str(fixtures / "nq320k"), "--out", str(out)]
    assert main(command) == 0
    before = files_checksum(out)
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, *command, "--force"], capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert any(name.endswith(".tmp") for name in leftovers), leftovers  # its half-written folder (and lock file)
    assert files_checksum(out) == before  # the previous output is whole
    assert main(command + ["--force"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nq"]  # swept, lock released and removed
    assert files_checksum(out) == before


def test_a_pair_collection_becomes_documents_then_pairs_beside_them(fixtures, tmp_path, capsys):
    """Wiki65K's shape: documents (id, title, text) into corpus.jsonl, then SMASH-format pairs beside it;
    a document file of another shape names its line and writes nothing."""
    out = tmp_path / "wiki65k"
    assert main(["documents", "--docs", str(fixtures / "pairs" / "wiki65k_docs.tsv"), "--out", str(out)]) == 0
    assert f"{out}: 6 documents" in capsys.readouterr().out
    split = f"test={fixtures / 'pairs' / 'wiki65k_test.tsv'}"
    assert main(["pairs", "--format", "smash", "--split", split, "--out", str(out)]) == 0
    pairs = load_pairs(out, known_ids=read_corpus(out / "corpus.jsonl"))
    assert [(p.source, p.target, p.label) for p in pairs["test"]] == [("doc_1", "doc_2", 1), ("doc_1", "doc_3", 0)]
    assert read_corpus(out / "corpus.jsonl")["doc_2"].title == "Engineering Council"
    bad = tmp_path / "docs.tsv"
    bad.write_text("doc_1\tA title\tA text\ndoc_2\tonly a title\n")
    assert main(["documents", "--docs", str(bad), "--out", str(tmp_path / "other")]) == 2
    assert "docs.tsv, line 2: expected 3 tab-separated fields 'id title text', found 2" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
