"""MS MARCO Document Ranking in its published formats, and TREC DL 2019/2020 document judgements.

- ``msmarco-docs.tsv``: ``docid <TAB> url <TAB> title <TAB> body`` (one document per line)
- ``msmarco-doc{train,dev}-queries.tsv`` and TREC DL ``msmarco-test2019-queries.tsv``: ``qid <TAB> text``
- ``msmarco-doc{train,dev}-qrels.tsv``: ``qid 0 docid 1``; TREC DL ``2019qrels-docs.txt``: ``qid Q0 docid rel``
"""

from __future__ import annotations

from pathlib import Path

from longdoc.data.beir import Document, RetrievalDataset
from longdoc.data.errors import DataFormatError, check_id, shown, text_lines, visible
from longdoc.data.splits import hold_out_dev, refuse_shared_queries
from longdoc.data.trec import read_trec_qrels


def read_msmarco_docs(path: str | Path, stats: dict | None = None) -> dict[str, Document]:
    """Documents with an empty title and body (a few hundred exist in MS MARCO) are skipped and
    counted in ``stats['skipped_empty']``; a wrong field count or a repeated docid is an error."""
    path = Path(path)
    corpus: dict[str, Document] = {}
    skipped = 0
    for number, line in text_lines(path):
        fields = line.split("\t")
        if len(fields) != 4:
            raise DataFormatError(
                path, f"expected 4 tab-separated fields 'docid url title body', found {len(fields)}", number
            )
        doc_id, _url, title, body = fields
        doc_id = check_id(doc_id.strip(), path, number, "docid")
        if doc_id in corpus:
            raise DataFormatError(path, f"duplicate docid {doc_id!r}", number)
        if not (visible(title) or visible(body)):
            skipped += 1
            continue
        corpus[doc_id] = Document(doc_id, title.strip(), body.strip())
    if stats is not None:
        stats["skipped_empty"] = skipped
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


def load_msmarco_documents(
    docs: str | Path,
    splits: dict[str, tuple[str | Path, str | Path]],
    name: str = "msmarco-doc",
    on_unknown_doc: str = "error",
    dev_from_train: float = 0.0,
    seed: int = 0,
) -> RetrievalDataset:
    """Build a dataset from ``msmarco-docs.tsv`` and ``{split: (queries.tsv, qrels)}``, e.g.
    ``{"train": (train queries, train qrels), "test": (TREC DL 2019 queries, 2019qrels-docs.txt)}``.
    ``dev_from_train`` > 0 holds out that seeded share of the training queries as ``dev``, the split that
    selects settings: MS MARCO's own dev queries can then be a reported split, as in the papers' tables."""
    if dev_from_train and "dev" in splits:
        raise ValueError(
            "msmarco: --split dev=... and --dev-from-train both make 'dev'; name MS MARCO's dev "
            "queries as a reported split instead (e.g. --split msmarco-dev=...)"
        )
    stats: dict = {}
    corpus = read_msmarco_docs(docs, stats)
    queries: dict[str, str] = {}
    qrels, judged = {}, {}
    for split, (query_path, qrels_path) in splits.items():
        split_queries = read_queries_tsv(query_path)
        for qid, text in split_queries.items():
            if queries.get(qid, text) != text:
                raise DataFormatError(query_path, f"query id {qid!r} has another text in an earlier split")
        queries.update(split_queries)
        split_stats, lines = {}, {}
        qrels[split] = read_trec_qrels(qrels_path, split_queries, corpus, on_unknown_doc, split_stats, lines)
        stats[f"{split}_skipped_unknown"] = split_stats["skipped_unknown"]
        judged[split] = (Path(qrels_path), lines)
    refuse_shared_queries(judged)  # before anything is written
    manifest = {"source": str(docs), "import_stats": stats}
    if dev_from_train:
        qrels = hold_out_dev(qrels, dev_from_train, seed)
        manifest["dev_held_out_of_train"] = {"fraction": dev_from_train, "seed": seed}
    return RetrievalDataset(name, corpus, queries, qrels, manifest)
