"""Descriptive statistics of a dataset: document lengths in words and WordPiece tokens, split sizes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from longdoc.data.beir import RetrievalDataset
from longdoc.data.pairs import DocumentPair


def document_lengths(dataset: RetrievalDataset, tokenizer, batch_size: int = 256) -> pd.DataFrame:
    """One row per document: words (whitespace split of title + text) and WordPiece tokens."""
    ids = dataset.doc_ids
    texts = dataset.texts
    tokens = []
    for start in range(0, len(texts), batch_size):
        tokens.extend(
            len(t) for t in tokenizer(texts[start : start + batch_size], add_special_tokens=False)["input_ids"]
        )
    return pd.DataFrame(
        {"words": [len(t.split()) for t in texts], "tokens": tokens}, index=pd.Index(ids, name="doc_id")
    )


def length_summary(lengths: pd.DataFrame, limit: int = 512) -> pd.DataFrame:
    rows = {}
    for column in lengths.columns:
        values = lengths[column].to_numpy()
        rows[column] = {
            "documents": len(values),
            "mean": values.mean(),
            "median": np.median(values),
            "p10": np.percentile(values, 10),
            "p90": np.percentile(values, 90),
            "max": values.max(),
            f"share <= {limit}": float(np.mean(values <= limit)),
        }
    return pd.DataFrame(rows).T


def split_summary(dataset: RetrievalDataset) -> pd.DataFrame:
    rows = {}
    for split in dataset.qrels:
        queries, qrels = dataset.split(split)
        relevant = [sum(r > 0 for r in judged.values()) for judged in qrels.values()]
        rows[split] = {
            "queries": len(queries),
            "judgements": sum(relevant),
            "relevant per query (mean)": float(np.mean(relevant)) if relevant else 0.0,
            "queries with >1 relevant": int(np.sum(np.array(relevant) > 1)),
        }
    return pd.DataFrame(rows).T


def pair_summary(pairs: dict[str, list[DocumentPair]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            split: {"positive": sum(p.label == 1 for p in rows), "negative": sum(p.label == 0 for p in rows)}
            for split, rows in pairs.items()
        }
    ).T


def data_findings(lengths: pd.DataFrame, limit: int = 512) -> str:
    """What the length distribution says against the design targets and SeDR's Figure 1 (computed)."""
    words, tokens = lengths["words"], lengths["tokens"]
    fits = float(np.mean(tokens <= limit))
    return "\n".join(
        [
            f"- Median length {np.median(words):.0f} words (DESIGN.md planned about 420 for `manpages`); "
            f"{np.mean(words > 1600):.1%} of documents are longer than 1,600 words (planned: about 10%).",
            f"- {fits:.1%} of documents fit in {limit} WordPiece tokens (SeDR Figure 1: 29.5% of MS MARCO documents): "
            f"{'a long-document collection like MS MARCO' if fits < 0.5 else 'mostly short documents, unlike MS MARCO'}.",
            f"- Median {np.median(tokens):.0f} tokens, 90th percentile {np.percentile(tokens, 90):.0f}: a model that reads "
            f"one {limit}-token window sees all of only {fits:.0%} of the documents.",
        ]
    )
