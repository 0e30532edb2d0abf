"""MS MARCO Document Ranking in its published formats, and TREC DL 2019/2020 document judgements.
Every file may be as distributed, gzip-compressed (``msmarco-docs.tsv.gz``), or unpacked.

- ``msmarco-docs.tsv``: ``docid <TAB> url <TAB> title <TAB> body`` (one document per line)
- ``msmarco-doc{train,dev}-queries.tsv`` and TREC DL ``msmarco-test2019-queries.tsv``: ``qid <TAB> text``
- ``msmarco-doc{train,dev}-qrels.tsv``: ``qid 0 docid 1``; TREC DL ``2019qrels-docs.txt``: ``qid Q0 docid rel``
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from longdoc.data.beir import Document, RetrievalDataset, save_judgements, stream_corpus
from longdoc.data.errors import DataFormatError, check_id, shown, text_lines, visible
from longdoc.data.splits import hold_out_dev, refuse_shared_queries
from longdoc.data.trec import read_trec_qrels


def msmarco_documents(path: str | Path, stats: dict | None = None) -> Iterator[tuple[int, Document]]:
    """``(line, document)`` of ``msmarco-docs.tsv`` (or ``.tsv.gz``, read as it streams). Documents with an
    empty title and body (a few hundred exist in MS MARCO) are skipped and counted in
    ``stats['skipped_empty']``; a wrong field count is an error naming the line."""
    path = Path(path)
    skipped = 0
    for number, line in text_lines(path):
        fields = line.split("\t")
        if len(fields) != 4:
            raise DataFormatError(
                path, f"expected 4 tab-separated fields 'docid url title body', found {len(fields)}", number
            )
        doc_id, _url, title, body = fields
        doc_id = check_id(doc_id.strip(), path, number, "docid")
        if not (visible(title) or visible(body)):
            skipped += 1
            continue
        yield number, Document(doc_id, title.strip(), body.strip())
    if stats is not None:
        stats["skipped_empty"] = skipped


def read_msmarco_docs(path: str | Path, stats: dict | None = None) -> dict[str, Document]:
    """Every document of ``msmarco-docs.tsv`` in memory (:func:`msmarco_documents`); a repeated docid is an
    error. For the whole collection, :func:`convert_msmarco_files` streams it instead."""
    corpus: dict[str, Document] = {}
    lines: dict[str, int] = {}
    for number, document in msmarco_documents(path, stats):
        if document.doc_id in corpus:
            raise DataFormatError(
                path, f"duplicate docid {document.doc_id!r} (first on line {lines[document.doc_id]})", number
            )
        corpus[document.doc_id], lines[document.doc_id] = document, number
    return corpus


def read_queries_tsv(path: str | Path) -> dict[str, str]:
    path = Path(path)
    queries: dict[str, str] = {}
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataFormatError(path, f"expected 2 tab-separated fields 'qid text', found {len(fields)}", number)
        if number == 1 and fields[0].strip().lower() in ("qid", "query-id", "query_id", "id", "_id"):
            raise DataFormatError(path, f"a header line ({shown(line)}): MS MARCO query files have none; remove it", 1)
        qid, text = check_id(fields[0].strip(), path, number, "query id"), fields[1].strip()
        if not visible(text):
            raise DataFormatError(path, f"query {qid!r} has no text (no visible character)", number)
        if qid in queries:
            raise DataFormatError(path, f"duplicate query id {qid!r}", number)
        queries[qid] = text
    return queries


Splits = dict[str, tuple[str | Path, str | Path]]


def _read_queries(splits: Splits) -> dict[str, dict[str, str]]:
    """Each split's queries; one query id with two texts in two splits is an error."""
    by_split: dict[str, dict[str, str]] = {}
    every: dict[str, str] = {}
    for split, (query_path, _) in splits.items():
        by_split[split] = read_queries_tsv(query_path)
        for qid, text in by_split[split].items():
            if every.setdefault(qid, text) != text:
                raise DataFormatError(query_path, f"query id {qid!r} has another text in an earlier split")
    return by_split


def _read_judgements(splits: Splits, queries: dict, corpus, on_unknown_doc: str, stats: dict) -> dict:
    """Each split's qrels (against ``corpus``'s ids when given); a query judged in two splits is an error."""
    qrels, judged = {}, {}
    for split, (_, qrels_path) in splits.items():
        split_stats, lines = {}, {}
        qrels[split] = read_trec_qrels(qrels_path, queries[split], corpus, on_unknown_doc, split_stats, lines)
        if corpus is not None:
            stats[f"{split}_skipped_unknown"] = split_stats["skipped_unknown"]
        judged[split] = (Path(qrels_path), lines)
    refuse_shared_queries(judged)
    return qrels


def _check_dev_from_train(splits: Splits, dev_from_train: float) -> None:
    if dev_from_train and "dev" in splits:
        raise ValueError(
            "msmarco: --split dev=... and --dev-from-train both make 'dev'; name MS MARCO's dev "
            "queries as a reported split instead (e.g. --split msmarco-dev=...)"
        )


def _manifest(docs, stats: dict, dev_from_train: float, seed: int) -> dict:
    manifest = {"source": str(docs), "import_stats": stats}
    if dev_from_train:
        manifest["dev_held_out_of_train"] = {"fraction": dev_from_train, "seed": seed}
    return manifest


def load_msmarco_documents(
    docs: str | Path,
    splits: Splits,
    name: str = "msmarco-doc",
    on_unknown_doc: str = "error",
    dev_from_train: float = 0.0,
    seed: int = 0,
) -> RetrievalDataset:
    """Build a dataset in memory from ``msmarco-docs.tsv`` and ``{split: (queries.tsv, qrels)}``, e.g.
    ``{"train": (train queries, train qrels), "test": (TREC DL 2019 queries, 2019qrels-docs.txt)}``.
    ``dev_from_train`` > 0 holds out that seeded share of the training queries as ``dev``, the split that
    selects settings: MS MARCO's own dev queries can then be a reported split, as in the papers' tables.
    The whole collection is converted by :func:`convert_msmarco_files`, which streams it."""
    _check_dev_from_train(splits, dev_from_train)
    stats: dict = {}
    corpus = read_msmarco_docs(docs, stats)
    queries = _read_queries(splits)
    qrels = _read_judgements(splits, queries, corpus, on_unknown_doc, stats)
    if dev_from_train:
        qrels = hold_out_dev(qrels, dev_from_train, seed)
    every = {qid: text for split in queries.values() for qid, text in split.items()}
    return RetrievalDataset(name, corpus, every, qrels, _manifest(docs, stats, dev_from_train, seed))


def convert_msmarco_files(
    docs: str | Path,
    splits: Splits,
    folder: Path,
    on_unknown_doc: str = "error",
    dev_from_train: float = 0.0,
    seed: int = 0,
) -> dict:
    """Write the BEIR layout into ``folder`` in bounded memory: queries and judgements are read and checked
    first (a bad line costs seconds, not a pass over 22 GB), then the documents stream into
    ``corpus.jsonl`` (:func:`~longdoc.data.beir.stream_corpus`: only ids are held), then the judgements are
    checked against those ids. Returns the manifest (the caller writes it)."""
    _check_dev_from_train(splits, dev_from_train)
    queries = _read_queries(splits)
    _read_judgements(splits, queries, None, "error", {})  # syntax, query ids, shared queries: before the corpus
    stats: dict = {}
    ids = stream_corpus(folder / "corpus.jsonl", msmarco_documents(docs, stats), Path(docs))
    qrels = _read_judgements(splits, queries, ids, on_unknown_doc, stats)
    if dev_from_train:
        qrels = hold_out_dev(qrels, dev_from_train, seed)
    every = {qid: text for split in queries.values() for qid, text in split.items()}
    save_judgements(folder, every, qrels)
    return _manifest(docs, stats, dev_from_train, seed)
