"""BM25 through the maintained ``bm25s`` library.

Parameters follow Anserini's defaults, which the papers' BM25 rows used (k1 = 0.9, b = 0.4, Lucene's
BM25 variant), with English stop words and the Snowball (Porter 2) stemmer. Anserini uses Porter 1;
the rankings differ slightly.

Where JAX is installed (the GPU nodes' image has it), ``bm25s`` imports it and runs a top-k at import:
JAX then takes most of the GPU's memory in every process that imports this module, and a second such
process fails to import it (the node check's pytest workers did). JAX is kept on the CPU here, and the
top-k is numpy's in every environment, so rankings (ties included) do not depend on what is installed.
"""

from __future__ import annotations

import os

os.environ["JAX_PLATFORMS"] = "cpu"  # before bm25s imports JAX (see above); an image's own setting too

import bm25s  # noqa: E402
import Stemmer  # noqa: E402

from longdoc.eval.metrics import Run


class BM25Retriever:
    def __init__(self, k1: float = 0.9, b: float = 0.4, method: str = "lucene", stemmer: str = "english"):
        self.params = {"k1": k1, "b": b, "method": method, "stemmer": stemmer}
        self.stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        self.model = bm25s.BM25(k1=k1, b=b, method=method)
        self.doc_ids: list[str] = []

    def _tokenize(self, texts: list[str]):
        return bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False)

    def index(self, doc_ids: list[str], texts: list[str]) -> BM25Retriever:
        if len(doc_ids) != len(texts):
            raise ValueError(f"{len(doc_ids)} ids but {len(texts)} texts")
        if not doc_ids:
            raise ValueError("cannot index an empty corpus")
        self.doc_ids = list(doc_ids)
        self.model.index(self._tokenize(texts), show_progress=False)
        return self

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        """``{query id: {doc id: score}}`` of the top ``k`` documents (documents with score 0 dropped)."""
        if not self.doc_ids:
            raise RuntimeError("index() a corpus before searching")
        qids = list(queries)
        k = min(k, len(self.doc_ids))
        docs, scores = self.model.retrieve(
            self._tokenize([queries[q] for q in qids]), k=k, show_progress=False, n_threads=1, backend_selection="numpy"
        )
        return {
            qid: {self.doc_ids[int(d)]: float(s) for d, s in zip(docs[row], scores[row]) if s > 0}
            for row, qid in enumerate(qids)
        }
