"""BM25 through the maintained ``bm25s`` library.

Parameters follow Anserini's defaults, which the papers' BM25 rows used (k1 = 0.9, b = 0.4, Lucene's
BM25 variant), with English stop words and the Snowball (Porter 2) stemmer. Anserini uses Porter 1;
the rankings differ slightly.

Where JAX is installed (the GPU nodes' image has it), ``bm25s`` imports it and runs a top-k at import:
JAX then takes most of the GPU's memory in every process that imports this module, and a second such
process fails to import it (the node check's pytest workers did). JAX is kept on the CPU here, and the
top-k is numpy's in every environment, so rankings (ties included) do not depend on what is installed.

A large corpus (MS MARCO's 3.2M documents) is tokenized on every core (each process stems its share; the
tokens, and so the index, are those of one process), searched on every core, and saved and loaded
(:meth:`BM25Retriever.save`, :meth:`BM25Retriever.load`, memory-mapped), so a study builds it once per
corpus into its cache (:func:`longdoc.experiments.families.retrieval.runs.bm25_index`).
"""

from __future__ import annotations

import collections
import json
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

os.environ["JAX_PLATFORMS"] = "cpu"  # before bm25s imports JAX (see above); an image's own setting too

import bm25s  # noqa: E402
import Stemmer  # noqa: E402

from longdoc.eval.metrics import Run

PARALLEL_FROM_DOCUMENTS = 20_000  # below this, tokenizing in one process is faster than starting others
CHUNK_DOCUMENTS = 5_000


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def search_threads(queries: int, documents: int) -> int:
    """Threads a search of ``queries`` over ``documents`` runs on: every core on large searches only."""
    return _cores() if queries * documents > 1e8 else 1


def tokens(texts: list[str], stemmer: str | None) -> list[list[str]]:
    """Each text's terms: lower-cased words of two or more characters, English stop words dropped, stemmed."""
    stem = Stemmer.Stemmer(stemmer) if stemmer else None
    return bm25s.tokenize(texts, stopwords="en", stemmer=stem, return_ids=False, show_progress=False)


def _chunk_tokens(arguments: tuple[list[str], str | None]) -> list[list[str]]:
    return tokens(*arguments)


class BM25Retriever:
    def __init__(self, k1: float = 0.9, b: float = 0.4, method: str = "lucene", stemmer: str = "english"):
        self.params = {"k1": k1, "b": b, "method": method, "stemmer": stemmer}
        self.model = bm25s.BM25(k1=k1, b=b, method=method)
        self.doc_ids: list[str] = []

    def _tokenize(self, texts, workers: int = 1) -> list[list[str]]:
        stemmer = self.params["stemmer"]
        if workers <= 1 or len(texts) < PARALLEL_FROM_DOCUMENTS:
            return tokens(list(texts), stemmer)
        starts = range(0, len(texts), CHUNK_DOCUMENTS)
        # forked (as torch's DataLoader workers are): a child runs only the tokenizer, never torch or JAX;
        # spawn and forkserver would re-run a script's or stdin's __main__. At most two chunks per process
        # are read out of a memory-mapped corpus at a time, so the texts are never all in memory at once.
        terms: list[list[str]] = []
        with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
            pending: collections.deque = collections.deque()
            for start in starts:
                pending.append(pool.submit(_chunk_tokens, (list(texts[start : start + CHUNK_DOCUMENTS]), stemmer)))
                if len(pending) >= 2 * workers:
                    terms.extend(pending.popleft().result())
            while pending:
                terms.extend(pending.popleft().result())
        return terms

    def index(self, doc_ids, texts, workers: int | None = None) -> BM25Retriever:
        """Index ``texts`` (a list, or a lazy sequence of a memory-mapped corpus), tokenized on ``workers``
        processes (default every core; one below :data:`PARALLEL_FROM_DOCUMENTS` documents)."""
        if len(doc_ids) != len(texts):
            raise ValueError(f"{len(doc_ids)} ids but {len(texts)} texts")
        if not len(doc_ids):
            raise ValueError("cannot index an empty corpus")
        self.doc_ids = list(doc_ids)
        self.model.index(self._tokenize(texts, _cores() if workers is None else workers), show_progress=False)
        return self

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        """``{query id: {doc id: score}}`` of the top ``k`` documents (documents with score 0 dropped)."""
        if not self.doc_ids:
            raise RuntimeError("index() a corpus before searching")
        qids = list(queries)
        k = min(k, len(self.doc_ids))
        threads = search_threads(len(qids), len(self.doc_ids))
        docs, scores = self.model.retrieve(
            self._tokenize([queries[q] for q in qids]),
            k=k,
            show_progress=False,
            n_threads=threads,
            backend_selection="numpy",
        )
        return {
            qid: {self.doc_ids[int(d)]: float(s) for d, s in zip(docs[row], scores[row]) if s > 0}
            for row, qid in enumerate(qids)
        }

    def save(self, directory: str | Path) -> None:
        """The index (bm25s's arrays and vocabulary), the document ids and the parameters into ``directory``."""
        directory = Path(directory)
        self.model.save(directory, show_progress=False)
        (directory / "longdoc.json").write_text(json.dumps({"params": self.params, "doc_ids": self.doc_ids}))

    @classmethod
    def load(cls, directory: str | Path) -> BM25Retriever:
        """An index saved by :meth:`save`, its arrays memory-mapped."""
        directory = Path(directory)
        saved = json.loads((directory / "longdoc.json").read_text())
        retriever = cls(**saved["params"])
        retriever.model = bm25s.BM25.load(directory, mmap=True, show_progress=False)
        retriever.doc_ids = saved["doc_ids"]
        return retriever
