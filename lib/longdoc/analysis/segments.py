"""How a document's segment vectors spread (SeDR Figure 5): the paper's t-SNE of one query and its
candidates' segments, and a number for what the figure shows.

The paper reads Figure 5 as: segments of SeDR-Global-Attention "collapse into one point", those of
SeDR-MaxP "diffuse arbitrarily", and those of SeDR and SeDR-Transformer-Head "scatter to a document
area". :func:`segment_spread` measures this over the whole corpus: the mean cosine between two segments
of the same document (collapse: near 1) beside the mean cosine between segments of different documents
(the background), and their gap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def document_cosines(vectors: np.ndarray, owners: np.ndarray) -> dict[int, float]:
    """Per document with two or more segments: the mean pairwise cosine of its segment vectors."""
    unit = _unit(vectors)
    per_document = {}
    for doc in np.unique(owners):
        rows = unit[owners == doc]
        if len(rows) < 2:
            continue
        similarity = rows @ rows.T
        n = len(rows)
        per_document[int(doc)] = float((similarity.sum() - np.trace(similarity)) / (n * (n - 1)))
    if not per_document:
        raise ValueError("no document has two or more segments")
    return per_document


def document_gaps(vectors: np.ndarray, owners: np.ndarray) -> dict[int, float]:
    """Per document: its within-document cosine minus the model's between-document cosine."""
    background = between_document_cosine(vectors, owners)
    return {doc: cosine - background for doc, cosine in document_cosines(vectors, owners).items()}


def within_document_cosine(vectors: np.ndarray, owners: np.ndarray) -> float:
    """Mean over documents with two or more segments of the mean pairwise cosine of their segments."""
    return float(np.mean(list(document_cosines(vectors, owners).values())))


def between_document_cosine(vectors: np.ndarray, owners: np.ndarray, pairs: int = 20_000, seed: int = 0) -> float:
    """Mean cosine between two segments of different documents (``pairs`` random pairs)."""
    unit = _unit(vectors)
    rng = np.random.default_rng(seed)
    first, second = rng.integers(0, len(unit), size=(2, pairs))
    keep = owners[first] != owners[second]
    if not keep.any():
        raise ValueError("every segment belongs to one document")
    return float(np.einsum("ij,ij->i", unit[first[keep]], unit[second[keep]]).mean())


def segment_spread(vectors: np.ndarray, owners: np.ndarray) -> dict[str, float]:
    within, between = within_document_cosine(vectors, owners), between_document_cosine(vectors, owners)
    counts = np.bincount(owners)
    return {
        "within-document cosine": within,
        "between-document cosine": between,
        "gap": within - between,
        "documents with ≥ 2 segments": int((counts >= 2).sum()),
    }


def tsne_points(query: np.ndarray, vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D t-SNE (scikit-learn, cosine distance) of ``[query; vectors]``; row 0 is the query."""
    from sklearn.manifold import TSNE

    points = np.vstack([query[None, :], vectors])
    perplexity = float(min(30, max(2, (len(points) - 1) // 3)))
    return TSNE(n_components=2, perplexity=perplexity, metric="cosine", init="pca", random_state=seed).fit_transform(
        points
    )


def candidate_table(labels: dict[int, str], owners: np.ndarray) -> pd.DataFrame:
    """Segments per plotted document (for the figure's legend)."""
    counts = pd.Series(owners).value_counts()
    return pd.DataFrame({"document": [labels[d] for d in counts.index], "segments": counts.to_numpy()})
