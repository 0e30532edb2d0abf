"""The internal interchange format: the BEIR layout.

``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/<split>.tsv`` (header ``query-id corpus-id score``). Every dataset, embedded or imported,
becomes a :class:`RetrievalDataset`, so every notebook runs on any of them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from longdoc.data.corpus_store import open_corpus_store
from longdoc.data.errors import (
    DataFormatError,
    ascii_integer,
    check_id,
    require_file,
    require_folder,
    shown,
    text_lines,
    visible,
)
from longdoc.data.jsonl import Document, jsonl_rows, text_field
from longdoc.data.splits import refuse_shared_queries
from longdoc.io import atomic_write
from longdoc.types import Qrels

T = TypeVar("T")


@dataclass
class RetrievalDataset:
    """A corpus, its queries and relevance judgements per split (``train``/``dev``/``test``)."""

    name: str
    corpus: Mapping[str, Document]  # a dict, or a memory-mapped CorpusStore
    queries: dict[str, str]
    qrels: dict[str, Qrels]
    manifest: dict = field(default_factory=dict)
    views: dict = field(
        default_factory=dict, repr=False, compare=False
    )  # derived once per loaded dataset (cache.dataset_view)

    def __post_init__(self) -> None:
        for split, judged in self.qrels.items():
            for qid, docs in judged.items():
                if qid not in self.queries:
                    raise ValueError(f"{self.name}: qrels/{split} names unknown query id {shown(qid)}")
                for doc_id in docs:
                    if doc_id not in self.corpus:
                        raise ValueError(f"{self.name}: qrels/{split} names unknown document id {shown(doc_id)}")

    @property
    def doc_ids(self) -> Sequence[str]:
        """Every document id in corpus order (a lazy sequence when the corpus is a memory-mapped store)."""
        mapped = getattr(self.corpus, "ids", None)
        return mapped if mapped is not None else list(self.corpus)

    @property
    def texts(self) -> Sequence[str]:
        """Every document's title + text, in ``doc_ids`` order (lazy for a memory-mapped store)."""
        mapped = getattr(self.corpus, "full_texts", None)
        return mapped if mapped is not None else [document.full_text for document in self.corpus.values()]

    @property
    def checksum(self) -> str:
        return self.manifest.get("checksum", "unknown")

    def split(self, split: str) -> tuple[dict[str, str], Qrels]:
        """Queries and qrels of one split; queries without a relevant document are dropped."""
        if split not in self.qrels:
            raise ValueError(f"{self.name} has no split {split!r} (no qrels/{split}.tsv); it has {sorted(self.qrels)}")
        qrels = {q: d for q, d in self.qrels[split].items() if any(r > 0 for r in d.values())}
        if not qrels:
            raise ValueError(
                f"{self.name}: split {split!r} (qrels/{split}.tsv) has no query with a relevant document "
                "(relevance > 0)"
            )
        return {q: self.queries[q] for q in qrels}, qrels

    def subsample(self, max_docs: int, seed: int = 0) -> RetrievalDataset:
        """A smaller dataset for smoke runs: queries are kept with all their relevant documents until
        ``max_docs`` documents are used, then the corpus is filled up with random other documents."""
        if max_docs <= 0 or max_docs >= len(self.corpus):
            return self
        rng = random.Random(seed)
        keep: set[str] = set()
        kept_queries: set[str] = set()
        qids = sorted({q for judged in self.qrels.values() for q in judged})
        rng.shuffle(qids)
        relevant = {q: set() for q in qids}
        for judged in self.qrels.values():
            for q, docs in judged.items():
                relevant[q].update(d for d, r in docs.items() if r > 0)
        for q in qids:
            if len(keep | relevant[q]) > max_docs:
                continue
            keep |= relevant[q]
            kept_queries.add(q)
        others = [d for d in self.corpus if d not in keep]
        rng.shuffle(others)
        keep.update(others[: max_docs - len(keep)])
        corpus = {d: doc for d, doc in self.corpus.items() if d in keep}
        qrels = {
            split: {q: {d: r for d, r in docs.items() if d in keep} for q, docs in judged.items() if q in kept_queries}
            for split, judged in self.qrels.items()
        }
        queries = {q: t for q, t in self.queries.items() if q in kept_queries}
        manifest = dict(self.manifest, subsample={"max_docs": max_docs, "seed": seed})
        return RetrievalDataset(f"{self.name}[{max_docs}]", corpus, queries, qrels, manifest)


def corpus_documents(
    path: str | Path, on_empty: str = "error", stats: dict | None = None
) -> Iterator[tuple[int, Document]]:
    """``(line, document)`` of ``corpus.jsonl`` as it streams, each row checked (id, fields); empty documents
    are an error or, with ``on_empty='skip'``, skipped and counted in ``stats['skipped_empty']``. Repeated
    ids are the caller's to refuse."""
    path = Path(path)
    skipped = 0
    for number, row in jsonl_rows(path):
        doc_id = check_id(row["_id"], path, number)
        title, text = text_field(row, "title", path, number), text_field(row, "text", path, number)
        if not (visible(title) or visible(text)):
            if on_empty == "skip":
                skipped += 1
                continue
            raise DataFormatError(path, f"document {doc_id!r} is empty (no title and no text)", number)
        yield number, Document(doc_id, title, text)
    if stats is not None:
        stats["skipped_empty"] = skipped


def _by_id(path: Path, rows: Iterator[tuple[int, Document]], keep: Callable[[int, Document], T]) -> dict[str, T]:
    """``keep(line, document)`` of every row by id; a repeated id, or no document at all, is an error."""
    kept: dict[str, T] = {}
    for number, document in rows:
        if document.doc_id in kept:
            raise DataFormatError(path, f"duplicate document id {document.doc_id!r}", number)
        kept[document.doc_id] = keep(number, document)
    if not kept:
        raise DataFormatError(path, "the corpus holds no documents")
    return kept


def read_corpus(path: str | Path, on_empty: str = "error", stats: dict | None = None) -> dict[str, Document]:
    """Read ``corpus.jsonl`` into memory (:func:`corpus_documents`); a repeated id is an error."""
    path = Path(path)
    return _by_id(path, corpus_documents(path, on_empty, stats), lambda _, document: document)


def corpus_ids(path: str | Path) -> dict[str, int]:
    """Every id of ``corpus.jsonl`` and its line, each row checked as :func:`read_corpus` checks it, with
    only the ids held (a converter's read-back of a corpus too large for memory)."""
    path = Path(path)
    return _by_id(path, corpus_documents(path), lambda number, _: number)


def read_queries(path: str | Path) -> dict[str, str]:
    path = Path(path)
    queries: dict[str, str] = {}
    for number, row in jsonl_rows(path):
        qid = check_id(row["_id"], path, number, "query id")
        if qid in queries:
            raise DataFormatError(path, f"duplicate query id {qid!r}", number)
        text = text_field(row, "text", path, number).strip()
        if not visible(text):
            raise DataFormatError(path, f"query {qid!r} has no text (no visible character)", number)
        queries[qid] = text
    if not queries:
        raise DataFormatError(path, "holds no queries (each qrels line names one of them)")
    return queries


def read_qrels(
    path: str | Path, queries: dict | None = None, corpus: dict | None = None, first_lines: dict | None = None
) -> Qrels:
    """Read a BEIR qrels TSV (header ``query-id corpus-id score``), checking ids when given;
    ``first_lines`` (when given) receives the line where each query is first judged."""
    path = Path(path)
    qrels: Qrels = {}
    for number, line in text_lines(path):
        fields = line.split("\t")
        if number == 1 and fields[0] == "query-id":
            continue
        if number == 1 and sorted(f.strip() for f in fields) == ["corpus-id", "query-id", "score"]:
            raise DataFormatError(
                path,
                f"the header has the columns in another order ({shown(line)}); qrels are query-id corpus-id score",
                1,
            )
        if not line.strip():
            continue
        if len(fields) != 3:
            raise DataFormatError(
                path, f"expected 3 tab-separated fields 'query-id corpus-id score', found {len(fields)}", number
            )
        qid, doc_id, score = (f.strip() for f in fields)
        relevance = ascii_integer(score, path, number)
        qid, doc_id = check_id(qid, path, number, "query id"), check_id(doc_id, path, number)
        if queries is not None and qid not in queries:
            raise DataFormatError(path, f"unknown query id {shown(qid)}", number)
        if corpus is not None and doc_id not in corpus:
            raise DataFormatError(path, f"unknown document id {shown(doc_id)}", number)
        if doc_id in qrels.setdefault(qid, {}):
            raise DataFormatError(path, f"duplicate judgement for ({qid!r}, {doc_id!r})", number)
        qrels[qid][doc_id] = relevance
        if first_lines is not None:
            first_lines.setdefault(qid, number)
    return qrels


def load_beir(
    directory: str | Path,
    name: str | None = None,
    on_empty: str = "error",
    trust_manifest_checksum: bool = False,
    store_dir: str | Path | None = None,
) -> RetrievalDataset:
    """A BEIR-layout folder. Its checksum is SHA-256 over the files' bytes (:func:`files_checksum`),
    so an edited file is a new dataset; only a benchmark we built ourselves, whose manifest was written
    with its files in one atomic step, may take the manifest's (``trust_manifest_checksum``).
    ``store_dir``: read the corpus through a memory-mapped store kept there under the dataset's checksum
    (:mod:`longdoc.data.corpus_store`; built on first use), not into a dict."""
    directory = require_folder(directory, "dataset folder")
    for required in ("corpus.jsonl", "queries.jsonl", "qrels"):
        if not (directory / required).exists() and not (directory / required).is_symlink():
            raise DataFormatError(directory / required, "missing (not a BEIR-layout dataset directory)")
    for required in ("corpus.jsonl", "queries.jsonl"):
        require_file(directory / required)
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.exists() else {}
    except json.JSONDecodeError as err:
        raise DataFormatError(manifest_path, f"not valid JSON ({err.msg})", err.lineno) from None
    except UnicodeDecodeError:
        raise DataFormatError(manifest_path, "is not UTF-8 (re-encode it, or remove it: it is optional)") from None
    except OSError:
        require_file(manifest_path)  # a folder, a loop of links, no permission: said by name
        raise
    if not isinstance(manifest, dict):
        raise DataFormatError(manifest_path, "expected a JSON object")
    each: dict[str, str] = {}
    if not (trust_manifest_checksum and "checksum" in manifest):
        if "checksum" in manifest:
            manifest["manifest_checksum"] = manifest["checksum"]
        manifest["checksum"] = files_checksum(directory, each)
    if store_dir is None:
        corpus = read_corpus(directory / "corpus.jsonl", on_empty=on_empty)
    else:  # kept under the corpus file's own checksum: new judgements do not rebuild it
        own = each.get("corpus.jsonl") or file_checksum(directory / "corpus.jsonl")
        corpus = open_corpus_store(directory / "corpus.jsonl", Path(store_dir) / f"{own[:24]}-{on_empty}", on_empty)
    queries = read_queries(directory / "queries.jsonl")
    qrels, judged = {}, {}
    for path in qrels_files(directory):
        lines: dict[str, int] = {}
        qrels[path.stem] = read_qrels(path, queries, corpus, lines)
        judged[path.stem] = (path, lines)
    refuse_shared_queries(judged)
    return RetrievalDataset(name or directory.name, corpus, queries, qrels, manifest)


def qrels_files(directory: Path) -> list[Path]:
    """``qrels/<split>.tsv``; any other file there (``test.txt``, ``dev.tsv.bak``) is an error, not a
    silently missing split."""
    folder = directory / "qrels"
    if not folder.is_dir():
        raise DataFormatError(folder, "expected a folder of qrels/<split>.tsv files")
    files = sorted(p for p in require_folder(folder).iterdir() if not p.name.startswith("."))
    stray = [p.name for p in files if p.suffix != ".tsv"]
    if stray:
        raise DataFormatError(folder, f"{stray} are not <split>.tsv files (rename them, e.g. test.tsv, or remove them)")
    if not files:
        raise DataFormatError(folder, "no qrels/<split>.tsv file")
    for path in files:
        require_file(path)  # qrels/test.tsv that is a folder or a loop of links says so
    return files


def files_checksum(directory: Path, each: dict | None = None) -> str:
    """SHA-256 over the dataset's files (corpus, queries, every qrels split), names included; ``each``
    (when given) receives every file's own SHA-256 by name, from the same read."""
    digest = hashlib.sha256()
    for path in [directory / "corpus.jsonl", directory / "queries.jsonl", *qrels_files(directory)]:
        name = path.relative_to(directory).as_posix()
        digest.update(name.encode() + b"\0")
        own = file_checksum(path, digest)
        if each is not None:
            each[name] = own
    return digest.hexdigest()


def file_checksum(path: Path, *also) -> str:
    """SHA-256 of one file's bytes; each digest of ``also`` is fed the same bytes in the same read."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            for fed in (digest, *also):
                fed.update(chunk)
    return digest.hexdigest()


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with atomic_write(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")


def write_qrels(path: Path, qrels: Qrels) -> None:
    with atomic_write(path) as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for qid in sorted(qrels):
            for doc_id in sorted(qrels[qid]):
                handle.write(f"{qid}\t{doc_id}\t{qrels[qid][doc_id]}\n")


def save_beir(dataset: RetrievalDataset, directory: str | Path) -> None:
    """Write a dataset in the BEIR layout (sorted, so the bytes depend only on the content)."""
    directory = Path(directory)
    write_jsonl(
        directory / "corpus.jsonl",
        ({"_id": d.doc_id, "title": d.title, "text": d.text} for _, d in sorted(dataset.corpus.items())),
    )
    save_judgements(directory, dataset.queries, dataset.qrels)


def save_judgements(directory: Path, queries: dict[str, str], qrels: dict[str, Qrels]) -> None:
    """``queries.jsonl`` and ``qrels/<split>.tsv`` of a BEIR folder (sorted)."""
    write_jsonl(directory / "queries.jsonl", ({"_id": q, "text": t} for q, t in sorted(queries.items())))
    for split, judged in qrels.items():
        write_qrels(directory / "qrels" / f"{split}.tsv", judged)


def stream_corpus(
    path: Path,
    rows: Iterable[tuple[int, Document]],
    source: Path,
    fold_repeats: bool = False,
    stats: dict | None = None,
) -> dict[str, int]:
    """Write ``corpus.jsonl`` from the ``(line, document)`` rows of ``source`` as they are read, in their
    order, holding only each id and its line in memory (MS MARCO's 3.2M documents: a few hundred MB, not
    22 GB of text). A repeated id is an error naming both lines or, with ``fold_repeats`` (a file written
    one row per query), dropped when its text is the first row's (compared by a 16-byte digest) and an error
    when not; ``stats['folded']`` counts the dropped rows. Returns each id's first line."""
    lines: dict[str, int] = {}
    digests: dict[str, bytes] = {}
    folded = 0
    with atomic_write(path) as handle:
        for number, document in rows:
            doc_id = document.doc_id
            if fold_repeats:
                digest = hashlib.blake2b(document.full_text.encode(), digest_size=16).digest()
            if doc_id in lines:
                if not fold_repeats:
                    raise DataFormatError(
                        source, f"duplicate document id {doc_id!r} (first on line {lines[doc_id]})", number
                    )
                if digests[doc_id] != digest:
                    raise DataFormatError(
                        source,
                        f"document {doc_id!r} appears again with another text (first on line {lines[doc_id]})",
                        number,
                    )
                folded += 1
                continue
            lines[doc_id] = number
            if fold_repeats:
                digests[doc_id] = digest
            handle.write(
                json.dumps({"_id": doc_id, "title": document.title, "text": document.text}, ensure_ascii=False)
            )
            handle.write("\n")
    if not lines:
        raise DataFormatError(source, "holds no documents")
    if stats is not None:
        stats["folded"] = folded
    return lines
