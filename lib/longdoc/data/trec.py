"""TREC-format relevance judgements (MS MARCO document qrels, TREC DL 2019/2020 document qrels)."""

from __future__ import annotations

from pathlib import Path

from longdoc.data.beir import Qrels
from longdoc.data.errors import DataFormatError, ascii_integer, check_id, text_lines


def read_trec_qrels(
    path: str | Path,
    known_queries=None,
    known_docs=None,
    on_unknown: str = "error",
    stats: dict | None = None,
    first_lines: dict | None = None,
) -> Qrels:
    """Read ``qid iteration docid relevance`` lines (whitespace-separated; the iteration column is
    ``0`` in MS MARCO and ``Q0`` in TREC DL). Unknown ids are an error, or with ``on_unknown='skip'``
    skipped and counted in ``stats['skipped_unknown']`` (TREC DL judges documents some users'
    corpora lack). ``first_lines`` (when given) receives the line where each query is first judged."""
    path = Path(path)
    qrels: Qrels = {}
    skipped = 0
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 4:
            raise DataFormatError(path, f"expected 4 fields 'qid iter docid rel', found {len(fields)}", number)
        qid, _, doc_id, rel = fields
        qid, doc_id = check_id(qid, path, number, "query id"), check_id(doc_id, path, number)
        relevance = ascii_integer(rel, path, number)
        unknown = (known_queries is not None and qid not in known_queries) or (
            known_docs is not None and doc_id not in known_docs
        )
        if unknown:
            if on_unknown == "skip":
                skipped += 1
                continue
            what = (
                f"query id {qid!r}"
                if known_queries is not None and qid not in known_queries
                else f"document id {doc_id!r}"
            )
            raise DataFormatError(path, f"unknown {what}", number)
        if doc_id in qrels.setdefault(qid, {}):
            raise DataFormatError(path, f"duplicate judgement for ({qid!r}, {doc_id!r})", number)
        qrels[qid][doc_id] = relevance
        if first_lines is not None:
            first_lines.setdefault(qid, number)
    if stats is not None:
        stats["skipped_unknown"] = skipped
    return qrels
