"""A bi-encoder and a FAISS index behind the :class:`~longdoc.types.Retriever` protocol.

The corpus is encoded once (one vector per segment) on the first search; documents are scored by the
model's :meth:`~longdoc.models.biencoder.BiEncoder.score`: by default their best segment (MaxP; one
segment for FirstP and Longtriever), which FAISS computes exactly (:class:`DenseIndex`); a model that
overrides ``score`` (late interaction) is searched exhaustively through it
(:func:`~longdoc.index.dense.exhaustive_search`).
Under several processes they share the encoding and the first one searches: it returns the run,
the others an empty one.
"""

from __future__ import annotations

import time

import numpy as np

from longdoc.index.dense import DenseIndex, exhaustive_search
from longdoc.models.biencoder import BiEncoder
from longdoc.text.segments import SegmentedCorpus
from longdoc.types import Run


class DenseRetriever:
    def __init__(self, model: BiEncoder, corpus: SegmentedCorpus, index_factory: str = "Flat", progress: bool = True):
        self.model, self.corpus, self.index_factory, self.progress = model, corpus, index_factory, progress
        self.index: DenseIndex | None = None
        self.vectors = self.owners = None
        self.encode_seconds = 0.0
        self._built = False

    @property
    def exact(self) -> bool:
        """Whether the model scores otherwise than the max over its vectors (then FAISS cannot search it)."""
        return type(self.model).score is not BiEncoder.score

    def build(self) -> DenseRetriever:
        """Encode the corpus and fill the index (done by the first search when not called)."""
        started = time.perf_counter()
        self.vectors, self.owners = self.model.encode_corpus(self.corpus, progress=self.progress, everyone=False)
        self.encode_seconds = time.perf_counter() - started
        if self.vectors is not None and not self.exact:
            self.index = DenseIndex(self.vectors.shape[1], factory=self.index_factory)
            self.index.add(self.vectors, self.owners)
        self._built = True
        return self

    def use_vectors(self, vectors: np.ndarray, owners: np.ndarray) -> DenseRetriever:
        """Search corpus vectors encoded earlier by the same model (a fit's kept index) instead of
        encoding the corpus again."""
        self.vectors, self.owners = vectors, owners
        if not self.exact:
            self.index = DenseIndex(vectors.shape[1], factory=self.index_factory)
            self.index.add(vectors, owners)
        self._built = True
        return self

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        if not self._built:
            self.build()
        query_vectors = self.model.encode_queries(list(queries.values()))  # every process takes part in the gathering
        if self.vectors is None:
            return {}
        if self.exact:
            scores, docs = exhaustive_search(self.model.score, query_vectors, self.vectors, self.owners, k)
        else:
            scores, docs = self.index.search(query_vectors, k)
        return {
            qid: {self.corpus.doc_ids[d]: float(s) for s, d in zip(scores[row], docs[row]) if d >= 0}
            for row, qid in enumerate(queries)
        }
