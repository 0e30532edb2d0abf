"""A corpus on disk, read through memory maps: MS MARCO's 3.2M documents (22 GB of text) without
holding them in memory.

:func:`write_corpus_store` reads ``corpus.jsonl`` once, in order, with the checks of
:func:`longdoc.data.beir.read_corpus` (ids, fields, empty documents, duplicate ids, each error naming
its line), into a folder of flat arrays (building keeps only the ids and three integers per document
in memory):

- ``text.bin``: every document's title then text, UTF-8, one after another;
- ``bounds.npy``: ``[D, 3]`` int64, where each document's title starts, its text starts and it ends;
- ``ids.npy``: ``[D]`` fixed-width UTF-8 ids, in corpus order; ``lookup.npy``: the positions that sort
  them (binary search finds a document without a dictionary of every id).

:class:`CorpusStore` is a read-only ``Mapping[str, Document]`` over that folder, in corpus order: a
:class:`~longdoc.data.beir.RetrievalDataset` holds it where it would hold a dict, and its ``doc_ids``
and ``texts`` are lazy sequences. Texts are read with ``pread`` (the kernel's page cache keeps what is
read often; the process holds only the offsets, memory-mapped), so resident memory does not grow with
the corpus. ``store.json`` holds every file's size and SHA-256 (:mod:`longdoc.store_files`): each
open checks the sizes and the small arrays' checksums, a build checks every checksum, :meth:`CorpusStore.verify` does when asked, and
:func:`open_corpus_store` rebuilds a damaged store from ``corpus.jsonl``, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from longdoc.data.errors import DataFormatError, check_id, visible
from longdoc.data.jsonl import Document, jsonl_rows, text_field
from longdoc.io import atomic_directory, naming_files
from longdoc.store_files import (
    MANIFEST,
    StoreDamaged,
    check_sizes,
    file_facts,
    read_manifest,
    rebuilding,
    short_read,
    verify,
)

STORE_VERSION = 2  # 2: store.json records each file's size and SHA-256
SMALL_ARRAYS = ("ids.npy", "lookup.npy", "bounds.npy")  # checksummed on every open (a tenth of text.bin or less)
STORE_FILES = {*SMALL_ARRAYS, "text.bin", MANIFEST, "segments"}  # segments/: the token stores made from it
MAPPED_FROM_BYTES = 1 << 30  # load_dataset's default: corpora of 1 GiB or more are read through a store


def write_corpus_store(corpus_path: str | Path, directory: str | Path, on_empty: str = "error") -> Path:
    """Stream ``corpus_path`` (``corpus.jsonl``) into a store at ``directory`` (built under a temporary
    name, so a killed build leaves nothing a later run opens). Returns ``directory``."""

    corpus_path, directory = Path(corpus_path), Path(directory)
    if directory.is_dir() and any(
        entry.name not in STORE_FILES and not entry.name.startswith(".") for entry in directory.iterdir()
    ):
        raise ValueError(f"{directory}: holds files that are not a corpus store's; a store is never built over them")
    text_digest = hashlib.sha256()
    with naming_files("build the corpus store", directory / "text.bin"), atomic_directory(directory) as tmp:
        ids, lines, bounds, position, skipped = [], array("q"), array("q"), 0, 0
        with open(tmp / "text.bin", "wb") as text_file:
            for number, row in jsonl_rows(corpus_path):
                doc_id = check_id(row["_id"], corpus_path, number)
                title = text_field(row, "title", corpus_path, number)
                text = text_field(row, "text", corpus_path, number)
                if not (visible(title) or visible(text)):
                    if on_empty == "skip":
                        skipped += 1
                        continue
                    raise DataFormatError(corpus_path, f"document {doc_id!r} is empty (no title and no text)", number)
                title_bytes, text_bytes = title.encode("utf-8"), text.encode("utf-8")
                for part in (title_bytes, text_bytes):
                    text_file.write(part)
                    text_digest.update(part)
                start = position
                position += len(title_bytes) + len(text_bytes)
                bounds.extend((start, start + len(title_bytes), position))
                ids.append(doc_id.encode("utf-8"))
                lines.append(number)
        if not ids:
            raise DataFormatError(corpus_path, "the corpus holds no documents")
        id_array = np.array(ids, dtype=f"S{max(map(len, ids))}")
        del ids
        lookup = np.argsort(id_array, kind="stable")
        ordered = id_array[lookup]
        repeated = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1  # sorted places of the second, third, ... copies
        if repeated.size:  # the earliest repeat in the file, as read_corpus would stop there
            at = repeated[np.argmin(lookup[repeated])]
            start = at
            while start > 0 and ordered[start - 1] == ordered[at]:
                start -= 1
            first, second = lookup[start], lookup[at]
            doc_id = id_array[second].decode("utf-8")
            raise DataFormatError(
                corpus_path, f"duplicate document id {doc_id!r} (first on line {lines[first]})", lines[second]
            )
        np.save(tmp / "ids.npy", id_array)
        np.save(tmp / "lookup.npy", lookup)
        np.save(tmp / "bounds.npy", np.frombuffer(bounds, dtype=np.int64).reshape(-1, 3))
        files = file_facts(tmp, ["ids.npy", "lookup.npy", "bounds.npy"])
        files["text.bin"] = {"bytes": position, "sha256": text_digest.hexdigest()}
        (tmp / MANIFEST).write_text(
            json.dumps(
                {
                    "version": STORE_VERSION,
                    "source": str(corpus_path),
                    "documents": len(lookup),
                    "text_bytes": position,
                    "skipped_empty": skipped,
                    "files": files,
                },
                indent=2,
            )
        )
    verify(directory)  # what landed on disk is what was written (a full disk, a failing device)
    return directory


def store_is_current(directory: str | Path) -> bool:
    """Whether ``directory`` holds a store of this version (:class:`StoreDamaged` when its manifest is)."""
    manifest = read_manifest(Path(directory))
    return manifest is not None and manifest.get("version") == STORE_VERSION


def open_corpus_store(corpus_path: str | Path, directory: str | Path, on_empty: str = "error") -> CorpusStore:
    """The store of ``corpus_path`` at ``directory``, built first when missing or of an older version,
    and rebuilt, with one line saying why, when damaged (temporaries of killed builds beside it are swept)."""
    from longdoc.io import sweep_stale

    directory = Path(directory)
    try:
        if store_is_current(directory):
            return CorpusStore(directory)
    except StoreDamaged as problem:
        rebuilding(problem, corpus_path)
    sweep_stale(directory.parent)
    write_corpus_store(corpus_path, directory, on_empty)
    return CorpusStore(directory)


class _Column(Sequence):
    """A lazy, read-only column of a :class:`CorpusStore` (ids or full texts), in corpus order."""

    def __init__(self, store: CorpusStore, read):
        self._store, self._read = store, read

    def __len__(self) -> int:
        return len(self._store)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._read(index)

    def __iter__(self) -> Iterator:
        return map(self._read, range(len(self)))


class Subset(Sequence):
    """The items of ``items`` at ``positions``, read when asked for (a lazy column stays lazy)."""

    def __init__(self, items: Sequence, positions):
        self._items, self._positions = items, np.asarray(positions, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._positions)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._items[int(i)] for i in self._positions[index]]
        return self._items[int(self._positions[index])]

    def __iter__(self) -> Iterator:
        return (self._items[int(i)] for i in self._positions)


class CorpusStore(Mapping):
    """``{doc id: Document}`` read from a store folder (:func:`write_corpus_store`), in corpus order."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.manifest = read_manifest(self.directory)
        if self.manifest is None:
            raise FileNotFoundError(f"{self.directory}: no corpus store (build it with write_corpus_store)")
        if self.manifest.get("version") != STORE_VERSION:
            raise StoreDamaged(
                self.directory / MANIFEST,
                f"a store of version {self.manifest.get('version')!r}, built by older code (this code reads version "
                f"{STORE_VERSION}); open_corpus_store rebuilds it",
            )
        check_sizes(self.directory, self.manifest, hashed=SMALL_ARRAYS, expected={*SMALL_ARRAYS, "text.bin"})
        self._ids, self._lookup, self._bounds = (self._array(name) for name in SMALL_ARRAYS)
        if self._ids.dtype.kind != "S" or self._lookup.dtype != np.int64 or self._bounds.dtype != np.int64:
            raise StoreDamaged(
                self.directory, "its arrays are not of the types its builder wrote: the store is damaged"
            )
        documents, text_bytes = self.manifest.get("documents"), self.manifest.get("text_bytes")
        if not (len(self._ids) == len(self._lookup) == len(self._bounds) == documents) or self._bounds.shape[1:] != (
            3,
        ):
            raise StoreDamaged(
                self.directory / MANIFEST, f"holds {documents} documents, its arrays do not: the store is damaged"
            )
        if documents and int(self._bounds[-1, 2]) != text_bytes:
            raise StoreDamaged(self.directory / "bounds.npy", "does not end where text.bin ends: the store is damaged")
        self._text = open(
            self.directory / "text.bin", "rb"
        )  # read with pread: the page cache, not this process, holds it
        self.ids = _Column(self, self._id)
        self.full_texts = _Column(self, self._full_text)

    def _array(self, name: str) -> np.ndarray:
        try:
            return np.load(self.directory / name, mmap_mode="r")
        except (ValueError, OSError) as err:
            raise StoreDamaged(
                self.directory / name, f"is not the array its builder wrote ({err}): the store is damaged"
            ) from None

    def verify(self) -> None:
        """Every file's size and SHA-256 against ``store.json`` (:class:`StoreDamaged` naming the first
        that differs); reads the whole store."""
        verify(self.directory, self.manifest)

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def _id(self, index: int) -> str:
        return self._ids[index].decode("utf-8")

    def _decode(self, start: int, end: int) -> str:
        raw = os.pread(self._text.fileno(), end - start, start)
        if len(raw) != end - start:
            raise short_read(self.directory / "text.bin", end - start, len(raw))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise StoreDamaged(
                self.directory / "text.bin", f"bytes {start}-{end} are not UTF-8: the store is damaged"
            ) from None

    def _fields(self, index: int) -> tuple[str, str]:
        start, middle, end = (int(v) for v in self._bounds[index])
        return self._decode(start, middle), self._decode(middle, end)

    def _full_text(self, index: int) -> str:
        title, text = self._fields(index)
        return f"{title} {text}".strip() if title else text

    def position(self, doc_id: str) -> int | None:
        """The corpus position of ``doc_id`` (binary search over the sorted ids), or None."""
        if not isinstance(doc_id, str):
            return None
        key = doc_id.encode("utf-8")
        if len(key) > self._ids.dtype.itemsize or key.endswith(b"\0"):
            return None
        return self._search(key)

    def _search(self, key: bytes) -> int | None:
        low, high = 0, len(self._lookup)
        while low < high:  # binary search over the memory-mapped order: log2(D) page reads, no sorted copy
            middle = (low + high) // 2
            if self._ids[self._lookup[middle]] < key:
                low = middle + 1
            else:
                high = middle
        if low < len(self._lookup) and self._ids[self._lookup[low]] == key:
            return int(self._lookup[low])
        return None

    def __contains__(self, doc_id) -> bool:
        return self.position(doc_id) is not None

    def __getitem__(self, doc_id: str):

        index = self.position(doc_id)
        if index is None:
            raise KeyError(doc_id)
        return Document(doc_id, *self._fields(index))
