"""Inner-product search over document vectors with FAISS.

One vector per document (FirstP, Longtriever) or several (MaxP, SeDR: one per segment). With several,
a document's score is the maximum over its vectors (MaxP, Dai & Callan 2019); the search asks FAISS
for more and more segment hits until ``k`` distinct documents are found, which is exact for a flat
index: a document not among the hits cannot beat the lowest hit.

``factory`` is a FAISS index-factory string: ``Flat`` (exact, default), ``IVF256,Flat``, ``HNSW32``,
``IVF256,PQ16``... Indexes move to the GPUs when faiss-gpu and CUDA are present (``use_gpu='auto'``):
replicated on every visible GPU (each searches a share of the queries), or sharded across them
(each holds a share of the vectors) when the vectors would fill more than half of one GPU
(:func:`should_shard`; ``shard=True``/``False`` forces it). Queries are searched in chunks so the
score buffers stay bounded.
"""

from __future__ import annotations

import faiss
import numpy as np


def gpu_count() -> int:
    return faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0


SHARD_SHARE = 0.5  # shard when the vectors need more than this share of the smallest GPU's free memory


def should_shard(vector_bytes: int, free_bytes_per_gpu: list[int]) -> bool:
    """Replicas need the whole index on every GPU; shards need 1/N of it. Shard only when a replica
    would not comfortably fit (several GPUs and vectors above ``SHARD_SHARE`` of the smallest free memory)."""
    return len(free_bytes_per_gpu) > 1 and vector_bytes > SHARD_SHARE * min(free_bytes_per_gpu)


def _free_gpu_bytes() -> list[int]:
    import torch

    return (
        [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    )


class DenseIndex:
    def __init__(
        self,
        dim: int,
        factory: str = "Flat",
        use_gpu: str | bool = "auto",
        nprobe: int = 16,
        shard: str | bool = "auto",
    ):
        self.dim = dim
        self.factory = factory
        self.index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        self.owners = np.zeros(0, dtype=np.int64)  # document number of every stored vector
        self.num_docs = 0
        self.max_vectors_per_doc = 0
        self.nprobe = nprobe
        self.shard = shard
        self.sharded = False
        self._want_gpu = gpu_count() > 0 if use_gpu == "auto" else bool(use_gpu)
        self._on_device = False  # moved to the GPUs on the first add (after training, for IVF)
        if self._want_gpu and gpu_count() == 0:
            raise RuntimeError("use_gpu=True but faiss sees no GPU (is faiss-gpu installed and CUDA visible?)")

    @property
    def on_gpu(self) -> bool:
        return self._want_gpu and hasattr(faiss, "index_cpu_to_all_gpus")

    def add(self, vectors: np.ndarray, owners: np.ndarray | None = None) -> None:
        """Add vectors; ``owners[i]`` is the document number (0..D-1, counting from the first document
        ever added) of vector i. Without ``owners`` every vector is its own document."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"vectors must have shape [n, {self.dim}], got {vectors.shape}")
        if owners is None:
            owners = np.arange(self.num_docs, self.num_docs + len(vectors))
        owners = np.asarray(owners, dtype=np.int64)
        if owners.shape != (len(vectors),):
            raise ValueError(f"owners must have one entry per vector ({len(vectors)}), got {owners.shape}")
        if len(owners) and owners.min() < 0:
            raise ValueError("owners must be document numbers >= 0")
        if not self.index.is_trained:
            self.index.train(vectors)
            if "IVF" in self.factory:
                faiss.ParameterSpace().set_index_parameter(self.index, "nprobe", self.nprobe)
        if self.sharded:
            raise RuntimeError("a GPU index sharded across GPUs takes all its vectors in one add()")
        if self.on_gpu and not self._on_device:
            options = faiss.GpuMultipleClonerOptions()
            self.sharded = options.shard = (
                bool(self.shard) if self.shard != "auto" else should_shard(vectors.nbytes, _free_gpu_bytes())
            )
            try:
                self.index = faiss.index_cpu_to_all_gpus(self.index, co=options)
            except RuntimeError as err:  # e.g. HNSW has no GPU version
                raise RuntimeError(f"index {self.factory!r} cannot run on the GPU: {err}; pass use_gpu=False") from err
            self._on_device = True
        self.index.add(vectors)
        self.owners = np.concatenate([self.owners, owners])
        counts = np.bincount(self.owners)
        self.num_docs = len(counts)
        self.max_vectors_per_doc = int(counts.max()) if len(counts) else 0

    def search(self, queries: np.ndarray, k: int, chunk_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` documents per query: ``(scores [Q, k], doc numbers [Q, k])``, padded with
        ``-inf`` / ``-1`` when fewer than ``k`` documents exist."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries must have shape [n, {self.dim}], got {queries.shape}")
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        out_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        out_docs = np.full((len(queries), k), -1, dtype=np.int64)
        for start in range(0, len(queries), chunk_size):
            chunk = queries[start : start + chunk_size]
            scores, docs = self._search_chunk(chunk, k)
            out_scores[start : start + len(chunk)] = scores
            out_docs[start : start + len(chunk)] = docs
        return out_scores, out_docs

    def _search_chunk(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k_docs = min(k, self.num_docs)
        depth = k_docs if self.max_vectors_per_doc <= 1 else 2 * k_docs
        while True:
            scores, ids = self.index.search(queries, depth)
            out_scores, out_docs, found = self._max_pool(scores, ids, k)
            if found.min(initial=k_docs) >= k_docs or depth >= self.index.ntotal:
                return out_scores, out_docs
            depth = min(self.index.ntotal, depth * 2)

    def _max_pool(self, scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vector hits ``[Q, depth]`` (sorted by score per row) to the top-``k`` documents per row, all
        rows at once: a document's first hit is its maximum (MaxP), kept in hit order. Returns
        ``(scores [Q, k], docs [Q, k], documents found per row [Q])``, padded with -inf / -1."""
        rows = np.arange(len(ids))[:, None]
        valid = ids >= 0
        docs = np.where(valid, self.owners[np.where(valid, ids, 0)], -1)
        order = np.argsort(docs, axis=1, kind="stable")  # equal documents together, in hit order
        grouped = np.take_along_axis(docs, order, axis=1)
        first_of_group = np.ones_like(grouped, dtype=bool)
        first_of_group[:, 1:] = grouped[:, 1:] != grouped[:, :-1]
        first = np.zeros_like(valid)
        first[np.broadcast_to(rows, order.shape)[first_of_group], order[first_of_group]] = True
        first &= valid
        rank = np.cumsum(first, axis=1) - 1  # position among the row's documents, in hit order
        chosen = first & (rank < k)
        out_scores = np.full((len(ids), k), -np.inf, dtype=np.float32)
        out_docs = np.full((len(ids), k), -1, dtype=np.int64)
        row_of, column_of = np.nonzero(chosen)
        out_scores[row_of, rank[chosen]] = scores[chosen]
        out_docs[row_of, rank[chosen]] = docs[chosen]
        return out_scores, out_docs, first.sum(axis=1)


def exhaustive_search(
    score, queries: np.ndarray, vectors: np.ndarray, owners: np.ndarray, k: int, documents_per_chunk: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` documents per query by any relevance function, every document scored (exact):
    ``score(queries [Q, ...], documents [D, S, d], mask [D, S]) -> [Q, D]`` (a model's
    :meth:`~longdoc.models.biencoder.BiEncoder.score`; the index for models whose score FAISS cannot
    compute, e.g. late interaction). ``vectors [V, d]`` belong to documents ``owners [V]`` (0..D-1).
    Returns ``(scores [Q, k], doc numbers [Q, k])`` like :meth:`DenseIndex.search`."""
    import torch

    from longdoc.models.biencoder import scatter_slots

    owners = np.asarray(owners, dtype=np.int64)
    num_docs = int(owners.max()) + 1 if len(owners) else 0
    order = np.argsort(owners, kind="stable")
    starts = np.searchsorted(owners[order], np.arange(num_docs))
    slot = np.empty_like(owners)
    slot[order] = np.arange(len(owners)) - starts[owners[order]]  # position of each vector within its document
    query_tensor = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32))
    found_scores, found_docs = [], []
    for first in range(0, num_docs, documents_per_chunk):
        keep = (owners >= first) & (owners < first + documents_per_chunk)
        count = min(documents_per_chunk, num_docs - first)
        grid, mask = scatter_slots(
            torch.from_numpy(np.ascontiguousarray(vectors[keep], dtype=np.float32)),
            torch.from_numpy(owners[keep] - first),
            torch.from_numpy(slot[keep]),
            count,
            int(slot[keep].max()) + 1 if keep.any() else 1,
        )
        with torch.no_grad():
            scores = score(query_tensor, grid, mask).float()
        top = scores.topk(min(k, count), dim=1)
        found_scores.append(top.values.numpy())
        found_docs.append(top.indices.numpy() + first)
    out_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    out_docs = np.full((len(queries), k), -1, dtype=np.int64)
    if found_scores:
        scores, docs = np.concatenate(found_scores, axis=1), np.concatenate(found_docs, axis=1)
        best = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        out_scores[:, : best.shape[1]] = np.take_along_axis(scores, best, axis=1)
        out_docs[:, : best.shape[1]] = np.take_along_axis(docs, best, axis=1)
    return out_scores, out_docs
