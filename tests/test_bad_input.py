"""The bad-input table: every malformed input a user has fed us, and the message it must get.

Each case builds its input in a temporary folder, runs the cheap reader or check that must reject it
(before any expensive work), and asserts the message names the problem and where it is (file and
line, or the parameter). The table is printed in the README's "Run it on your own data" section.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from longdoc.data.beir import load_beir, read_corpus, read_qrels, read_queries
from longdoc.data.convert import main as convert_main
from longdoc.data.corpus_store import write_corpus_store
from longdoc.data.msmarco import load_msmarco_documents, read_msmarco_docs, read_queries_tsv
from longdoc.data.pairs import load_pairs, read_gwikimatch, read_pair_tsv, read_smash_pairs
from longdoc.data.trec import read_trec_qrels
from longdoc.eval.metrics import evaluate
from longdoc.eval.run_files import read_run, write_run
from longdoc.experiments.parameters import check_parameters
from longdoc.experiments.profiles import load_profile, parameters_for
from longdoc.io import exclusive
from longdoc.text.segments import write_token_store

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "beir"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def beir_copy(tmp: Path) -> Path:
    directory = tmp / "mine"
    shutil.copytree(FIXTURE, directory)
    with (directory / "queries.jsonl").open("a") as handle:
        handle.write('{"_id": "q3", "text": "lightest noble element"}\n')
    (directory / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq3\td1\t1\n")
    return directory


def corpus_with(tmp: Path, second_line: str | bytes) -> Path:
    path = tmp / "corpus.jsonl"
    first = b'{"_id": "d1", "title": "T", "text": "x"}\n'
    path.write_bytes(first + (second_line if isinstance(second_line, bytes) else second_line.encode()) + b"\n")
    return path


def write(tmp: Path, name: str, content: str | bytes) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def profile_file(tmp: Path, text: str, name: str = "mine") -> Path:
    folder = tmp / "notebooks" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    for notebook in NOTEBOOKS:
        target = tmp / "notebooks" / notebook.name
        if not target.exists():
            shutil.copy(notebook, target)
    return write(folder, f"{name}.yaml", text)


def with_beir(change):
    def case(tmp: Path):
        directory = beir_copy(tmp)
        change(directory)
        dataset = load_beir(directory)
        for split in ("train", "dev", "test"):
            dataset.split(split)

    return case


def run_all(*args: str, env: dict | None = None, prepare=None, cwd: str | None = None):
    """``run_all.sh ARGS`` (``{tmp}`` replaced), which must exit 2 before any notebook starts; ``prepare(tmp)``
    builds its input first, ``cwd`` (under ``tmp``) is where it is called from."""

    def case(tmp: Path):
        if prepare:
            prepare(tmp)
        argv = [a.replace("{tmp}", str(tmp)) for a in args]
        environment = {**os.environ, **{k: v.replace("{tmp}", str(tmp)) for k, v in (env or {}).items()}}
        done = subprocess.run(
            ["bash", str(ROOT / "run_all.sh"), *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env=environment,
            cwd=tmp / cwd if cwd else None,
        )
        assert done.returncode == 2, done
        assert "notebooks/00_data.ipynb (profile" not in done.stdout  # refused before the first notebook
        raise ValueError(done.stderr)

    return case


def limited_file_size(code: str, limit: int = 60):
    """``code`` run by Python under a file-size limit of ``limit`` bytes (``ulimit -f``; root is bound too)."""

    def case(tmp: Path):
        import resource
        import sys

        def limit_size():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        done = subprocess.run(
            [sys.executable, "-c", code.replace("{tmp}", str(tmp)).replace("{fixtures}", str(ROOT / "tests/fixtures"))],
            preexec_fn=limit_size,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode != 0, done
        raise OSError(done.stderr.strip().splitlines()[-1])

    return case


def built_store(tmp: Path) -> Path:
    from longdoc.data.corpus_store import write_corpus_store

    return write_corpus_store(FIXTURE / "corpus.jsonl", tmp / "store")


def damaged_store(damage):
    def case(tmp: Path):
        from longdoc.data.corpus_store import CorpusStore

        store = built_store(tmp)
        damage(store)
        CorpusStore(store)

    return case


def damaged_token_store(damage):
    def case(tmp: Path):
        from longdoc.text.segments import MappedSegments, write_token_store

        store = write_token_store(tmp / "tokens", [[[5, 6, 7], [8]], [[9, 10]]], vocabulary=30522, spec={})
        damage(store)
        MappedSegments(store)

    return case


def cut_to(name: str, size: int):
    def damage(folder: Path):
        with open(folder / name, "r+b") as handle:
            handle.truncate(size)

    return damage


def matching_folder(train: str, test: str, dev: str = "d3\td4\t1\n"):
    """A matching dataset (corpus d1-d4, pairs per split) in ``tmp/match``, loaded."""

    def case(tmp: Path):
        from longdoc.data.matching import load_matching

        folder = tmp / "match"
        rows = "".join(f'{{"_id": "d{i}", "text": "page {i}"}}\n' for i in range(1, 5))
        write(folder, "corpus.jsonl", rows)
        header = "source-id\ttarget-id\tlabel\n"
        for split, text in (("train", train), ("dev", dev), ("test", test)):
            write(folder, f"pairs/{split}.tsv", header + text)
        load_matching(str(folder))

    return case


def empty_qrels_folder(tmp: Path) -> None:
    shutil.copytree(FIXTURE, tmp / "emptyq")
    for path in (tmp / "emptyq" / "qrels").iterdir():
        path.unlink()


def converter(*args: str, holding: str | None = None):
    """A ``python -m longdoc.data.convert`` command run in ``tmp`` (``{tmp}`` in an argument is replaced);
    ``holding``: a folder another converter has locked meanwhile."""

    def case(tmp: Path):
        argv = [a.replace("{tmp}", str(tmp)).replace("{fixtures}", str(ROOT / "tests" / "fixtures")) for a in args]
        errors = io.StringIO()
        with contextlib.ExitStack() as stack:
            if holding:
                stack.enter_context(exclusive(tmp / holding))
            stack.enter_context(contextlib.redirect_stderr(errors))
            assert convert_main(argv) == 2
        raise ValueError(errors.getvalue())

    return case


def edit_json(path: Path, change) -> None:
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def symlink_loop(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f".{name}.other").symlink_to(folder / name)  # hidden: not a stray file of the folder
    (folder / name).symlink_to(folder / f".{name}.other")
    return folder / name


def dangling(folder: Path, name: str) -> Path:
    (folder / name).symlink_to(folder / "gone.jsonl")
    return folder / name


def cached_into(cache: Path):
    from longdoc.experiments import cache as module

    original = module.CACHE_DIR
    module.CACHE_DIR = cache
    try:
        module.cached_json("bad-input", lambda: 1, case="a cache folder that is a file")
    finally:
        module.CACHE_DIR = original


def pairs_folder(tmp: Path) -> None:
    shutil.copytree(FIXTURE, tmp / "wiki")
    write(tmp, "p.tsv", "1\td1\td2\n")
    write(tmp, "wiki/pairs/test.tsv", "source-id\ttarget-id\tlabel\nd1\td2\t1\n")


def prepared(prepare, case):
    def run(tmp: Path):
        prepare(tmp)
        case(tmp)

    return run


NESTED_ALIASES = (
    "seeds: &f [&e [&d [&c [&b [&a [x, x, x, x, x, x, x, x, x], *a, *a, *a, *a, *a, *a, *a, *a], *b, *b, *b, *b, *b,"
    " *b, *b, *b], *c, *c, *c, *c, *c, *c, *c, *c], *d, *d, *d, *d, *d, *d, *d, *d], *e, *e, *e, *e, *e, *e, *e, *e]\n"
)

QRELS_HEADER = "query-id\tcorpus-id\tscore\n"

CASES = [
    # corpus.jsonl
    (
        "corpus _id null",
        lambda t: read_corpus(corpus_with(t, '{"_id": null, "text": "y"}')),
        r"corpus.jsonl, line 2: document id must be a string, got null",
    ),
    (
        "corpus _id empty",
        lambda t: read_corpus(corpus_with(t, '{"_id": "", "text": "y"}')),
        r"corpus.jsonl, line 2: document id is empty",
    ),
    (
        "corpus _id with a space",
        lambda t: read_corpus(corpus_with(t, '{"_id": "a b", "text": "y"}')),
        r"line 2: document id 'a b' contains whitespace",
    ),
    (
        "corpus _id in NFD form",
        lambda t: read_corpus(corpus_with(t, '{"_id": "cafe\\u0301", "text": "y"}')),
        r"line 2: document id 'cafe\\u0301' is not in Unicode NFC form \(its NFC form, which looks the same: "
        r"'caf\\xe9'\)",
    ),
    (
        "corpus _id with a zero-width space",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d\\u200b2", "text": "y"}')),
        r"line 2: document id 'd\\u200b2' contains the invisible character U\+200B",
    ),
    (
        "corpus _id with a lone surrogate",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d\\ud800", "text": "y"}')),
        r"line 2: document id 'd\\ud800' contains the invisible character U\+D800",
    ),
    (
        "corpus _id of 10 MB with a space (the message stays short)",
        lambda t: read_corpus(corpus_with(t, json.dumps({"_id": "a " + "b" * 10_000_000, "text": "y"}))),
        r"\A(?=.{0,300}\Z).*line 2: document id 'a b+\.\.\.b+' contains whitespace",
    ),
    (
        "corpus object with a repeated _id",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "_id": "d3", "text": "y"}')),
        r"corpus.jsonl, line 2: the key '_id' appears twice in one JSON object",
    ),
    (
        "corpus text of zero-width and control characters only",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "title": "\\u200b", "text": "\\u0007 \\u200d"}')),
        r"line 2: document 'd2' is empty",
    ),
    (
        "corpus text is a list",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "text": ["a", "b"]}')),
        r"line 2: field 'text' must be a string, got array",
    ),
    (
        "corpus title is an object",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "title": {"a": 1}, "text": "y"}')),
        r"line 2: field 'title' must be a string, got object",
    ),
    (
        "corpus Latin-1 byte",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "text": "caf\xe9"}'.encode("latin-1"))),
        r"corpus.jsonl, line 2: byte 0xe9 at column 27 is not UTF-8",
    ),
    (
        "corpus line not JSON",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "text": }')),
        r"line 2: not valid JSON",
    ),
    (
        "corpus duplicate id",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d1", "text": "y"}')),
        r"line 2: duplicate document id 'd1'",
    ),
    (
        "corpus empty document",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "title": "", "text": " "}')),
        r"line 2: document 'd2' is empty",
    ),
    (
        "corpus without documents",
        lambda t: read_corpus(write(t, "corpus.jsonl", "\n")),
        r"the corpus holds no documents",
    ),
    # queries and qrels
    (
        "query without text",
        lambda t: read_queries(write(t, "queries.jsonl", '{"_id": "q1", "text": ""}\n')),
        r"queries.jsonl, line 1: query 'q1' has no text",
    ),
    (
        "corpus.jsonl is a directory",
        with_beir(lambda d: ((d / "corpus.jsonl").unlink(), (d / "corpus.jsonl").mkdir())),
        r"mine/corpus.jsonl: is a directory, not a file",
    ),
    (
        "queries.jsonl empty",
        with_beir(lambda d: write(d, "queries.jsonl", "")),
        r"queries.jsonl: holds no queries",
    ),
    (
        "qrels named test.txt",
        with_beir(lambda d: (d / "qrels" / "test.tsv").rename(d / "qrels" / "test.txt")),
        r"qrels: \['test.txt'\] are not <split>.tsv files",
    ),
    (
        "qrels with 2 columns",
        lambda t: read_qrels(write(t, "q.tsv", QRELS_HEADER + "q1\td1\n")),
        r"q.tsv, line 2: expected 3 tab-separated fields",
    ),
    (
        "qrels relevance not an integer",
        lambda t: read_qrels(write(t, "q.tsv", QRELS_HEADER + "q1\td1\thigh\n")),
        r"q.tsv, line 2: relevance 'high' is not an integer",
    ),
    (
        "qrels relevance with an underscore",
        lambda t: read_qrels(write(t, "q.tsv", QRELS_HEADER + "q1\td1\t1_0\n")),
        r"q.tsv, line 2: relevance '1_0' is not an integer \(ASCII digits",
    ),
    (
        "qrels relevance in Arabic-Indic digits",
        lambda t: read_qrels(write(t, "q.tsv", QRELS_HEADER + "q1\td1\t\u0661\n")),
        r"q.tsv, line 2: relevance '\u0661' is not an integer",
    ),
    (
        "TREC qrels document id in NFD form",
        lambda t: read_trec_qrels(
            write(t, "q.txt", "q1 Q0 cafe\u0301 1\n"), known_docs={"caf\u00e9"}, on_unknown="skip"
        ),
        r"q.txt, line 1: document id 'cafe\\u0301' is not in Unicode NFC form",
    ),
    (
        "TREC qrels relevance with an underscore",
        lambda t: read_trec_qrels(write(t, "q.txt", "q1 Q0 d1 1_0\n")),
        r"q.txt, line 1: relevance '1_0' is not an integer",
    ),
    (
        "qrels unknown document",
        with_beir(lambda d: write(d, "qrels/dev.tsv", QRELS_HEADER + "q1\td9\t1\n")),
        r"dev.tsv, line 2: unknown document id 'd9'",
    ),
    (
        "empty test split",
        with_beir(lambda d: write(d, "qrels/test.tsv", QRELS_HEADER)),
        r"split 'test' \(qrels/test.tsv\) has no query with a relevant document",
    ),
    (
        "a query judged in train and in test",
        with_beir(lambda d: write(d, "qrels/test.tsv", QRELS_HEADER + "q2\td2\t1\nq1\td2\t0\n")),
        r"train.tsv, line 2: query 'q1' is judged in split 'train' and in split 'test' \(.*test.tsv, line 3\): "
        r"a query belongs to one split",
    ),
    (
        "MS MARCO converter: a query judged in train and in test",
        lambda t: load_msmarco_documents(
            write(t, "docs.tsv", "D1\turl\tT\tbody one\nD2\turl\tT\tbody two\n"),
            {
                "train": (write(t, "tq.tsv", "1\tfirst\n2\tsecond\n"), write(t, "tr.tsv", "1 0 D1 1\n2 0 D2 1\n")),
                "test": (write(t, "sq.tsv", "2\tsecond\n"), write(t, "sr.tsv", "2 Q0 D1 1\n")),
            },
        ),
        r"sr.tsv, line 1: query '2' is judged in split 'test' and in split 'train' \(.*tr.tsv, line 2\)",
    ),
    (
        "no dev split",
        with_beir(lambda d: (d / "qrels" / "dev.tsv").unlink()),
        r"has no split 'dev' \(no qrels/dev.tsv\)",
    ),
    ("not a BEIR directory", lambda t: load_beir(t), r"corpus.jsonl: missing \(not a BEIR-layout dataset directory\)"),
    (
        "TREC qrels Latin-1 byte",
        lambda t: read_trec_qrels(write(t, "qrels.txt", b"1 0 D\xe9 1\n")),
        r"qrels.txt, line 1: byte 0xe9 at column 6 is not UTF-8",
    ),
    (
        "MS MARCO docs with 3 fields",
        lambda t: read_msmarco_docs(write(t, "docs.tsv", "D1\turl\ttitle\n")),
        r"docs.tsv, line 1: expected 4 tab-separated fields",
    ),
    (
        "MS MARCO query id with a space",
        lambda t: read_queries_tsv(write(t, "queries.tsv", "1 2\twhat\n")),
        r"queries.tsv, line 1: query id '1 2' contains whitespace",
    ),
    # converters: never over or around an input, whole or not at all, one writer at a time
    (
        "converter --out is its own input folder",
        prepared(
            lambda t: shutil.copytree(ROOT / "tests/fixtures/nq320k", t / "nq"),
            converter("nq320k", "--dir", "{tmp}/nq", "--out", "{tmp}/nq", "--force"),
        ),
        r"--out .*nq: overlaps the input .*nq \(replacing it would lose the input\)",
    ),
    (
        "NQ320k converter: a query in train and in test",
        prepared(
            lambda t: (
                shutil.copytree(ROOT / "tests/fixtures/nq320k", t / "nq"),
                write(t, "nq/nq_dev_doc_newid.tsv", "what is a jar\t2\t1\n"),
            ),
            converter("nq320k", "--dir", "{tmp}/nq", "--out", "{tmp}/out"),
        ),
        r"nq_dev_doc_newid.tsv, line 1: query '2' is judged in split 'test' and in split 'train' "
        r"\(.*nq_train_doc_newid.tsv, line 2\)",
    ),
    (
        "NQ320k document id with a zero-width space",
        prepared(
            lambda t: (
                shutil.copytree(ROOT / "tests/fixtures/nq320k", t / "nq"),
                write(t, "nq/NQ_doc_content.tsv", "0\u200b\t\t\tHydrogen is light\t\t\ten\n"),
            ),
            converter("nq320k", "--dir", "{tmp}/nq", "--out", "{tmp}/out"),
        ),
        r"nq/NQ_doc_content.tsv, line 1: document id '0\\u200b' contains the invisible character U\+200B",
    ),
    (
        "converter split name with ../",
        converter("pairs", "--format", "tsv", "--split", "../x={fixtures}/beir/qrels/test.tsv", "--out", "{tmp}/o"),
        r"--split '../x=.*': the name '../x' must be letters, digits, '-' and '_'",
    ),
    (
        "converter --split file is a directory",
        converter("pairs", "--format", "tsv", "--split", "test={tmp}", "--out", "{tmp}/o"),
        r"--split test: .*: is a directory, not a file",
    ),
    (
        "pairs into a folder without a corpus",
        prepared(
            lambda t: write(t, "p.tsv", "a\tb\t1\n"),
            converter("pairs", "--format", "tsv", "--split", "test={tmp}/p.tsv", "--out", "{tmp}/none"),
        ),
        r"--out .*none: holds no corpus.jsonl \(pairs go beside the BEIR corpus",
    ),
    (
        "pairs rerun over existing pairs without --force",
        prepared(
            pairs_folder, converter("pairs", "--format", "smash", "--split", "train={tmp}/p.tsv", "--out", "{tmp}/wiki")
        ),
        r"wiki/pairs: exists and is not empty \(pass --force to replace it\)",
    ),
    (
        "two converters writing one --out",
        converter("nq320k", "--dir", "{fixtures}/nq320k", "--out", "{tmp}/nq", holding="nq"),
        r"nq: process \d+ on \S+ is writing it now; wait for it to end, or write somewhere else",
    ),
    # run files and measures
    (
        "run file NaN score",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d1 1 nan tag\n")),
        r"r.trec, line 1: score 'nan' is not a finite number",
    ),
    (
        "run file 5 fields",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d1 1 0.5\n")),
        r"r.trec, line 1: expected 6 fields",
    ),
    (
        "write_run id with a space",
        lambda t: write_run({"q1": {"d 1": 1.0}}, t / "r.trec"),
        r"query 'q1': document id 'd 1': a run file needs ids by the corpus's rules \(document id 'd 1' contains "
        r"whitespace",
    ),
    (
        "write_run NaN score",
        lambda t: write_run({"q1": {"d1": math.nan}}, t / "r.trec"),
        r"query 'q1', document 'd1': score nan is not finite",
    ),
    (
        "evaluate a NaN score",
        lambda t: evaluate({"q1": {"d1": math.nan}}, {"q1": {"d1": 1}}, ["MRR@10"]),
        r"query 'q1', document 'd1' has score nan \(not a finite number\)",
    ),
    ("evaluate empty qrels", lambda t: evaluate({}, {}, ["MRR@10"]), r"qrels: no query has a relevant document"),
    (
        "evaluate a cut-off of 0",
        lambda t: evaluate({"q1": {"d1": 1.0}}, {"q1": {"d1": 1}}, ["R@0"]),
        r"measure 'R@0': the cut-off must be at least 1",
    ),
    (
        "evaluate a run of another split",
        lambda t: evaluate({"dev-q": {"d1": 1.0}}, {"q1": {"d1": 1}}, ["MRR@10"]),
        r"run: none of its 1 queries \('dev-q'\) is judged in the qrels \(a run of another split",
    ),
    # document pairs
    (
        "GWikiMatch label 3",
        lambda t: read_gwikimatch(write(t, "g.tsv", "a\tb\t3\n")),
        r"g.tsv, line 1: label '3' is not one of \[0, 1, 2\]",
    ),
    (
        "GWikiMatch label -1",
        lambda t: read_gwikimatch(write(t, "g.tsv", "a\tb\t-1\n")),
        r"line 1: label '-1' is not one of \[0, 1, 2\]",
    ),
    (
        "GWikiMatch label 1.7",
        lambda t: read_gwikimatch(write(t, "g.tsv", "a\tb\t1.7\n")),
        r"line 1: label '1.7' is not one of",
    ),
    (
        "pair label inf",
        lambda t: read_smash_pairs(write(t, "w.tsv", "inf\ta\tb\n")),
        r"w.tsv, line 1: label 'inf' is not a number \(ASCII digits\)",
    ),
    (
        "pair with itself",
        lambda t: read_pair_tsv(write(t, "p.tsv", "a\ta\t1\n")),
        r"p.tsv, line 1: document 'a' is paired with itself",
    ),
    (
        "contradictory pair labels",
        lambda t: read_pair_tsv(write(t, "p.tsv", "a\tb\t1\nb\ta\t0\n")),
        r"p.tsv, line 2: label 0 contradicts label 1 of the reverse pair on line 1",
    ),
    (
        "duplicate pair",
        lambda t: read_pair_tsv(write(t, "p.tsv", "a\tb\t1\na\tb\t1\n")),
        r"line 2: duplicate pair \('a', 'b'\); first on line 1",
    ),
    (
        "one-line pair file, 2 columns",
        lambda t: read_pair_tsv(write(t, "p.tsv", "a\tb\n")),
        r"p.tsv, line 1: expected 3 tab-separated fields",
    ),
    # profiles and parameters
    (
        "profile misspelt key",
        lambda t: load_profile(profile_file(t, "batch_sise: 4\n")),
        r"mine.yaml: unknown parameter\(s\) 'batch_sise' \(did you mean 'batch_size'\?\)",
    ),
    (
        "profile misspelt notebook",
        lambda t: load_profile(profile_file(t, "notebooks:\n  10_longtriever_mian: {batch_size: 4}\n")),
        r"mine.yaml: notebooks: \['10_longtriever_mian'\] are not notebooks",
    ),
    (
        "profile sets a parameter the notebook lacks",
        lambda t: load_profile(profile_file(t, "notebooks:\n  00_data: {batch_size: 4}\n")),
        r"mine.yaml: notebooks.00_data sets \['batch_size'\], which 00_data does not declare",
    ),
    (
        "profile duplicate key",
        lambda t: load_profile(profile_file(t, "batch_size: 4\nbatch_size: 5\n")),
        r"mine.yaml: duplicate key 'batch_size' \(line 2\)",
    ),
    (
        "profile malformed YAML",
        lambda t: load_profile(profile_file(t, "batch_size: [4\n")),
        r'mine.yaml: .*in ".*mine.yaml", line',
    ),
    ("profile empty", lambda t: load_profile(profile_file(t, "")), r"mine.yaml: the profile is empty"),
    (
        "profile name differs from its file",
        lambda t: load_profile(profile_file(t, "profile: cpu\n")),
        r"mine.yaml: profile: 'cpu' differs from the file's name 'mine'",
    ),
    (
        "profile batch_size '4' (a string)",
        lambda t: load_profile(profile_file(t, 'batch_size: "4"\n')),
        r"mine.yaml: parameter batch_size='4': expected int, got str",
    ),
    (
        "profile batch_size -1",
        lambda t: load_profile(profile_file(t, "batch_size: -1\n")),
        r"parameter batch_size=-1: must be >= 1",
    ),
    (
        "profile batch_size 4.5",
        lambda t: load_profile(profile_file(t, "batch_size: 4.5\n")),
        r"parameter batch_size=4.5: expected int",
    ),
    (
        "profile block_size 0",
        lambda t: load_profile(profile_file(t, "block_size: 0\n")),
        r"parameter block_size=0: must be >= 3",
    ),
    (
        "a learning rate of 0",
        lambda t: check_parameters({"learning_rates": [0]}),
        r"parameter learning_rates\[0\]=0.0: must be > 0",
    ),
    (
        "a repeated seed",
        lambda t: check_parameters({"seeds": [0, 1, 0]}),
        r"parameter seeds=\[0, 1, 0\]: 0 appears twice",
    ),
    (
        "profile learning rate .nan",
        lambda t: load_profile(profile_file(t, "pretrain_learning_rate: .nan\n")),
        r"parameter pretrain_learning_rate=nan: must be a finite number",
    ),
    (
        "profile ratio .inf",
        lambda t: load_profile(profile_file(t, "mlm_ratio: .inf\n")),
        r"parameter mlm_ratio=inf: must be a finite number",
    ),
    (
        "profile train_steps 1:30 (YAML 1.1: 90)",
        lambda t: load_profile(profile_file(t, "train_steps: 1:30\n")),
        r"mine.yaml: parameter train_steps='1:30': expected int, got str",
    ),
    (
        "profile batch_size 1_000 (YAML 1.1: 1000)",
        lambda t: load_profile(profile_file(t, "batch_size: 1_000\n")),
        r"parameter batch_size='1_000': expected int, got str",
    ),
    (
        "profile bench_isolate yes (YAML 1.1: true)",
        lambda t: load_profile(profile_file(t, "bench_isolate: yes\n")),
        r"parameter bench_isolate='yes': expected bool, got str",
    ),
    (
        "profile train_steps 10**30",
        lambda t: load_profile(profile_file(t, f"train_steps: {10**30}\n")),
        r"parameter train_steps=1000000000000000000000000000000: must be <= 10000000",
    ),
    (
        "profile batch_size beyond any tensor",
        lambda t: load_profile(profile_file(t, f"batch_size: {2**40}\n")),
        r"parameter batch_size=1099511627776: must be <= 2147483647",
    ),
    (
        "profile parameter name that is a number",
        lambda t: load_profile(profile_file(t, "1: 2\n")),
        r"mine.yaml: parameter name 1: expected a name \(a string\)",
    ),
    (
        "profile of nested aliases (megabytes when expanded)",
        lambda t: load_profile(profile_file(t, NESTED_ALIASES)),
        r"\A(?=.{0,700}\Z).*mine.yaml: parameter seeds\[0\]=\[\[\[\.\.\.\], ",
    ),
    (
        "profile's notebook entry sets profile",
        lambda t: load_profile(profile_file(t, "notebooks:\n  00_data: {profile: paper}\n")),
        r"mine.yaml: notebooks.00_data: sets profile, the file's name",
    ),
    (
        "profile's outside_the_study names no notebook of the study",
        lambda t: load_profile(profile_file(t, "outside_the_study: [41_nci_ablations]\n")),
        r"mine.yaml: outside_the_study: \['41_nci_ablations'\] are not notebooks of ",
    ),
    (
        "profile sets command_line",
        lambda t: load_profile(profile_file(t, "command_line: [train_steps]\n")),
        r"mine.yaml: sets command_line, which the profiles tool sets to the names given on run_all.sh's command line",
    ),
    (
        "profile's notebook entry sets command_line",
        lambda t: load_profile(profile_file(t, "notebooks:\n  90_budget_ladder: {command_line: []}\n")),
        r"mine.yaml: notebooks.90_budget_ladder: sets command_line, which the profiles tool sets",
    ),
    (
        "profile seeds: []",
        lambda t: load_profile(profile_file(t, "seeds: []\n")),
        r"mine.yaml: parameter seeds=\[\]: expected a non-empty list",
    ),
    (
        "batch_size not divisible by n_devices",
        lambda t: parameters_for(
            ROOT / "notebooks/profiles/smoke.yaml",
            ROOT / "notebooks/10_longtriever_main.ipynb",
            {"n_devices": 3, "batch_size": 4},
        ),
        r"10_longtriever_main under profile smoke: parameter batch_size=4: not divisible by n_devices=3",
    ),
    (
        "profile nci_alpha beyond any float",
        lambda t: load_profile(profile_file(t, "nci_alpha: 1" + "0" * 400 + "\n")),
        r"mine.yaml: .*a number of 401 characters",
    ),
    (
        "profile a count of 5,000 digits",
        lambda t: load_profile(profile_file(t, "train_steps: 1" + "0" * 5000 + "\n")),
        r"\A(?=.{0,400}\Z).*mine.yaml: '10+\.\.\.0+': a number of 5001 characters",
    ),
    (
        "profile !!float 1_0 (Python's float reads 10.0)",
        lambda t: load_profile(profile_file(t, "nci_alpha: !!float 1_0\n")),
        r"mine.yaml: '1_0' is not a YAML 1.2 float \(line 1\)",
    ),
    (
        "profile key that is a list",
        lambda t: load_profile(profile_file(t, "? [a, b]\n: 1\n")),
        r"mine.yaml: a key must be a name, got a list \(line 1\)",
    ),
    (
        "profile datasets with a number for a role",
        lambda t: load_profile(profile_file(t, "datasets: {1: x, retrieval: y}\n")),
        r"mine.yaml: parameter datasets: key 1 is not a name",
    ),
    (
        "bench_hidden not divisible by bench_heads",
        lambda t: parameters_for(
            ROOT / "notebooks/profiles/smoke.yaml", ROOT / "notebooks/14_efficiency.ipynb", {"bench_hidden": 33}
        ),
        r"14_efficiency under profile smoke: parameter bench_hidden=33: not divisible by bench_heads=\d+",
    ),
    (
        "a growth-curve length not a multiple of the block size",
        lambda t: parameters_for(
            ROOT / "notebooks/profiles/gpu.yaml", ROOT / "notebooks/14_efficiency.ipynb", {"bench_lengths": [256, 512]}
        ),
        r"14_efficiency under profile gpu: parameter bench_lengths=\[256, 512\]: each must be a multiple of "
        r"block_size=512",
    ),
    (
        "query generator batch not divisible by n_devices",
        lambda t: parameters_for(
            ROOT / "notebooks/profiles/smoke.yaml",
            ROOT / "notebooks/40_nci_main.ipynb",
            {"n_devices": 3, "nci_batch_size": 6},
        ),
        r"40_nci_main under profile smoke: parameter n_devices=3: the query generator built here "
        r"\(qg_train_steps=\d+\) trains 8 pairs a step",
    ),
    (
        "papermill -p batch_size four",
        lambda t: check_parameters({"batch_size": "four"}),
        r"parameter batch_size='four': expected int, got str",
    ),
    (
        "run_all.sh a GPU profile where torch sees no GPU (CUDA_VISIBLE_DEVICES empty: none, on any machine)",
        run_all("--profile", "gpu", "--only", "00", env={"CUDA_VISIBLE_DEVICES": ""}),
        r"run_all.sh: this profile is sized for GPUs \(accelerator: gpu\) and torch .* sees none: .*--allow-cpu",
    ),
    (
        "run_all.sh --set profile=paper",
        run_all("--profile", "smoke", "--only", "00", "--set", "profile=paper"),
        r"command line: profile='paper' cannot be set: it is the profile file's name",
    ),
    (
        "run_all.sh --set command_line=[]",
        run_all("--profile", "smoke", "--only", "00", "--set", "command_line=[]"),
        r"command line: command_line cannot be set: it is the list which the profiles tool sets",
    ),
    (
        "run_all.sh --set with malformed YAML",
        run_all("--profile", "smoke", "--only", "00", "--set", "batch_size=[4"),
        r"--set 'batch_size=\[4': the value is not valid YAML \(expected ',' or '\]', but got '<stream end>'\)",
    ),
    (
        "run_all.sh: a later notebook's dev_evals > train_steps, before the first notebook runs",
        run_all("--profile", "smoke", "--only", "00,10", "--set", "dev_evals=1000"),
        r"\Aprofile error: 10_longtriever_main under profile smoke: parameter dev_evals=1000: more dev evaluations "
        r"than train_steps=\d+\n\Z",
    ),
    (
        "run_all.sh: --set under a profile whose records are committed, before the first notebook runs",
        run_all("--profile", "cpu", "--only", "00,01", "--set", "seeds=[0]"),
        r"\Arun_all.sh: 01_baselines: results/cpu/manpages/01_baselines is the folder of the cpu profile's own records, "
        r"and this run's values differ from those its file gives 01_baselines in \['seeds'\] \(seeds=\[0\], its file "
        r"\[0, 1\]\)\nrun_all.sh: a run with other values never writes there: run it under a profile of its own \(copy "
        r"notebooks/profiles/cpu.yaml to notebooks/profiles/NAME.yaml.*--profile NAME\)\n\Z",
    ),
    ("run_all.sh --only=", run_all("--only="), r"--only= needs a list like 00,01"),
    (
        "run_all.sh --dataset missing",
        run_all("--dataset", "/nonexistent/dir"),
        r"--dataset /nonexistent/dir: not a directory",
    ),
    ("run_all.sh --set without value", run_all("--set", "batch_size"), r"--set batch_size: expected NAME=VALUE"),
    ("run_all.sh --data without a role", run_all("--data", "data/x"), r"--data data/x: expected ROLE=DIR"),
    (
        "run_all.sh --data missing directory",
        run_all("--data", "nci=/nonexistent/nq"),
        r"--data nci=/nonexistent/nq: /nonexistent/nq is not a directory",
    ),
    # issue 47: stores that notice their own damage
    (
        "corpus store text.bin truncated (a copy cut short)",
        damaged_store(cut_to("text.bin", 10)),
        r"store/text.bin: is 10 bytes, store.json says [\d,]+ \(truncated\): the store is damaged",
    ),
    (
        "corpus store bounds.npy truncated",
        damaged_store(cut_to("bounds.npy", 100)),
        r"store/bounds.npy: is 100 bytes, store.json says [\d,]+ \(truncated\)",
    ),
    (
        "corpus store store.json not JSON",
        damaged_store(lambda d: (d / "store.json").write_text("{")),
        r"store/store.json: is not the JSON its builder wrote \(.*\): the store is damaged",
    ),
    (
        "token store tokens.bin truncated (a disk that filled)",
        damaged_token_store(cut_to("tokens.bin", 4)),
        r"tokens/tokens.bin: is 4 bytes, store.json says 12 \(truncated\): the store is damaged",
    ),
    (
        "token store store.json not JSON",
        damaged_token_store(lambda d: (d / "store.json").write_text("[1,")),
        r"tokens/store.json: is not the JSON its builder wrote",
    ),
    (
        "a file-size limit while building the corpus store",
        limited_file_size(
            "from longdoc.data.corpus_store import write_corpus_store; "
            "write_corpus_store('{fixtures}/beir/corpus.jsonl', '{tmp}/store')"
        ),
        r"\A\S*FileSystemError: .*/store/text.bin: cannot build the corpus store \(file too large: a file-size limit",
    ),
    (
        "a converter's output over a file-size limit",
        limited_file_size(
            "import sys; from longdoc.data.convert import main; "
            "sys.exit(main(['nq320k', '--dir', '{fixtures}/nq320k', '--out', '{tmp}/nq']))"
        ),
        r"\Aconvert: .*/nq: cannot convert into it \(file too large",
    ),
    # issue 47: leakage and contradictions in pairs
    (
        "the same pair in train and in test",
        matching_folder(train="d1\td2\t1\n", test="d1\td2\t1\n"),
        r"pairs/test.tsv, line 2: pair \('d1', 'd2'\) of split 'test' is in split 'train' too \(\('d1', 'd2'\) at "
        r".*pairs/train.tsv, line 2\): a pair belongs to one split",
    ),
    (
        "a pair labelled 1 in train and 0 (reversed) in test",
        matching_folder(train="d1\td2\t1\n", test="d2\td1\t0\n"),
        r"pairs/test.tsv, line 2: pair \('d2', 'd1'\) of split 'test' is in split 'train' too \(\('d1', 'd2'\) at "
        r".*train.tsv, line 2\).*or taught two labels",
    ),
    (
        "pairs converter: one pair in two splits",
        prepared(
            lambda t: (
                shutil.copytree(FIXTURE, t / "wiki"),
                write(t, "a.tsv", "1\td1\td2\n"),
                write(t, "b.tsv", "0\td2\td1\n"),
            ),
            converter(
                "pairs",
                "--format",
                "smash",
                "--split",
                "train={tmp}/a.tsv",
                "--split",
                "test={tmp}/b.tsv",
                "--out",
                "{tmp}/wiki",
            ),
        ),
        r"convert: .*b.tsv, line 1: pair \('d2', 'd1'\) of split 'test' is in split 'train' too \(\('d1', 'd2'\) at "
        r".*a.tsv, line 1\)",
    ),
    # issue 47: the command line says what it took
    (
        "run_all.sh --data retrieval=A --data retrieval=B",
        run_all(
            "--profile", "smoke", "--only", "01", "--data", f"retrieval={FIXTURE}", "--data", f"retrieval={FIXTURE}"
        ),
        r"--data retrieval= is given twice: one dataset per role",
    ),
    (
        "run_all.sh --only with a notebook that does not exist",
        run_all("--profile", "smoke", "--only", "01, 99"),
        r"--only '01, 99': no notebook numbered 99 \(there are 00, 01, ",
    ),
    (
        "run_all.sh --only with a notebook twice",
        run_all("--profile", "smoke", "--only", "01,10,01"),
        r"--only '01,10,01': 01 given twice",
    ),
    (
        "run_all.sh --set given twice",
        run_all("--profile", "smoke", "--only", "00", "--set", "seeds=[0]", "--set", "seeds=[1]"),
        r"--set seeds= is given twice \(\[0\] and \[1\]\)",
    ),
    (
        "run file query id with a byte-order mark inside",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d1 1 0.5 tag\n\ufeffq2 Q0 d1 1 0.5 tag\n")),
        r"r.trec, line 2: query id '\\ufeffq2' contains the invisible character U\+FEFF",
    ),
    (
        "run file document id with a zero-width space",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d\u200b1 1 0.5 tag\n")),
        r"r.trec, line 1: document id 'd\\u200b1' contains the invisible character U\+200B",
    ),
    (
        "write_run document id with a zero-width space",
        lambda t: write_run({"q1": {"d\u200b1": 1.0}}, t / "r.trec"),
        r"document id 'd\\u200b1': a run file needs ids by the corpus's rules \(document id 'd\\u200b1' contains the "
        r"invisible character U\+200B",
    ),
    (
        "NQ320k converter --dev-fraction 1.5",
        converter("nq320k", "--dir", "{fixtures}/nq320k", "--dev-fraction", "1.5", "--out", "{tmp}/nq"),
        r"--dev-fraction 1.5: a share of the train queries must be above 0 and below 1",
    ),
    (
        "NQ320k converter --dev-fraction -1",
        converter("nq320k", "--dir", "{fixtures}/nq320k", "--dev-fraction", "-1", "--out", "{tmp}/nq"),
        r"--dev-fraction -1.0: a share of the train queries must be above 0 and below 1",
    ),
    (
        "NQ320k converter --dev-fraction nan",
        converter("nq320k", "--dir", "{fixtures}/nq320k", "--dev-fraction", "nan", "--out", "{tmp}/nq"),
        r"--dev-fraction nan: a share of the train queries must be above 0 and below 1",
    ),
    (
        "NQ320k converter --dev-fraction that leaves dev empty",
        converter("nq320k", "--dir", "{fixtures}/nq320k", "--dev-fraction", "0.001", "--out", "{tmp}/nq"),
        r"--dev-fraction 0.001 of the 4 queries of .*nq_train_doc_newid.tsv leaves dev empty; nothing was written",
    ),
    (
        "MS MARCO converter --dev-from-train 1",
        converter(
            "msmarco",
            "--docs",
            "{fixtures}/msmarco/msmarco-docs.tsv.gz",
            "--split",
            "train={fixtures}/msmarco/msmarco-doctrain-queries.tsv.gz,{fixtures}/msmarco/msmarco-doctrain-qrels.tsv.gz",
            "--dev-from-train",
            "1",
            "--out",
            "{tmp}/m",
        ),
        r"--dev-from-train 1.0: a share of the train queries must be 0 \(none\) or above 0 and below 1",
    ),
    (
        "MS MARCO converter: --skip-unknown-docs leaves a split with no query",
        prepared(
            lambda t: (
                write(t, "docs.tsv", "D1\turl\tT\tbody one\nD2\turl\tT\tbody two\n"),
                write(t, "tq.tsv", "1\tfirst\n"),
                write(t, "tr.tsv", "1 0 D1 1\n"),
                write(t, "sq.tsv", "2\tsecond\n"),
                write(t, "sr.tsv", "2 Q0 D9 1\n"),
            ),
            converter(
                "msmarco",
                "--docs",
                "{tmp}/docs.tsv",
                "--split",
                "train={tmp}/tq.tsv,{tmp}/tr.tsv",
                "--split",
                "test={tmp}/sq.tsv,{tmp}/sr.tsv",
                "--skip-unknown-docs",
                "--out",
                "{tmp}/m",
            ),
        ),
        r"/m: split 'test' would hold no query with a relevant document \(--skip-unknown-docs skipped its 1 "
        r"judgements of documents the corpus lacks\); nothing was written",
    ),
    # issue 47: every refusal before the first notebook
    (
        "run_all.sh --set dataset=<missing>",
        run_all("--profile", "smoke", "--only", "00,01", "--set", "dataset=/nonexistent/data"),
        r"run_all.sh: 01_baselines: /nonexistent/data: no such folder\n.*no notebook was started",
    ),
    (
        "run_all.sh --data to a folder with an empty qrels/",
        run_all(
            "--profile", "smoke", "--only", "00,01", "--data", "retrieval={tmp}/emptyq", prepare=empty_qrels_folder
        ),
        r"01_baselines: .*emptyq/qrels: no qrels/<split>.tsv file",
    ),
    (
        "run_all.sh --dataset whose test split judges nothing relevant",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "00,01",
            "--dataset",
            "{tmp}/mine",
            prepare=lambda t: write(beir_copy(t), "qrels/test.tsv", QRELS_HEADER + "q2\td2\t0\n"),
        ),
        r"01_baselines: .*mine/qrels/test.tsv: split 'test' has no query with a relevant document",
    ),
    (
        "run_all.sh a relative --dataset from another folder (read from the caller's folder)",
        run_all("--profile", "smoke", "--only", "00,01", "--dataset", "emptyq", prepare=empty_qrels_folder, cwd="."),
        r"01_baselines: /\S+/emptyq/qrels: no qrels/<split>.tsv file",
    ),
    (
        "run_all.sh with a missing pretrain_corpus",
        run_all("--profile", "smoke", "--only", "00,10", "--set", "pretrain_corpus=/nonexistent/books.txt"),
        r"10_longtriever_main: pretrain_corpus='/nonexistent/books.txt': /nonexistent/books.txt: no such file",
    ),
    (
        "run_all.sh with LONGDOC_CACHE pointing at a file",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "00",
            env={"LONGDOC_CACHE": "{tmp}/cache"},
            prepare=lambda t: write(t, "cache", "not a folder"),
        ),
        r"the cache folder .*/cache \(LONGDOC_CACHE\): .*/cache is a file, not a folder",
    ),
    (
        "a fit into a cache folder that is a file",
        lambda t: cached_into(write(t, "cache", "x")),
        r"the cache folder .*/cache \(LONGDOC_CACHE\): .*/cache is a file, not a folder; nothing was built",
    ),
    # issue 47: operating-system errors, and valid inputs a library rejects by accident
    (
        "corpus.jsonl a loop of symbolic links",
        lambda t: read_corpus(symlink_loop(t, "corpus.jsonl")),
        r"corpus.jsonl: a loop of symbolic links, not a file",
    ),
    (
        "corpus.jsonl a link to a missing file",
        lambda t: read_corpus(dangling(t, "corpus.jsonl")),
        r"corpus.jsonl: a symbolic link to .*gone.jsonl, which does not exist",
    ),
    (
        "qrels/test.tsv is a directory",
        with_beir(lambda d: ((d / "qrels" / "test.tsv").unlink(), (d / "qrels" / "test.tsv").mkdir())),
        r"qrels/test.tsv: is a directory, not a file",
    ),
    (
        "qrels/test.tsv a loop of symbolic links",
        with_beir(lambda d: ((d / "qrels" / "test.tsv").unlink(), symlink_loop(d / "qrels", "test.tsv"))),
        r"qrels/test.tsv: a loop of symbolic links, not a file",
    ),
    (
        "a dataset folder that is a file",
        lambda t: load_beir(write(t, "mine", "x")),
        r"mine: is a file, not a dataset folder",
    ),
    # issue 47, second round (an independent probe of the changes above)
    (
        "corpus store ids.npy replaced by other ids of the same size",
        damaged_store(lambda d: np.save(d / "ids.npy", np.load(d / "ids.npy")[::-1].copy())),
        r"store/ids.npy: its SHA-256 differs from the one in store.json: the store is damaged",
    ),
    (
        "corpus store store.json whose file entry is not an object",
        damaged_store(lambda d: edit_json(d / "store.json", lambda m: m["files"].update({"text.bin": [1]}))),
        r"store/store.json: its entry for 'text.bin' is not what its builder wrote",
    ),
    (
        "corpus store of an older version opened directly",
        damaged_store(lambda d: edit_json(d / "store.json", lambda m: m.update(version=1))),
        r"store.json: a store of version 1, built by older code \(this code reads version 2\); open_corpus_store "
        r"rebuilds it",
    ),
    (
        "a corpus store built into a folder of the user's files",
        lambda t: (write(t, "mine/notes.txt", "mine"), write_corpus_store(FIXTURE / "corpus.jsonl", t / "mine")),
        r"mine: holds files that are not a corpus store's; a store is never built over them",
    ),
    (
        "token store dtype edited",
        damaged_token_store(lambda d: edit_json(d / "store.json", lambda m: m.update(dtype="int16"))),
        r"tokens/store.json: dtype 'int16' is not uint16 or uint32",
    ),
    (
        "token store with a token id beyond the vocabulary",
        lambda t: write_token_store(t / "tokens", [[[5, 40000]]], vocabulary=30522, spec={}),
        r"token store .*tokens: a token id outside \[0, 30522\) in document 0",
    ),
    (
        "pair label in Arabic-Indic digits",
        lambda t: read_pair_tsv(write(t, "p.tsv", "a\tb\t\u0661\n")),
        r"p.tsv, line 1: label '\u0661' is not a number \(ASCII digits\)",
    ),
    (
        "a stray file in pairs/",
        lambda t: (
            write(t, "m/pairs/train.tsv", "a\tb\t1\n"),
            write(t, "m/pairs/train.TSV", "a\tc\t1\n"),
            load_pairs(t / "m"),
        ),
        r"m/pairs: \['train.TSV'\] are not <split>.tsv files",
    ),
    (
        "MS MARCO converter --seed without --dev-from-train",
        converter(
            "msmarco",
            "--docs",
            "{fixtures}/msmarco/msmarco-docs.tsv.gz",
            "--split",
            "train={fixtures}/msmarco/msmarco-doctrain-queries.tsv.gz,{fixtures}/msmarco/msmarco-doctrain-qrels.tsv.gz",
            "--seed",
            "7",
            "--out",
            "{tmp}/m",
        ),
        r"--seed 7: seeds --dev-from-train's hold-out, which is not asked for",
    ),
    (
        "converter --out below a file",
        prepared(
            lambda t: write(t, "afile", "x"),
            converter("nq320k", "--dir", "{fixtures}/nq320k", "--out", "{tmp}/afile/x"),
        ),
        r"convert: .*/afile: cannot convert into it \(is a file, not a folder\)",
    ),
    ("run_all.sh --only twice", run_all("--only", "00", "--only", "01"), r"--only is given twice"),
    ("run_all.sh --profile twice", run_all("--profile", "smoke", "--profile", "cpu"), r"--profile is given twice"),
    ("run_all.sh --dataset twice", run_all("--dataset", "/a", "--dataset", "/b"), r"--dataset is given twice"),
    (
        "run_all.sh --profile that is a path",
        run_all("--profile", "../../tmp/evil"),
        r"--profile ../../tmp/evil: a profile is a name \(letters, digits, '-', '_'\)",
    ),
    (
        "run_all.sh --dataset and --data together",
        run_all("--dataset", str(FIXTURE), "--data", f"matching={FIXTURE}"),
        r"--dataset and --data both name datasets",
    ),
    (
        "run_all.sh --set dataset=<relative path> from another folder",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "01",
            "--set",
            "dataset=../emptyq",
            prepare=lambda t: (empty_qrels_folder(t), (t / "sub").mkdir()),
            cwd="sub",
        ),
        r"01_baselines: /\S+/sub/../emptyq/qrels: no qrels/<split>.tsv file",
    ),
    (
        "run_all.sh a dataset with an empty queries.jsonl",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "00,01",
            "--dataset",
            "{tmp}/mine",
            prepare=lambda t: write(beir_copy(t), "queries.jsonl", ""),
        ),
        r"01_baselines: .*mine/queries.jsonl: holds no queries",
    ),
    (
        "run_all.sh a dataset whose judgements name a query queries.jsonl lacks",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "01",
            "--dataset",
            "{tmp}/mine",
            prepare=lambda t: write(beir_copy(t), "qrels/test.tsv", QRELS_HEADER + "q9\td2\t1\n"),
        ),
        r"01_baselines: .*mine/qrels/test.tsv, line 2: unknown query id 'q9'",
    ),
    (
        "run_all.sh --data matching= with a pair in dev and in test",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "30",
            "--data",
            "matching={tmp}/wiki",
            prepare=lambda t: (
                shutil.copytree(FIXTURE, t / "wiki"),
                write(t, "wiki/pairs/train.tsv", "d1\td2\t1\n"),
                write(t, "wiki/pairs/dev.tsv", "d2\td3\t0\n"),
                write(t, "wiki/pairs/test.tsv", "d3\td2\t0\n"),
            ),
        ),
        r"30_smith_main: .*wiki/pairs/test.tsv, line 1: pair \('d3', 'd2'\) of split 'test' is in split 'dev' too",
    ),
    (
        "run_all.sh a pre-training corpus .txt with no document",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "10",
            "--set",
            "pretrain_corpus={tmp}/books.txt",
            prepare=lambda t: write(t, "books.txt", "\n\n"),
        ),
        r"10_longtriever_main: pretrain_corpus='.*books.txt': .*books.txt: holds no document",
    ),
    (
        "run_all.sh a pre-training corpus .txt in Latin-1",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "10",
            "--set",
            "pretrain_corpus={tmp}/books.txt",
            prepare=lambda t: write(t, "books.txt", "caf\xe9\n".encode("latin-1")),
        ),
        r"10_longtriever_main: pretrain_corpus=.*books.txt, line 1: byte 0xe9 at column 4 is not UTF-8",
    ),
    (
        "run file score 1_0 (Python's float reads 10.0)",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d1 1 1_0 tag\n")),
        r"r.trec, line 1: score '1_0' is not a number \(ASCII digits\)",
    ),
    (
        "run file score in Arabic-Indic digits",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d1 1 \u0663 tag\n")),
        r"r.trec, line 1: score '\u0663' is not a number",
    ),
    (
        "run file rank that is not a number",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d1 abc 0.5 tag\n")),
        r"r.trec, line 1: rank 'abc' is not an integer",
    ),
    (
        "run file id with a no-break space",
        lambda t: read_run(write(t, "r.trec", "q1 Q0 d\u00a01 1 0.5 tag\n")),
        r"r.trec, line 1: document id 'd\\xa01' contains whitespace",
    ),
    (
        "corpus id with a variation selector (drawn as nothing)",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d\\ufe0f2", "text": "y"}')),
        r"line 2: document id 'd\\ufe0f2' contains the invisible character U\+FE0F",
    ),
    (
        "write_run a score that is a string",
        lambda t: write_run({"q1": {"d1": "0.5"}}, t / "r.trec"),
        r"query 'q1', document 'd1': score '0.5' is not a number",
    ),
    (
        "qrels header with the columns in another order",
        lambda t: read_qrels(write(t, "q.tsv", "corpus-id\tquery-id\tscore\nd1\tq1\t1\n")),
        r"q.tsv, line 1: the header has the columns in another order \('corpus-id\\tquery-id\\tscore'\)",
    ),
    (
        "corpus row with 'body' instead of 'text'",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "title": "T", "body": "the text"}')),
        r"corpus.jsonl, line 2: no field 'text' \(the row has \['body'\]; the BEIR layout names the text 'text'\)",
    ),
    # issue 47, third round (a second independent probe)
    (
        "run_all.sh --dataset of a folder whose name holds ' #' (YAML would cut it)",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "01",
            "--dataset",
            "{tmp}/my data #2",
            prepare=lambda t: (shutil.copytree(FIXTURE, t / "my data #2"), (t / "my data #2/qrels/train.tsv").unlink()),
        ),
        r"01_baselines: \S+/my data #2: no qrels/train.tsv, qrels/dev.tsv",
    ),
    (
        "run_all.sh --backbone=",
        run_all("--profile", "smoke", "--only", "00", "--backbone="),
        r"--backbone needs a value",
    ),
    (
        "run_all.sh --set backbone= (empty)",
        run_all("--profile", "smoke", "--only", "01", "--set", "backbone="),
        r"parameter backbone='': is empty",
    ),
    (
        "run_all.sh --deadline -5",
        run_all("--deadline", "-5"),
        r"--deadline -5: expected minutes from now, a number above 0",
    ),
    ("run_all.sh --deadline=", run_all("--deadline="), r"--deadline \(minutes\) needs a value"),
    (
        "LONGDOC_DEADLINE=nan",
        lambda t: __import__("longdoc.experiments.deadline", fromlist=["x"]).parse_deadline("nan"),
        r"LONGDOC_DEADLINE='nan': expected a Unix time \(a finite number\)",
    ),
    (
        "LONGDOC_USE_ACTIVE_ENV=true",
        run_all("--only", "00", env={"LONGDOC_USE_ACTIVE_ENV": "true"}),
        r"LONGDOC_USE_ACTIVE_ENV=true: expected 1 \(use the active environment\) or 0",
    ),
    (
        "split converter --from train",
        prepared(
            lambda t: shutil.copytree(FIXTURE, t / "b"),
            converter("split", "--dir", "{tmp}/b", "--from", "train", "--out", "{tmp}/o"),
        ),
        r"--from train: train and dev are what is carved; carve from a reported split \(test\)",
    ),
    (
        "MS MARCO queries file with a header line",
        lambda t: read_queries_tsv(write(t, "queries.tsv", "qid\ttext\n1\twhat\n")),
        r"queries.tsv, line 1: a header line \('qid\\ttext'\): MS MARCO query files have none; remove it",
    ),
    (
        "run_all.sh --data matching= whose test split holds only label 0",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "30",
            "--data",
            "matching={tmp}/wiki",
            prepare=lambda t: (
                shutil.copytree(FIXTURE, t / "wiki"),
                write(t, "wiki/pairs/train.tsv", "d1\td2\t1\n"),
                write(t, "wiki/pairs/dev.tsv", "d1\td3\t1\nd2\td3\t0\n"),
                write(t, "wiki/pairs/test.tsv", "d1\td4\t0\n"),
            ),
        ),
        r"30_smith_main: .*wiki/pairs/test.tsv: split 'test' holds only pairs labelled 0 \(it is scored on both\)",
    ),
    (
        "profile notebooks: false",
        lambda t: load_profile(profile_file(t, "notebooks: false\n")),
        r"mine.yaml: notebooks: expected a mapping of notebook names to values, got False",
    ),
    (
        "a repeated learning rate in a grid",
        lambda t: check_parameters({"learning_rates": [1e-4, 1e-4]}),
        r"parameter learning_rates=\[0.0001, 0.0001\]: 0.0001 appears twice",
    ),
    (
        "profile key with a Cyrillic letter that looks Latin",
        lambda t: load_profile(profile_file(t, "s\u0435eds: [0]\n")),
        r"unknown parameter\(s\) 's\\u0435eds' \(did you mean 'seeds'\?\)",
    ),
    (
        "qrels relevance of 5,000 digits",
        lambda t: read_qrels(write(t, "q.tsv", QRELS_HEADER + "q1\td1\t1" + "0" * 4999 + "\n")),
        r"q.tsv, line 2: relevance '10+\.\.\.0+': 5000 digits; a grade fits in 18",
    ),
    (
        "a JSON line nested 100,000 deep",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "text": ' + "[" * 100_000 + "]" * 100_000 + "}")),
        r"corpus.jsonl, line 2: a JSON value nested too deeply",
    ),
    (
        "corpus text with a lone surrogate",
        lambda t: read_corpus(corpus_with(t, '{"_id": "d2", "text": "a\\ud800b"}')),
        r"corpus.jsonl, line 2: field 'text' holds a lone surrogate U\+D800 \(not text\)",
    ),
    (
        "manifest.json in Latin-1",
        with_beir(lambda d: write(d, "manifest.json", '{"name": "caf\xe9"}'.encode("latin-1"))),
        r"manifest.json: is not UTF-8",
    ),
    (
        "run_all.sh a dataset whose corpus.jsonl is a zip archive (a gzip one is read as it streams)",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "01",
            "--dataset",
            "{tmp}/mine",
            prepare=lambda t: write(beir_copy(t), "corpus.jsonl", b"PK\x03\x04" + bytes(40)),
        ),
        r"01_baselines: .*mine/corpus.jsonl: is a zip archive of files, not a text file: unpack it",
    ),
    (
        "run_all.sh a dataset whose corpus.jsonl holds only blank lines",
        run_all(
            "--profile",
            "smoke",
            "--only",
            "01",
            "--dataset",
            "{tmp}/mine",
            prepare=lambda t: write(beir_copy(t), "corpus.jsonl", "\n\n"),
        ),
        r"01_baselines: .*mine/corpus.jsonl: the corpus holds no documents",
    ),
]


@pytest.mark.parametrize("make, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gets_a_message_naming_it(tmp_path, make, message):
    with pytest.raises((ValueError, OSError)) as caught:
        make(tmp_path)
    assert caught.type is not KeyError

    assert re.search(message, str(caught.value), re.DOTALL), str(caught.value)


def test_the_table_has_at_least_thirty_cases():
    assert len(CASES) >= 30


def test_a_byte_order_mark_and_crlf_are_read_as_text(tmp_path):
    qrels = read_qrels(write(tmp_path, "q.tsv", ("\ufeff" + QRELS_HEADER + "q1\td1\t1\r\n").encode()))
    assert qrels == {"q1": {"d1": 1}}
    corpus = read_corpus(write(tmp_path, "c.jsonl", '\ufeff{"_id": 7, "text": "x"}\n'.encode()))
    assert list(corpus) == ["7"]


def test_a_notebook_override_is_checked_like_a_profile_value(tmp_path):
    profile = profile_file(tmp_path, "")
    profile.write_text((ROOT / "notebooks" / "profiles" / "smoke.yaml").read_text().replace("profile: smoke\n", ""))
    notebook = tmp_path / "notebooks" / "01_baselines.ipynb"
    assert parameters_for(profile, notebook, {"dataset": "x"})["dataset"] == "x"
    assert parameters_for(profile, notebook)["profile"] == "mine"
    with pytest.raises(ValueError, match=r"command line: parameter batch_size='four'"):
        parameters_for(profile, notebook, {"batch_size": "four"})


def test_gwikimatch_grades_1_and_2_of_a_reverse_pair_agree(tmp_path):
    pairs = read_gwikimatch(write(tmp_path, "g.tsv", "a\tb\t1\nb\ta\t2\n"))
    assert [(p.source, p.target, p.label) for p in pairs] == [("a", "b", 1), ("b", "a", 1)]


def test_profile_and_command_line_numbers_follow_yaml_1_2():
    from longdoc.experiments.profiles import command_line_value, read_yaml

    assert read_yaml("a: 010\nb: 0o10\nc: 1e-4\nd: 1:30\ne: 1_000\nf: yes\ng: 2.0e-5\n") == {
        "a": 10,
        "b": 8,
        "c": 1e-4,
        "d": "1:30",
        "e": "1_000",
        "f": "yes",
        "g": 2e-5,
    }
    assert command_line_value("learning_rates=[1e-4, 2.0e-5]") == ("learning_rates", [1e-4, 2e-5])
    assert command_line_value("train_steps=010") == ("train_steps", 10)
    assert command_line_value("dataset=data/x") == ("dataset", "data/x")


def test_every_cross_parameter_rule_holds_in_the_shipped_profiles():
    from longdoc.experiments.profiles import parameters_for

    for profile in sorted((ROOT / "notebooks" / "profiles").glob("*.yaml")):
        for notebook in NOTEBOOKS:
            parameters_for(profile, notebook)  # raises on a broken rule


def test_a_users_manifest_checksum_is_not_trusted(tmp_path):
    directory = beir_copy(tmp_path)
    (directory / "manifest.json").write_text(json.dumps({"checksum": "stale"}))
    before = load_beir(directory).checksum
    assert before != "stale" and len(before) == 64
    with open(directory / "corpus.jsonl", "a") as handle:
        handle.write('{"_id": "d9", "text": "edited"}\n')
    assert load_beir(directory).checksum != before
    (directory / "manifest.json").write_text("[1]")
    with pytest.raises(ValueError, match=r"manifest.json: expected a JSON object"):
        load_beir(directory)


def test_valid_inputs_a_library_would_reject_are_read(tmp_path):
    """Issue 47: an integer id of 5,000 digits (Python's int refuses 4,300), lone-CR line endings (old Mac
    exports), a YAML merge key and ``--set dataset=2024`` are what the user meant, not errors."""
    from longdoc.experiments.profiles import command_line_value, read_yaml

    long_id = "1" + "0" * 4999
    corpus = read_corpus(write(tmp_path, "c.jsonl", f'{{"_id": {long_id}, "text": "x"}}\n'))
    assert list(corpus) == [long_id]
    with pytest.raises(ValueError, match=r"line 1: field 'title' must be a string, got number"):
        read_corpus(write(tmp_path, "t.jsonl", f'{{"_id": "a", "title": {long_id}, "text": "x"}}\n'))
    cr = read_qrels(write(tmp_path, "q.tsv", QRELS_HEADER.replace("\n", "\r") + "q1\td1\t1\rq2\td2\t0\r"))
    assert cr == {"q1": {"d1": 1}, "q2": {"d2": 0}}
    with pytest.raises(ValueError, match=r"q.tsv, line 3: relevance 'x' is not an integer"):
        read_qrels(write(tmp_path, "q.tsv", QRELS_HEADER.replace("\n", "\r") + "q1\td1\t1\rq2\td2\tx\r"))
    docs = read_msmarco_docs(write(tmp_path, "docs.tsv", b"D1\tu\tT\tbody\rmore\nD2\tu\tT\tx\n"))
    assert docs["D1"].text == "body\rmore"  # a stray CR inside a field of an LF file is text, not a line end
    merged = read_yaml("notebooks:\n  a: &base {batch_size: 4, seeds: [0]}\n  b: {<<: *base, batch_size: 8}\n")
    assert merged["notebooks"]["b"] == {"batch_size": 8, "seeds": [0]}
    assert command_line_value("dataset=2024") == ("dataset", "2024")
    assert command_line_value("train_steps=2024") == ("train_steps", 2024)


def test_only_is_normalised_and_said(tmp_path):
    from longdoc.experiments.preflight import selected_notebooks

    assert selected_notebooks("01, 10") == "01,10"
    assert selected_notebooks(" 00 ,") == "00"
    with pytest.raises(ValueError, match=r"--only ' , ': no notebook number"):
        selected_notebooks(" , ")


def test_a_pair_header_in_another_order_gives_the_columns(tmp_path):
    pairs = read_pair_tsv(write(tmp_path, "p.tsv", "target-id\tsource-id\tlabel\nd2\td1\t1\n"))
    assert [(p.source, p.target, p.label) for p in pairs] == [("d1", "d2", 1)]
    smash = read_smash_pairs(write(tmp_path, "w.tsv", "label\tsource-id\ttarget-id\n1\td1\td2\n"))
    assert [(p.source, p.target, p.label) for p in smash] == [("d1", "d2", 1)]
