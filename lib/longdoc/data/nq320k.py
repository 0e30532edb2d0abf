"""NQ320k as the NCI authors distribute it (``Data_process/NQ_dataset``, written by their
``NQ_dataset_Process.ipynb``).

- ``NQ_doc_content.tsv``: the documents, one per line, 7 tab-separated fields written by hand
  (``docid, '', '', title+abstract+content, '', '', language``): the document text NCI indexes.
- ``nq_train_doc_newid.tsv`` / ``nq_dev_doc_newid.tsv``: one row per query, written by pandas (no header;
  a field holding a quote, a tab or a line break is quoted, CSV style), columns ``query, queryid, docid``
  and then the semantic-id variants (``bert_k30_c30_1`` ...; files with fewer id columns are accepted). The
  dev file is NCI's test set (7,830 queries); there is no separate dev split, so ours is carved from train.
- ``nq_title_abs.tsv`` (title + abstract, one row per query) is NCI's pseudo-query augmentation, not the
  document: it is not read.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from longdoc.data.beir import Document, RetrievalDataset, save_judgements, stream_corpus
from longdoc.data.errors import DataFormatError, check_id, require_file, shown, text_lines, visible
from longdoc.data.splits import in_share, refuse_shared_queries

CONTENT = "NQ_doc_content.tsv"
TRAIN, TEST = "nq_train_doc_newid.tsv", "nq_dev_doc_newid.tsv"
CONTENT_FIELDS = 7  # docid, '', '', text, '', '', language


def nci_documents(path: str | Path) -> Iterator[tuple[int, Document]]:
    """``(line, document)`` of ``NQ_doc_content.tsv`` as it streams."""
    path = Path(path)
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < CONTENT_FIELDS:
            raise DataFormatError(
                path,
                f"expected {CONTENT_FIELDS} tab-separated fields 'docid, -, -, text, -, -, language' "
                f"(NCI's {CONTENT}), found {len(fields)}",
                number,
            )
        # NCI writes the text unescaped: a tab inside it makes more fields, and the text is all between
        doc_id, text = check_id(fields[0].strip(), path, number), " ".join(fields[3:-3]).strip()
        if not visible(text):
            raise DataFormatError(path, f"document {doc_id!r} is empty (no visible character)", number)
        yield number, Document(doc_id, "", text)


def _query_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line, fields)`` of a pandas-written TSV: quoted fields (a doubled quote inside quotes, a line
    break inside quotes) read as pandas wrote them; the line is where the row starts."""
    numbers: list[int] = []  # the file's line number of each line fed to the reader

    def feed() -> Iterator[str]:
        for number, line in text_lines(path):
            numbers.append(number)
            yield line + "\n"

    reader = csv.reader(feed(), delimiter="\t", quotechar='"', doublequote=True, strict=True)
    consumed = 0  # lines the reader had taken before this row
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            where = numbers[min(consumed, len(numbers) - 1)] if numbers else 1
            raise DataFormatError(path, f"a quoted field is malformed or never closed ({err})", where) from None
        yield numbers[consumed], fields
        consumed = reader.line_num


def read_nci_queries(
    path: str | Path, corpus, first_lines: dict | None = None, id_columns: list | None = None
) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Queries and their judged documents (one row per query; a query id on two rows names two relevant
    documents and must keep its text). ``first_lines`` (when given) receives each query's first line;
    ``id_columns`` the count of semantic-id columns of each row."""
    path = require_file(path)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for number, fields in _query_rows(path):
        if not any(field.strip() for field in fields):
            continue
        if len(fields) < 3:
            raise DataFormatError(
                path, f"expected at least 3 tab-separated fields 'query queryid docid ...', found {len(fields)}", number
            )
        text, qid, doc_id = fields[0].strip(), fields[1].strip(), fields[2].strip()
        qid, doc_id = check_id(qid, path, number, "query id"), check_id(doc_id, path, number, "document id")
        if not visible(text):
            raise DataFormatError(path, f"query {qid!r} has no text (no visible character)", number)
        if doc_id not in corpus:
            raise DataFormatError(path, f"unknown document id {shown(doc_id)} (not in {CONTENT})", number)
        if queries.get(qid, text) != text:
            raise DataFormatError(path, f"query id {qid!r} appears with two different texts", number)
        queries[qid] = text
        qrels.setdefault(qid, {})[doc_id] = 1
        if first_lines is not None:
            first_lines.setdefault(qid, number)
        if id_columns is not None:
            id_columns.append(len(fields) - 3)
    return queries, qrels


def _files(directory: Path) -> tuple[Path, Path, Path]:
    content = directory / CONTENT
    if not content.exists() and (directory / "nq_title_abs.tsv").exists():
        raise DataFormatError(
            content,
            "missing: NCI's document text is NQ_doc_content.tsv (its notebook NQ_dataset_Process.ipynb writes it); "
            "nq_title_abs.tsv holds title + abstract, NCI's pseudo-queries, not the documents",
        )
    return require_file(content), require_file(directory / TRAIN), require_file(directory / TEST)


def _judgements(directory: Path, corpus, dev_fraction: float) -> tuple[dict, dict, dict]:
    """``train``/``dev`` from the NCI train file (dev = a deterministic hash share of its queries),
    ``test`` from the NCI dev file; the manifest's facts."""
    _, train_path, test_path = _files(directory)
    train_lines, test_lines, id_columns = {}, {}, []
    train_queries, train_qrels = read_nci_queries(train_path, corpus, train_lines, id_columns)
    test_queries, test_qrels = read_nci_queries(test_path, corpus, test_lines, id_columns)
    refuse_shared_queries({"train": (train_path, train_lines), "test": (test_path, test_lines)})
    qrels = {
        "train": {q: d for q, d in train_qrels.items() if not in_share(q, dev_fraction)},
        "dev": {q: d for q, d in train_qrels.items() if in_share(q, dev_fraction)},
        "test": test_qrels,
    }
    for split in ("train", "dev"):
        if not qrels[split]:
            raise ValueError(
                f"--dev-fraction {dev_fraction} of the {len(train_qrels)} queries of {train_path} leaves {split} "
                "empty; nothing was written"
            )
    facts = {"source": str(directory), "semantic_id_columns": max(id_columns, default=0)}
    return {**train_queries, **test_queries}, qrels, facts


def load_nq320k(directory: str | Path, dev_fraction: float = 0.05) -> RetrievalDataset:
    """NQ320k in memory (small inputs, tests); the whole collection is converted by
    :func:`convert_nq320k_files`, which streams the documents."""
    directory = Path(directory)
    content, _, _ = _files(directory)
    corpus: dict[str, Document] = {}
    for number, document in nci_documents(content):
        if corpus.get(document.doc_id, document).text != document.text:
            raise DataFormatError(content, f"document {document.doc_id!r} appears again with another text", number)
        corpus.setdefault(document.doc_id, document)
    queries, qrels, facts = _judgements(directory, corpus, dev_fraction)
    return RetrievalDataset("nq320k", corpus, queries, qrels, facts)


def convert_nq320k_files(directory: str | Path, folder: Path, dev_fraction: float = 0.05) -> dict:
    """The BEIR layout in ``folder``: documents streamed from ``NQ_doc_content.tsv`` (a repeated row with
    the same text folded, with another text an error), then the queries checked against their ids.
    Returns the manifest."""
    directory = Path(directory)
    content, _, _ = _files(directory)
    stats: dict = {}
    ids = stream_corpus(folder / "corpus.jsonl", nci_documents(content), content, fold_repeats=True, stats=stats)
    queries, qrels, facts = _judgements(directory, ids, dev_fraction)
    save_judgements(folder, queries, qrels)
    return {**facts, "import_stats": {"folded_repeated_documents": stats["folded"]}}
