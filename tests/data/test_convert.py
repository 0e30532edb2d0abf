"""``python -m longdoc.data.convert``: published formats to a BEIR folder the notebooks read."""

import shutil

from longdoc.data.beir import files_checksum, load_beir
from longdoc.data.convert import main
from longdoc.data.pairs import load_pairs


def test_msmarco_with_trec_dl_becomes_a_beir_folder_with_a_checksum(fixtures, tmp_path, capsys):
    d = fixtures / "msmarco"
    out = tmp_path / "marco"
    args = ["msmarco", "--docs", str(d / "msmarco-docs.tsv"), "--out", str(out),
            "--split", f"train={d / 'msmarco-doctrain-queries.tsv'},{d / 'msmarco-doctrain-qrels.tsv'}",
            "--split", f"test={d / 'msmarco-test2019-queries.tsv'},{d / '2019qrels-docs.txt'}"]
    assert main(args) == 0
    dataset = load_beir(out)
    assert sorted(dataset.corpus) == ["D1359209", "D1555982", "D301595"]
    assert dataset.qrels["test"]["1037798"] == {"D1555982": 0, "D1359209": 3}
    assert len(dataset.checksum) == 64 and dataset.checksum == files_checksum(out)
    assert f"checksum {dataset.checksum[:16]}" in capsys.readouterr().out
    assert main(args) == 2  # never over an existing folder without --force
    assert "exists and is not empty (pass --force" in capsys.readouterr().err
    assert main(args + ["--force"]) == 0 and load_beir(out).checksum == dataset.checksum  # same bytes


def test_a_bad_input_writes_nothing(fixtures, tmp_path, capsys):
    docs = tmp_path / "docs.tsv"
    docs.write_text("D1\tu\tt\tbody\nD2\tu\tt\n")
    queries = fixtures / "msmarco" / "msmarco-doctrain-queries.tsv"
    qrels = fixtures / "msmarco" / "msmarco-doctrain-qrels.tsv"
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
    split = f"train={d / 'msmarco-doctrain-queries.tsv'},{d / 'msmarco-doctrain-qrels.tsv'}"
    assert main(["msmarco", "--docs", str(d / "msmarco-docs.tsv"), "--split", split, "--out", str(d), "--force"]) == 2
    assert "overlaps the input" in capsys.readouterr().err and (d / "msmarco-docs.tsv").is_file()


def test_a_split_name_is_a_plain_name(fixtures, tmp_path, capsys):
    d = fixtures / "msmarco"
    for name in ("../outside", "a/b", ".hidden", ""):
        split = f"{name}={d / 'msmarco-doctrain-queries.tsv'},{d / 'msmarco-doctrain-qrels.tsv'}"
        assert main(["msmarco", "--docs", str(d / "msmarco-docs.tsv"), "--split", split, "--out", str(tmp_path / "o")]) == 2
        error = capsys.readouterr().err
        assert "must be letters, digits" in error or "expected NAME=QUERIES,QRELS" in error
    assert not (tmp_path / "o").exists() and not (tmp_path / "outside.tsv").exists()
