"""WordPiece segments of documents: FirstP (first segment only) and MaxP (consecutive segments).

A segment is ``[CLS] + up to (segment_length - 2) content tokens + [SEP]``; a document of n content
tokens gives ceil(n / (segment_length - 2)) segments, at most ``max_segments``.

A :class:`SegmentedCorpus` holds its segments in lists, or (``directory=``) in a token store on disk,
written once and read document by document (:class:`MappedSegments`: offsets memory-mapped, tokens read
with ``pread``), for corpora that do not fit in memory as Python lists (MS MARCO at 4 x 512 tokens:
about 6.5 billion token ids).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from transformers import PreTrainedTokenizerBase

from longdoc.io import atomic_directory
from longdoc.sharding import rank, world_size


def segment_ids(token_ids: list[int], segment_length: int, max_segments: int) -> list[list[int]]:
    """Split content token ids into consecutive chunks of ``segment_length - 2`` (room for [CLS]/[SEP])."""
    if segment_length < 3:
        raise ValueError(f"segment_length must be >= 3, got {segment_length}")
    if max_segments < 1:
        raise ValueError(f"max_segments must be >= 1, got {max_segments}")
    width = segment_length - 2
    chunks = [token_ids[i : i + width] for i in range(0, len(token_ids), width)][:max_segments]
    return chunks or [[]]


TOKEN_STORE_VERSION = 1


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """What a tokenizer does, hashed (its fast tokenizer's definition without the per-call truncation
    and padding state, else its class and vocabulary), so that a copy saved with a model elsewhere
    shares the token stores of the original."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        definition = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
    else:
        definition = {"class": type(tokenizer).__name__, "vocabulary": sorted(tokenizer.get_vocab().items())}
    text = json.dumps(definition, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def token_store_spec(
    tokenizer, segment_length: int, max_segments: int, document_tokens: int = 0, sentence_filling: bool = False
) -> dict:
    """What a token store's contents depend on (besides the documents): the tokenizer, the block shape,
    and the versions of the code and packages that cut them."""
    import inspect

    import tokenizers
    import transformers

    from longdoc.text import sentences

    cutting = [segment_ids, _segment_batches] + ([sentences] if sentence_filling else [])
    code = hashlib.sha256("".join(inspect.getsource(part) for part in cutting).encode()).hexdigest()[:16]
    packages = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__}
    if sentence_filling:
        packages["blingfire"] = importlib.metadata.version("blingfire")
    return {
        "version": TOKEN_STORE_VERSION,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "vocabulary": len(tokenizer),
        "segment_length": segment_length,
        "max_segments": max_segments,
        "document_tokens": document_tokens,
        "sentence_filling": sentence_filling,
        "code": code,  # the functions that cut the blocks (the stores live outside the code-keyed cache)
        "packages": packages,
    }


def token_store_path(
    root: str | Path,
    tokenizer,
    segment_length: int,
    max_segments: int,
    document_tokens: int = 0,
    sentence_filling: bool = False,
    documents: str = "all",
) -> Path:
    """The folder of a token store under ``root`` (a corpus store's ``segments``): one per set of
    ``documents`` (a name) and :func:`token_store_spec`."""
    spec = token_store_spec(tokenizer, segment_length, max_segments, document_tokens, sentence_filling)
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    return Path(root) / f"{documents}-{digest}"


def first_process_then_the_others(work) -> None:
    """``work()`` in the first process, then (after it) in the others: a file the first builds is found
    built by the rest (several processes under torchrun never build one store side by side)."""
    if world_size() == 1:
        work()
        return
    import torch.distributed as dist

    if rank() == 0:
        work()
    dist.barrier()
    if rank() != 0:
        work()


def write_token_store(directory: str | Path, documents: Iterable[list[list[int]]], vocabulary: int, spec: dict) -> Path:
    """Write every document's segments (content token ids) to ``directory``, built under a temporary
    name: ``tokens.bin`` (flat ids, uint16 when the vocabulary allows), ``segment_starts.npy`` (``[S+1]``
    token offsets) and ``document_starts.npy`` (``[D+1]`` segment offsets); ``spec`` is kept in
    ``store.json`` and must match when the store is opened again."""
    from longdoc.io import naming_files
    from longdoc.store_files import file_facts, verify

    dtype = np.uint16 if vocabulary <= 1 << 16 else np.uint32
    with naming_files("build the token store", Path(directory) / "tokens.bin"), atomic_directory(directory) as tmp:
        lengths, counts = array("q"), array("q")
        with open(tmp / "tokens.bin", "wb") as handle:
            for segments in documents:
                counts.append(len(segments))
                for segment in segments:
                    lengths.append(len(segment))
                    ids = np.asarray(segment, dtype=np.int64)
                    if ids.size and (ids.min() < 0 or ids.max() >= vocabulary):
                        raise ValueError(
                            f"token store {directory}: a token id outside [0, {vocabulary}) in document {len(counts) - 1}"
                        )
                    handle.write(ids.astype(dtype).tobytes())
        np.save(tmp / "segment_starts.npy", np.concatenate([[0], np.cumsum(np.frombuffer(lengths, np.int64))]))
        np.save(tmp / "document_starts.npy", np.concatenate([[0], np.cumsum(np.frombuffer(counts, np.int64))]))
        files = file_facts(tmp, ["tokens.bin", "segment_starts.npy", "document_starts.npy"])
        (tmp / "store.json").write_text(json.dumps({**spec, "dtype": np.dtype(dtype).name, "files": files}, indent=2))
    verify(Path(directory))  # what landed on disk is what was written
    return Path(directory)


class MappedSegments(Sequence):
    """Per document, per segment: content token ids, read from a token store (:func:`write_token_store`)."""

    def __init__(self, directory: str | Path):
        from longdoc.store_files import StoreDamaged, check_sizes, read_manifest

        self.directory = Path(directory)
        self.spec = read_manifest(self.directory)
        if self.spec is None:
            raise FileNotFoundError(f"{self.directory}: no token store (store.json missing)")
        if self.spec.get("dtype") not in ("uint16", "uint32"):
            raise StoreDamaged(
                self.directory / "store.json", f"dtype {self.spec.get('dtype')!r} is not uint16 or uint32"
            )
        offsets = ("segment_starts.npy", "document_starts.npy")
        check_sizes(self.directory, self.spec, hashed=offsets, expected={*offsets, "tokens.bin"})
        arrays = []
        for name in ("segment_starts.npy", "document_starts.npy"):
            try:
                arrays.append(np.load(self.directory / name, mmap_mode="r"))
            except (ValueError, OSError) as err:
                raise StoreDamaged(self.directory / name, f"is not the array its builder wrote ({err})") from None
        self.segment_starts, self.document_starts = arrays
        if any(a.ndim != 1 or a.dtype != np.int64 or (len(a) > 1 and (np.diff(a) < 0).any()) for a in arrays):
            raise StoreDamaged(self.directory, "its offsets are not the ascending arrays its builder wrote")
        self.dtype = np.dtype(self.spec["dtype"])
        if (
            int(self.segment_starts[-1]) * self.dtype.itemsize != self.spec["files"]["tokens.bin"]["bytes"]
            or int(self.document_starts[-1]) != len(self.segment_starts) - 1
        ):
            raise StoreDamaged(
                self.directory / "store.json", "its offsets and tokens.bin disagree: the store is damaged"
            )
        self._tokens = open(self.directory / "tokens.bin", "rb")  # pread: the page cache holds it, not this process

    def __len__(self) -> int:
        return len(self.document_starts) - 1

    @property
    def total(self) -> int:
        """Segments of every document."""
        return int(self.document_starts[-1])

    def __getitem__(self, index: int) -> list[list[int]]:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        first, last = int(self.document_starts[index]), int(self.document_starts[index + 1])
        bounds = self.segment_starts[first : last + 1]
        size = self.dtype.itemsize
        wanted = int(bounds[-1] - bounds[0]) * size
        raw = os.pread(self._tokens.fileno(), wanted, int(bounds[0]) * size)
        if len(raw) != wanted:
            from longdoc.store_files import short_read

            raise short_read(self.directory / "tokens.bin", wanted, len(raw))
        ids = np.frombuffer(raw, self.dtype).tolist()
        return [ids[a - bounds[0] : b - bounds[0]] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]

    def extents(self, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Per document: the longest of its first ``limit`` segments and how many it has (vectorised)."""
        lengths = np.diff(self.segment_starts)
        counts = np.diff(self.document_starts)
        position = np.arange(len(lengths)) - np.repeat(self.document_starts[:-1], counts)
        longest = np.maximum.reduceat(np.where(position < limit, lengths, 0), self.document_starts[:-1])
        return longest, np.minimum(counts, limit)


@dataclass
class SegmentedCorpus:
    """Token ids of every document, cut into segments once and reused across epochs and encodings."""

    doc_ids: Sequence[str]
    segments: Sequence[list[list[int]]]  # per document, per segment: content token ids (lists or MappedSegments)

    @classmethod
    def build(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        doc_ids: list[str],
        texts: list[str],
        segment_length: int = 512,
        max_segments: int = 1,
        document_tokens: int = 0,
        batch_size: int = 256,
        sentence_filling: bool = False,
        directory: str | Path | None = None,
    ) -> SegmentedCorpus:
        """``document_tokens`` > 0 reads at most that many content tokens per document (the last
        block is then shorter); 0 reads all that ``max_segments`` blocks hold. ``sentence_filling``:
        blocks of whole sentences (SMITH, :func:`longdoc.text.sentences.sentence_blocks`) instead of
        consecutive windows. ``directory``: the segments go to a token store there, tokenized in batches
        as ``texts`` (any sequence, e.g. a corpus store's lazy texts) is read, and are read back memory-
        mapped; a store already there with the same tokenizer and shape is opened as it is (its file sizes
        checked; a damaged one is rebuilt, with one line saying why)."""
        if sentence_filling and document_tokens:
            raise ValueError("document_tokens is not defined for sentence-filled blocks (set max_segments)")
        doc_ids = doc_ids if isinstance(doc_ids, list) or directory is not None else list(doc_ids)
        if directory is not None:
            spec = token_store_spec(tokenizer, segment_length, max_segments, document_tokens, sentence_filling)
            spec["documents"] = len(texts)

            def write() -> None:
                from longdoc.store_files import StoreDamaged, read_manifest, rebuilding

                try:
                    manifest = read_manifest(Path(directory))
                    if (
                        manifest is not None
                        and {k: v for k, v in manifest.items() if k not in ("dtype", "files")} == spec
                    ):
                        MappedSegments(directory)  # every check an open makes
                        return
                except StoreDamaged as problem:
                    rebuilding(problem, "the corpus's texts")
                documents = _segment_batches(
                    tokenizer, texts, segment_length, max_segments, document_tokens, batch_size, sentence_filling
                )
                write_token_store(directory, documents, len(tokenizer), spec)

            first_process_then_the_others(write)
            return cls(doc_ids, MappedSegments(directory))
        documents = _segment_batches(
            tokenizer, texts, segment_length, max_segments, document_tokens, batch_size, sentence_filling
        )
        return cls(list(doc_ids), list(documents))

    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def num_segments(self) -> int:
        if isinstance(self.segments, MappedSegments):
            return self.segments.total
        return sum(map(len, self.segments))

    def extents(self, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Per document: the length of its longest segment among the first ``limit`` and how many of
        those it has (what a batch of it pads to)."""
        if isinstance(self.segments, MappedSegments):
            return self.segments.extents(limit)
        kept = [segments[:limit] for segments in self.segments]
        return (
            np.array([max(map(len, s)) for s in kept], dtype=np.int64),
            np.array([len(s) for s in kept], dtype=np.int64),
        )


def _segment_batches(
    tokenizer,
    texts: Sequence[str],
    segment_length: int,
    max_segments: int,
    document_tokens: int,
    batch_size: int,
    sentence_filling: bool,
) -> Iterable[list[list[int]]]:
    """Each document's segments, tokenized ``batch_size`` texts at a time."""
    if sentence_filling:
        from longdoc.text.sentences import sentence_blocks

        for start in range(0, len(texts), batch_size):
            yield from sentence_blocks(tokenizer, texts[start : start + batch_size], segment_length, max_segments)
        return
    limit = (segment_length - 2) * max_segments
    if document_tokens:
        limit = min(limit, document_tokens)
    for start in range(0, len(texts), batch_size):
        encoded = tokenizer(
            texts[start : start + batch_size], add_special_tokens=False, truncation=True, max_length=limit
        )["input_ids"]
        yield from (segment_ids(ids, segment_length, max_segments) for ids in encoded)
