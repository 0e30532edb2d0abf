"""What NCI's semantic identifiers carry (NCI Figure 4 and section 4.4): the t-SNE of the document
embeddings coloured by top-level cluster, the identifier prefixes (with their probabilities) that
similar and dissimilar queries retrieve, and two numbers for what the figure is read to show:

- **prefix agreement of relevant documents**: among the queries (of every split) with two or more
  relevant documents, how often two documents relevant to the same query share their first identifier digit,
  beside how often two random documents do (the identifiers put related documents together);
- **retrieved-prefix overlap**: the Jaccard overlap of the first digits of two queries' top retrieved
  documents, for the most similar query pairs against the least similar ones ("similar queries result
  in close document distributions ... dissimilar queries in un-overlapped document collections").
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def tsne_points(embeddings: np.ndarray, seed: int = 0, perplexity: float = 30.0) -> np.ndarray:
    from sklearn.manifold import TSNE

    perplexity = min(perplexity, max(2.0, (len(embeddings) - 1) / 3))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(
        np.asarray(embeddings, dtype=np.float32)
    )


def prefix(identifier: tuple[int, ...], digits: int) -> str:
    return "".join(str(d) if d < 10 else f"({d})" for d in identifier[:digits])


def relevant_prefix_agreement(
    qrels: dict, identifiers: dict[str, tuple[int, ...]], seed: int = 0, samples: int = 20_000
) -> dict[str, float]:
    """Share of same-query relevant document pairs with the same first digit, and of random pairs."""
    same, pairs = 0, 0
    for judged in qrels.values():
        relevant = sorted(d for d, r in judged.items() if r > 0 and d in identifiers)
        for i, a in enumerate(relevant):
            for b in relevant[i + 1 :]:
                pairs += 1
                same += identifiers[a][0] == identifiers[b][0]
    docs = sorted(identifiers)
    rng = np.random.default_rng(seed)
    left, right = rng.integers(len(docs), size=samples), rng.integers(len(docs), size=samples)
    keep = left != right
    random_same = float(
        np.mean([identifiers[docs[a]][0] == identifiers[docs[b]][0] for a, b in zip(left[keep], right[keep])])
    )
    return {
        "relevant pairs": pairs,
        "relevant pairs sharing the first digit": same / pairs if pairs else float("nan"),
        "random pairs sharing the first digit": random_same,
    }


def _first_digits(hits: list[str], identifiers: dict[str, tuple[int, ...]]) -> set[int]:
    return {identifiers[d][0] for d in hits if d in identifiers}


def prefix_overlap(
    runs: dict[str, list[str]],
    identifiers: dict[str, tuple[int, ...]],
    query_vectors: np.ndarray,
    qids: list[str],
    share: float = 0.05,
    seed: int = 0,
    samples: int = 2000,
) -> dict[str, float]:
    """Mean Jaccard overlap of the first digits of two queries' retrieved documents (``runs``: the top
    documents per query) for the ``share`` most similar query pairs (cosine of ``query_vectors``)
    against the ``share`` least similar ones, with a 95% bootstrap interval of the difference."""
    unit = query_vectors / np.maximum(np.linalg.norm(query_vectors, axis=1, keepdims=True), 1e-12)
    rows, cols = np.triu_indices(len(qids), k=1)
    cosine = np.einsum("ij,ij->i", unit[rows], unit[cols])
    order = np.argsort(cosine)
    n = max(1, int(share * len(order)))
    digits = [_first_digits(runs.get(q, []), identifiers) for q in qids]

    def jaccard(a: int, b: int) -> float:
        union = digits[a] | digits[b]
        return len(digits[a] & digits[b]) / len(union) if union else 0.0

    similar = np.array([jaccard(rows[i], cols[i]) for i in order[-n:]])
    dissimilar = np.array([jaccard(rows[i], cols[i]) for i in order[:n]])
    rng = np.random.default_rng(seed)
    differences = [
        rng.choice(similar, len(similar)).mean() - rng.choice(dissimilar, len(dissimilar)).mean()
        for _ in range(samples)
    ]
    low, high = np.percentile(differences, [2.5, 97.5])
    return {
        "pairs per group": n,
        "similar pairs: mean overlap": float(similar.mean()),
        "dissimilar pairs: mean overlap": float(dissimilar.mean()),
        "difference": float(similar.mean() - dissimilar.mean()),
        "95% CI low": float(low),
        "95% CI high": float(high),
    }


def query_groups(query_vectors: np.ndarray, qids: list[str]) -> dict[str, list[str]]:
    """Figure 4's two groups: A = the two most similar queries; B = the most similar pair among the
    queries least similar to both of A's (below the 10th percentile of cosine to each)."""
    unit = query_vectors / np.maximum(np.linalg.norm(query_vectors, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    a1, a2 = np.unravel_index(np.argmax(similarity), similarity.shape)
    far = np.maximum(similarity[a1], similarity[a2])
    far[[a1, a2]] = np.inf
    candidates = np.argsort(far)[: max(2, int(0.1 * len(qids)))]  # the 10% least similar to A (two at least)
    sub = similarity[np.ix_(candidates, candidates)]
    b1, b2 = np.unravel_index(np.argmax(sub), sub.shape)
    return {"A": [qids[a1], qids[a2]], "B": [qids[candidates[b1]], qids[candidates[b2]]]}


def retrieved_prefixes(
    hits: list[tuple[str, float]], identifiers: dict[str, tuple[int, ...]], digits: int, length_penalty: float
) -> pd.DataFrame:
    """A query's retrieved documents with their identifier prefixes and sequence probabilities
    (the beam score times length^penalty is the summed log-probability)."""
    rows = []
    for doc, score in hits:
        identifier = identifiers.get(doc)
        if identifier is None:
            continue
        rows.append(
            {
                "document": doc,
                "prefix": prefix(identifier, digits),
                "probability": float(np.exp(score * (len(identifier) + 1) ** length_penalty)),
            }
        )
    return pd.DataFrame(rows)
