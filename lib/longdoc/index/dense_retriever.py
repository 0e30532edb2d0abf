"""A bi-encoder and a FAISS index behind the :class:`~longdoc.types.Retriever` protocol.

The corpus is encoded once (one vector per segment) on the first search; documents are scored by
their best segment (MaxP; one segment for FirstP and Longtriever) through :class:`DenseIndex`.
Under several processes they share the encoding and the first one searches: it returns the run,
the others an empty one.
"""

from __future__ import annotations

import time

from longdoc.index.dense import DenseIndex
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

    def build(self) -> "DenseRetriever":
        """Encode the corpus and fill the index (done by the first search when not called)."""
        started = time.perf_counter()
        self.vectors, self.owners = self.model.encode_corpus(self.corpus, progress=self.progress, everyone=False)
        self.encode_seconds = time.perf_counter() - started
        if self.vectors is not None:
            self.index = DenseIndex(self.vectors.shape[1], factory=self.index_factory)
            self.index.add(self.vectors, self.owners)
        self._built = True
        return self

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        if not self._built:
            self.build()
        query_vectors = self.model.encode_queries(list(queries.values()))  # every process takes part in the gathering
        if self.index is None:
            return {}
        scores, docs = self.index.search(query_vectors, k)
        return {qid: {self.corpus.doc_ids[d]: float(s) for s, d in zip(scores[row], docs[row]) if d >= 0}
                for row, qid in enumerate(queries)}
