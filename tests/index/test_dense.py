import numpy as np
import pytest

from longdoc.index import BM25Retriever, DenseIndex


def brute_force_maxp(queries, vectors, owners, k):
    scores = queries @ vectors.T  # [Q, V]
    num_docs = owners.max() + 1
    doc_scores = np.full((len(queries), num_docs), -np.inf)
    for v, d in enumerate(owners):
        doc_scores[:, d] = np.maximum(doc_scores[:, d], scores[:, v])
    order = np.argsort(-doc_scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(doc_scores, order, axis=1), order


@pytest.mark.parametrize("seed", range(5))
def test_multivector_maxpool_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    segments = rng.integers(1, 6, size=80)  # ragged: 1..5 vectors per document
    owners = np.repeat(np.arange(80), segments)
    vectors = rng.normal(size=(len(owners), 16)).astype(np.float32)
    queries = rng.normal(size=(13, 16)).astype(np.float32)
    index = DenseIndex(16)
    half = len(owners) // 2
    index.add(vectors[:half], owners[:half])
    index.add(vectors[half:], owners[half:])
    scores, docs = index.search(queries, k=20, chunk_size=5)
    want_scores, want_docs = brute_force_maxp(queries, vectors, owners, 20)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(docs, want_docs)


def test_single_vector_search_equals_brute_force_and_pads():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(7, 8)).astype(np.float32)
    queries = rng.normal(size=(3, 8)).astype(np.float32)
    index = DenseIndex(8)
    index.add(vectors)
    scores, docs = index.search(queries, k=10)
    want_scores, want_docs = brute_force_maxp(queries, vectors, np.arange(7), 7)
    np.testing.assert_array_equal(docs[:, :7], want_docs)
    np.testing.assert_allclose(scores[:, :7], want_scores, rtol=1e-5)
    assert (docs[:, 7:] == -1).all() and np.isneginf(scores[:, 7:]).all()


@pytest.mark.parametrize("factory", ["HNSW16", "IVF4,Flat"])
def test_approximate_indexes_find_most_true_neighbours(factory):
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(400, 16)).astype(np.float32)
    queries = vectors[:20] + 0.01 * rng.normal(size=(20, 16)).astype(np.float32)
    index = DenseIndex(16, factory=factory, nprobe=4)
    index.add(vectors)
    _, docs = index.search(queries, k=10)
    _, want = brute_force_maxp(queries, vectors, np.arange(400), 10)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(docs, want)])
    assert overlap > 0.8


def test_bad_shapes_are_named():
    index = DenseIndex(4)
    with pytest.raises(ValueError, match="shape"):
        index.add(np.zeros((2, 5)))
    index.add(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="k must be positive"):
        index.search(np.zeros((1, 4)), k=0)


def test_bm25_ranks_the_matching_document_first():
    bm25 = BM25Retriever().index(
        ["a", "b", "c"], ["open and possibly create a file", "close a file descriptor", "send a signal to a process"]
    )
    run = bm25.search({"q": "create files", "r": "signals processes"}, k=3)
    assert max(run["q"], key=run["q"].get) == "a"
    assert max(run["r"], key=run["r"].get) == "c"


def test_gpu_indexes_shard_only_when_a_replica_would_not_fit():
    from longdoc.index.dense import should_shard

    gib = 2**30
    assert not should_shard(30 * gib, [80 * gib])  # one GPU: nothing to shard over
    assert not should_shard(30 * gib, [80 * gib, 80 * gib])  # fits twice over: replicate, queries split
    assert should_shard(50 * gib, [80 * gib, 80 * gib])  # 50 GiB of vectors on two 80 GiB GPUs
    assert should_shard(10 * gib, [80 * gib, 12 * gib])  # the smallest GPU decides


def pool_row_by_row(owners, scores, ids, k):
    """The per-row reference: a document's first hit in score order, the first k documents."""
    out_scores, out_docs = np.full((len(ids), k), -np.inf, np.float32), np.full((len(ids), k), -1)
    for row, (s, i) in enumerate(zip(scores, ids)):
        docs = owners[i[i >= 0]]
        _, first = np.unique(docs, return_index=True)
        first = np.sort(first)[:k]
        out_scores[row, : len(first)], out_docs[row, : len(first)] = s[i >= 0][first], docs[first]
    return out_scores, out_docs


@pytest.mark.parametrize("seed", range(4))
def test_batch_pooling_equals_row_by_row_pooling_with_ties_and_missing_hits(seed):
    rng = np.random.default_rng(seed)
    owners = np.repeat(np.arange(30), rng.integers(1, 5, size=30))
    index = DenseIndex(4)
    index.owners, index.num_docs = owners, 30
    ids = np.sort(rng.integers(-1, len(owners), size=(9, 25)), axis=1)[:, ::-1].copy()
    scores = np.round(rng.normal(size=(9, 25)), 1).astype(np.float32)  # ties
    scores = -np.sort(-scores, axis=1)
    got_scores, got_docs, found = index._max_pool(scores, ids, 7)
    want_scores, want_docs = pool_row_by_row(owners, scores, ids, 7)
    np.testing.assert_array_equal(got_docs, want_docs)
    np.testing.assert_array_equal(got_scores, want_scores)
    assert (found >= (want_docs >= 0).sum(axis=1)).all()


def test_a_document_with_many_close_vectors_makes_the_search_go_deeper():
    rng = np.random.default_rng(3)
    query = rng.normal(size=(1, 8)).astype(np.float32)
    crowd = query + 0.01 * rng.normal(size=(60, 8)).astype(np.float32)  # 60 vectors of document 0 on top
    others = rng.normal(size=(20, 8)).astype(np.float32)
    index = DenseIndex(8)
    index.add(np.concatenate([crowd, others]), np.concatenate([np.zeros(60, int), np.arange(1, 21)]))
    scores, docs = index.search(query, k=10)
    want_scores, want_docs = brute_force_maxp(
        query, np.concatenate([crowd, others]), np.concatenate([np.zeros(60, int), np.arange(1, 21)]), 10
    )
    np.testing.assert_array_equal(docs, want_docs)


def test_exhaustive_search_through_the_default_score_equals_faiss_max_pooling():
    """A model that keeps the default score (max over a document's vectors) is searched by FAISS; the
    exhaustive path that scores every document through ``score`` gives the same ranking."""
    from longdoc.index.dense import exhaustive_search
    from longdoc.models.biencoder import maxp_scores

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    owners = np.sort(rng.integers(0, 12, size=40))
    owners = np.unique(owners, return_inverse=True)[1]  # documents 0..D-1, one to several vectors each
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    index = DenseIndex(8)
    index.add(vectors, owners)
    faiss_scores, faiss_docs = index.search(queries, 6)
    scores, docs = exhaustive_search(maxp_scores, queries, vectors, owners, 6, documents_per_chunk=5)
    assert (docs == faiss_docs).all() and np.allclose(scores, faiss_scores, atol=1e-5)
    many, _ = exhaustive_search(maxp_scores, queries, vectors, owners, 50)
    assert np.isinf(many[:, owners.max() + 1 :]).all()  # fewer documents than k: padded like DenseIndex


def test_bm25_ranks_with_numpy_and_keeps_jax_off_the_gpu(monkeypatch):
    """A GPU node's image has JAX: bm25s would run its top-k there (GPU memory taken at import, ties ordered
    by another kernel); the retriever asks for numpy's top-k everywhere and JAX stays on the CPU."""
    import os

    import bm25s

    from longdoc.index.bm25 import BM25Retriever

    assert os.environ.get("JAX_PLATFORMS") == "cpu"
    seen = {}
    original = bm25s.BM25.retrieve

    def retrieve(self, *args, **kwargs):
        seen.update(kwargs)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(bm25s.BM25, "retrieve", retrieve)
    run = BM25Retriever().index(["a", "b"], ["open a file", "close the socket"]).search({"q": "file"}, k=2)
    assert seen["backend_selection"] == "numpy" and list(run["q"]) == ["a"]
