"""Search: exact/approximate inner-product search with FAISS (single- and multi-vector), and BM25."""

from longdoc.index.bm25 import BM25Retriever
from longdoc.index.dense import DenseIndex

__all__ = ["BM25Retriever", "DenseIndex"]
