"""NQ320k as the NCI authors distribute it (``Data_process/NQ_dataset``).

``nq_train_doc_newid.tsv`` / ``nq_dev_doc_newid.tsv``: tab-separated, no header, columns
``query, queryid, oldid, bert_k30_c30_1 … bert_k30_c30_5`` (the last five are semantic-id variants;
files with fewer id columns are accepted). ``nq_title_abs.tsv`` has the same columns with the
document's title + abstract in the first column: it is the document text NCI releases. The dev file
is NCI's test set (7,830 queries); there is no separate dev split, so ours is carved from train.
"""

from __future__ import annotations

from pathlib import Path

from longdoc.data.beir import Document, RetrievalDataset
from longdoc.data.errors import DataFormatError, check_id, shown, text_lines, visible
from longdoc.data.splits import in_share, refuse_shared_queries


def _rows(path: Path, min_fields: int = 3):
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < min_fields:
            raise DataFormatError(
                path,
                f"expected at least {min_fields} tab-separated fields 'query queryid oldid ...', found {len(fields)}",
                number,
            )
        yield number, fields


def read_nci_documents(path: str | Path) -> tuple[dict[str, Document], dict[str, list[str]]]:
    """Corpus from ``nq_title_abs.tsv``, plus each document's semantic ids (one per id column)."""
    path = Path(path)
    corpus: dict[str, Document] = {}
    semantic_ids: dict[str, list[str]] = {}
    for number, fields in _rows(path):
        text, _qid, doc_id = fields[0].strip(), fields[1], check_id(fields[2].strip(), path, number)
        if not visible(text):
            raise DataFormatError(path, f"document {doc_id!r} is empty (no visible character)", number)
        if doc_id in corpus:
            if corpus[doc_id].text != text:
                raise DataFormatError(path, f"document {doc_id!r} appears twice with different text", number)
            continue
        corpus[doc_id] = Document(doc_id, "", text)
        semantic_ids[doc_id] = fields[3:]
    return corpus, semantic_ids


def read_nci_queries(
    path: str | Path, corpus: dict, first_lines: dict | None = None
) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Queries and their judged documents; ``first_lines`` (when given) receives each query's first line."""
    path = Path(path)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for number, fields in _rows(path):
        text, qid, doc_id = fields[0].strip(), fields[1].strip(), fields[2].strip()
        qid, doc_id = check_id(qid, path, number, "query id"), check_id(doc_id, path, number, "document id (oldid)")
        if not visible(text):
            raise DataFormatError(path, f"query {qid!r} has no text (no visible character)", number)
        if doc_id not in corpus:
            raise DataFormatError(path, f"unknown document id (oldid) {shown(doc_id)}", number)
        if queries.get(qid, text) != text:
            raise DataFormatError(path, f"query id {qid!r} appears with two different texts", number)
        queries[qid] = text
        qrels.setdefault(qid, {})[doc_id] = 1
        if first_lines is not None:
            first_lines.setdefault(qid, number)
    return queries, qrels


def load_nq320k(directory: str | Path, dev_fraction: float = 0.05) -> RetrievalDataset:
    """``train``/``dev`` from the NCI train file (dev = a deterministic hash share of its queries),
    ``test`` from the NCI dev file."""
    directory = Path(directory)
    corpus, semantic_ids = read_nci_documents(directory / "nq_title_abs.tsv")  # ids: for NCI (read again there)
    train_lines, test_lines = {}, {}
    train_queries, train_qrels = read_nci_queries(directory / "nq_train_doc_newid.tsv", corpus, train_lines)
    test_queries, test_qrels = read_nci_queries(directory / "nq_dev_doc_newid.tsv", corpus, test_lines)
    refuse_shared_queries(
        {
            "train": (directory / "nq_train_doc_newid.tsv", train_lines),
            "test": (directory / "nq_dev_doc_newid.tsv", test_lines),
        }
    )

    qrels = {
        "train": {q: d for q, d in train_qrels.items() if not in_share(q, dev_fraction)},
        "dev": {q: d for q, d in train_qrels.items() if in_share(q, dev_fraction)},
        "test": test_qrels,
    }
    for split in ("train", "dev"):
        if not qrels[split]:
            raise ValueError(
                f"--dev-fraction {dev_fraction} of the {len(train_qrels)} queries of "
                f"{directory / 'nq_train_doc_newid.tsv'} leaves {split} empty; nothing was written"
            )
    manifest = {
        "source": str(directory),
        "semantic_id_columns": max((len(v) for v in semantic_ids.values()), default=0),
    }
    return RetrievalDataset("nq320k", corpus, {**train_queries, **test_queries}, qrels, manifest)
