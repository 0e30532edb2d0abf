"""Segment-index search against raw FAISS over the same vectors (SeDR issue, item 7; a benchmark that
prints figures, nothing here is a timed test).

``python -m longdoc.bench.index`` builds ``--documents`` documents of 1-8 random unit vectors each
(MaxP / SeDR segment vectors), searches ``--queries`` queries for the top ``--k`` *documents* with
:class:`longdoc.index.dense.DenseIndex` (max over a document's segments, eq. 9) and the top ``--k``
*vectors* with the bare ``faiss.IndexFlatIP`` underneath, alternately, and prints the median times and
their ratio (the goal: at most 1.2). The index holds the same vectors in both; only the document
pooling differs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def compare(
    documents: int = 20_000, queries: int = 2_000, k: int = 100, dim: int = 768, repeats: int = 3, seed: int = 0
) -> dict:
    import faiss
    import torch

    from longdoc.index.dense import DenseIndex

    rng = np.random.default_rng(seed)
    owners = np.repeat(np.arange(documents), rng.integers(1, 9, size=documents))
    vectors = rng.normal(size=(len(owners), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query_vectors = rng.normal(size=(queries, dim)).astype(np.float32)
    index = DenseIndex(dim, use_gpu=False)
    index.add(vectors, owners)
    raw = faiss.IndexFlatIP(dim)
    raw.add(vectors)
    times = {"segment index": [], "raw FAISS": []}
    for _ in range(repeats):
        start = time.perf_counter()
        index.search(query_vectors, k)
        times["segment index"].append(time.perf_counter() - start)
        start = time.perf_counter()
        raw.search(query_vectors, k)
        times["raw FAISS"].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "documents": documents,
        "vectors": len(owners),
        "queries": queries,
        "k": k,
        "dim": dim,
        "threads": faiss.omp_get_max_threads(),
        "torch_threads": torch.get_num_threads(),
        **{f"{name} s": round(value, 3) for name, value in medians.items()},
        "ratio": round(medians["segment index"] / medians["raw FAISS"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for name, value in compare(args.documents, args.queries, args.k, args.dim, args.repeats).items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
