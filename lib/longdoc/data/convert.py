"""``python -m longdoc.data.convert``: the papers' published formats to the BEIR layout every notebook reads.

    # MS MARCO documents, with TREC DL 2019 as the test split
    python -m longdoc.data.convert msmarco --docs msmarco-docs.tsv \\
        --split train=msmarco-doctrain-queries.tsv,msmarco-doctrain-qrels.tsv \\
        --split dev=msmarco-docdev-queries.tsv,msmarco-docdev-qrels.tsv \\
        --split test=msmarco-test2019-queries.tsv,2019qrels-docs.txt --out data/msmarco-doc
    # NQ320k as NCI distributes it (dev carved from train by a hash of the query id)
    python -m longdoc.data.convert nq320k --dir NQ_dataset --out data/nq320k
    # a collection with only test judgements (most of BEIR): carve train and dev from its queries, seeded
    python -m longdoc.data.convert split --dir data/scifact --from test --train 60 --dev 20 --seed 0 --out data/scifact-split
    # document pairs (SMITH): their documents first (id, title, text), then the labelled pairs beside them
    python -m longdoc.data.convert documents --docs wiki65k_docs.tsv --out data/wiki65k
    python -m longdoc.data.convert pairs --format smash --split train=train.tsv --split dev=dev.tsv \\
        --split test=test.tsv --out data/wiki65k

Every input is checked (a clear error names the file and line) before anything is written, and the
output folder appears whole or not at all: built under a temporary name, with ``--out`` locked against a
second converter, and put in place only if nobody changed it meanwhile (:func:`convert`). The content checksum the records carry is computed
from the written files when the dataset is loaded (:func:`longdoc.data.beir.files_checksum`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from longdoc.data.beir import (
    RetrievalDataset,
    corpus_ids,
    files_checksum,
    load_beir,
    qrels_files,
    read_qrels,
    read_queries,
    save_beir,
    stream_corpus,
)
from longdoc.data.errors import DataFormatError, bounded, require_file
from longdoc.data.pairs import (
    pair_documents,
    read_gwikimatch,
    read_pair_tsv,
    read_smash_pairs,
    refuse_shared_pairs,
    write_pair_files,
)
from longdoc.data.splits import carve_splits, refuse_shared_queries
from longdoc.io import atomic_directory, exclusive, naming_files, sweep_stale

PAIR_READERS = {"gwikimatch": read_gwikimatch, "smash": read_smash_pairs, "tsv": read_pair_tsv}
PAIR_FORMATS = """formats (tab-separated, one pair per line, ids as corpus.jsonl names them):
  gwikimatch  source URL, target URL, label 0/1/2 (1 and 2 are a match: binarised)
  smash       label 0/1, source id, target id (Wiki65K / AAN104K as SMASH and SMITH use them)
  tsv         source-id, target-id, label 0/1 (a header naming the three columns, in any order, sets it)"""


SPLIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # a file name: qrels/<name>.tsv, pairs/<name>.tsv


def _splits(items: list[str], parts: int) -> dict[str, list[str]]:
    """``NAME=path[,path]`` arguments as ``{name: [paths]}``, checked."""
    splits: dict[str, list[str]] = {}
    for item in items:
        name, sep, paths = item.partition("=")
        files = paths.split(",") if sep else []
        if not name or len(files) != parts or not all(files):
            shape = "NAME=QUERIES,QRELS" if parts == 2 else "NAME=FILE"
            raise ValueError(f"--split {item!r}: expected {shape}")
        if not SPLIT_NAME.fullmatch(name):
            raise ValueError(
                f"--split {item!r}: the name {name!r} must be letters, digits, '-' and '_' "
                "(it becomes a file name; no path)"
            )
        if name in splits:
            raise ValueError(f"--split {name}: given twice")
        for file in files:
            try:
                require_file(file)
            except DataFormatError as err:
                raise ValueError(f"--split {name}: {err}") from None
        splits[name] = files
    return splits


def _fresh_output(out: Path, force: bool, inputs: list[Path] = ()) -> None:
    """``out`` may be written: empty or ``--force``, and neither an input, inside an input folder, nor a
    folder holding an input (``--force`` replaces it whole)."""
    target = out.resolve()
    for given in inputs:
        source = Path(given).resolve()
        if target == source or source in target.parents or target in source.parents:
            raise ValueError(
                f"--out {out}: overlaps the input {given} (replacing it would lose the input); write somewhere else"
            )
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file, not a folder")
    if out.exists() and any(out.iterdir()) and not force:
        raise ValueError(f"--out {out}: exists and is not empty (pass --force to replace it)")


def convert_msmarco(args, splits: dict, folder: Path) -> str:
    from longdoc.data.msmarco import convert_msmarco_files

    manifest = convert_msmarco_files(
        args.docs,
        {name: tuple(files) for name, files in splits.items()},
        folder,
        on_unknown_doc="skip" if args.skip_unknown_docs else "error",
        dev_from_train=args.dev_from_train,
        seed=args.seed or 0,
    )
    return _landed(folder, args.out, manifest)


def convert_nq320k(args, splits: dict, folder: Path) -> str:
    from longdoc.data.nq320k import convert_nq320k_files

    return _landed(folder, args.out, convert_nq320k_files(args.dir, folder, dev_fraction=args.dev_fraction))


def convert_pairs(args, splits: dict, folder: Path) -> str:
    """Pairs go to ``<out>/pairs/<split>.tsv`` (the folder replaced whole); ``<out>`` must already hold
    the corpus they name."""
    corpus = corpus_ids(args.out / "corpus.jsonl")  # ids only: a pair file names documents, not their text
    stats: dict = {}
    on_unknown = "skip" if args.skip_unknown_docs else "error"
    pairs, lines = {}, {}
    for name, files in splits.items():
        lines[name] = (files[0], {})
        pairs[name] = PAIR_READERS[args.format](
            files[0], known_ids=corpus, on_unknown=on_unknown, stats=stats, lines=lines[name][1]
        )
    refuse_shared_pairs(lines)
    write_pair_files(pairs, folder)
    counts = ", ".join(f"{name} {len(rows)} pairs" for name, rows in sorted(pairs.items()))
    return f"{args.out}/pairs: {counts} ({stats.get('skipped_unknown', 0)} naming unknown documents skipped)"


def convert_documents(args, splits: dict, folder: Path) -> str:
    """A pair collection's documents (:func:`~longdoc.data.pairs.pair_documents`) streamed into
    ``<out>/corpus.jsonl``; ``pairs`` then adds the labelled pairs beside them."""
    ids = stream_corpus(folder / "corpus.jsonl", pair_documents(args.docs), Path(args.docs))
    corpus_ids(folder / "corpus.jsonl")  # read back as the matching notebooks will
    return (
        f"{args.out}: {len(ids)} documents\n"
        f"add the labelled pairs: python -m longdoc.data.convert pairs --format smash --split train=... --out {args.out}"
    )


def convert_split(args, splits: dict, folder: Path) -> str:
    """Train and dev carved from the queries of ``--from`` (:func:`~longdoc.data.splits.carve_splits`);
    the corpus and queries are copied unchanged, and the manifest records the carve and its source."""
    source = load_beir(args.dir)
    qrels = carve_splits(source.qrels, args.source, args.train, args.dev, args.seed)
    carve = {
        "from": args.source,
        "train": args.train,
        "dev": args.dev,
        "seed": args.seed,
        "source": str(args.dir),
        "source_checksum": source.checksum,
    }
    dataset = RetrievalDataset(args.out.name, source.corpus, source.queries, qrels, {"carved": carve})
    return _write(dataset, folder, args.out)


def _write(dataset, folder: Path, out: Path) -> str:
    """Write an in-memory dataset into ``folder`` (put in place as ``out`` when the conversion ends)."""
    save_beir(dataset, folder)
    return _landed(folder, out, dataset.manifest)


def _landed(folder: Path, out: Path, manifest: dict) -> str:
    """Write the manifest and read the folder back as a notebook would (every corpus row checked, holding
    only its ids; queries; every split's judgements), so what lands is a dataset the notebooks accept; say
    what it holds."""
    if manifest:
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    ids = corpus_ids(folder / "corpus.jsonl")
    queries = read_queries(folder / "queries.jsonl")
    qrels, judged = {}, {}
    for path in qrels_files(folder):
        judged[path.stem] = (path, {})
        qrels[path.stem] = read_qrels(path, queries, ids, judged[path.stem][1])
    refuse_shared_queries(judged)
    for split, judgements in qrels.items():
        if not any(relevance > 0 for docs in judgements.values() for relevance in docs.values()):
            skipped = manifest.get("import_stats", {}).get(f"{split}_skipped_unknown")
            why = (
                f" (--skip-unknown-docs skipped its {skipped} judgements of documents the corpus lacks)"
                if skipped
                else ""
            )
            raise ValueError(
                f"{out}: split {split!r} would hold no query with a relevant document{why}; nothing was written"
            )
    sizes = ", ".join(f"{split} {len(q)} queries" for split, q in sorted(qrels.items()))
    return (
        f"{out}: {len(ids)} documents, {sizes}; checksum {files_checksum(folder)[:16]}\n"
        f"run notebooks on it: ./run_all.sh --dataset {out} --only 01,10  (or papermill ... -p dataset {out})"
    )


CONVERTERS = {
    "msmarco": convert_msmarco,
    "nq320k": convert_nq320k,
    "documents": convert_documents,
    "pairs": convert_pairs,
    "split": convert_split,
}
SPLIT_FILES = {"msmarco": 2, "pairs": 1}  # files per --split NAME=...


def convert(args) -> str:
    """One conversion, whole or not at all: its output folder (``--out``, or ``--out/pairs``) is built
    under a temporary name while ``--out`` is locked against a second converter, then put in place, unless
    someone changed it meanwhile. Temporaries of converters killed earlier are swept first."""
    for option, lowest in (("dev_fraction", "above"), ("dev_from_train", "at")):
        value = getattr(args, option, None)
        if value is not None and not (0 < value < 1 or (lowest == "at" and value == 0)):
            allowed = "above 0 and below 1" if lowest == "above" else "0 (none) or above 0 and below 1"
            raise ValueError(f"--{option.replace('_', '-')} {value}: a share of the train queries must be {allowed}")
    if args.command == "msmarco" and args.seed is not None and not args.dev_from_train:
        raise ValueError(
            f"--seed {args.seed}: seeds --dev-from-train's hold-out, which is not asked for (nothing is seeded)"
        )
    splits = _splits(args.split, SPLIT_FILES[args.command]) if args.command in SPLIT_FILES else {}
    if args.command in SPLIT_FILES and not splits:
        shape = "NAME=QUERIES,QRELS" if SPLIT_FILES[args.command] == 2 else "NAME=FILE"
        raise ValueError(f"{args.command}: give at least one --split {shape}")
    inputs = [Path(f) for files in splits.values() for f in files]
    inputs += [Path(p) for p in (getattr(args, "docs", None), getattr(args, "dir", None)) if p is not None]
    args.out = Path(os.path.abspath(args.out))  # "." has no name to write beside
    target = args.out / "pairs" if args.command == "pairs" else args.out
    with exclusive(args.out):
        sweep_stale(target.parent, target.name)  # only what a converter of this --out left
        if args.command == "pairs" and not (args.out / "corpus.jsonl").is_file():
            raise ValueError(
                f"--out {args.out}: holds no corpus.jsonl (pairs go beside the BEIR corpus whose ids they name)"
            )
        _fresh_output(target, args.force, inputs)
        with atomic_directory(target, refuse_if_changed=True) as folder:
            return CONVERTERS[args.command](args, splits, folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m longdoc.data.convert",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    msmarco = commands.add_parser("msmarco", help="MS MARCO documents (+ TREC DL judgements) to BEIR")
    msmarco.add_argument("--docs", type=Path, required=True, help="msmarco-docs.tsv (docid, url, title, body)")
    msmarco.add_argument(
        "--split",
        action="append",
        default=[],
        metavar="NAME=QUERIES,QRELS",
        help="queries TSV and qrels (MS MARCO 'qid 0 docid 1' or TREC 'qid Q0 docid rel'); repeatable",
    )
    msmarco.add_argument(
        "--skip-unknown-docs",
        action="store_true",
        help="skip judgements of documents the corpus lacks (TREC DL), counted in the manifest",
    )
    msmarco.add_argument(
        "--dev-from-train",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="hold out this seeded share of the train queries as dev (the selection split)",
    )
    msmarco.add_argument("--seed", type=int, default=None, help="the seed of --dev-from-train's hold-out (default 0)")
    nq = commands.add_parser("nq320k", help="NCI's NQ320k files to BEIR")
    nq.add_argument(
        "--dir",
        type=Path,
        required=True,
        help="NCI's NQ_dataset folder: NQ_doc_content.tsv (the text), nq_train_doc_newid.tsv, nq_dev_doc_newid.tsv",
    )
    nq.add_argument("--dev-fraction", type=float, default=0.05, help="share of train queries held out as dev")
    documents = commands.add_parser(
        "documents", help="a pair collection's documents (Wiki65K, AAN104K, your own) into <out>/corpus.jsonl"
    )
    documents.add_argument(
        "--docs", type=Path, required=True, help="id <TAB> title <TAB> text per line (.gz too); the ids the pairs name"
    )
    pairs = commands.add_parser(
        "pairs",
        help="GWikiMatch / Wiki65K / AAN104K pair files beside a corpus.jsonl (from 'documents' or a BEIR folder)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=PAIR_FORMATS,
    )
    pairs.add_argument("--format", choices=sorted(PAIR_READERS), required=True, help="the pair file's columns (below)")
    pairs.add_argument("--split", action="append", default=[], metavar="NAME=FILE", help="a pair file; repeatable")
    pairs.add_argument("--skip-unknown-docs", action="store_true", help="skip pairs naming documents the corpus lacks")
    split = commands.add_parser("split", help="carve train and dev from a BEIR folder's test queries, seeded")
    split.add_argument("--dir", type=Path, required=True, help="the BEIR folder (left unchanged)")
    split.add_argument("--from", dest="source", default="test", help="the split whose queries are dealt out")
    split.add_argument("--train", type=int, default=60, help="percent of its queries to train")
    split.add_argument("--dev", type=int, default=20, help="percent to dev (the rest stays in --from)")
    split.add_argument("--seed", type=int, default=0, help="seed of the hash that deals the queries")
    for command in (msmarco, nq, documents, pairs, split):
        command.add_argument("--out", type=Path, required=True, help="the BEIR folder to write")
        command.add_argument(
            "--force", action="store_true", help="replace a non-empty --out (pairs: a non-empty --out/pairs) whole"
        )
    args = parser.parse_args(argv)
    try:
        with naming_files("convert into it", args.out):
            print(convert(args))
    except (DataFormatError, ValueError, OSError) as err:
        print(f"convert: {bounded(str(err))}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
