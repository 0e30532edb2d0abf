"""Corpora, queries, relevance judgements and document pairs, in one internal (BEIR) format."""

from longdoc.data.beir import Document, RetrievalDataset, load_beir, save_beir
from longdoc.data.errors import DataFormatError
from longdoc.data.pairs import DocumentPair, load_pairs, save_pairs
from longdoc.data.registry import load_dataset

__all__ = [
    "DataFormatError",
    "Document",
    "DocumentPair",
    "RetrievalDataset",
    "load_beir",
    "load_dataset",
    "load_pairs",
    "save_beir",
    "save_pairs",
]
