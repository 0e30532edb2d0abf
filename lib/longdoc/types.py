"""The types every family shares: a run, judgements, and the :class:`Retriever` protocol.

A run is ``{query id: {doc id: score}}`` (higher ranks first); qrels are ``{query id: {doc id:
graded relevance}}``. BM25 (:class:`longdoc.index.bm25.BM25Retriever`), the dense bi-encoders
(:class:`longdoc.index.dense_retriever.DenseRetriever`) and NCI's generative decoder
(:class:`longdoc.index.nci_retriever.NciRetriever`) all satisfy :class:`Retriever`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


@runtime_checkable
class Retriever(Protocol):
    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        """The top ``k`` documents of each query (``{query id: text}``)."""
        ...
