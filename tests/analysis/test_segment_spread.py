"""Segment spread (SeDR Figure 5): the within-document cosine against a brute-force computation, and
t-SNE points for the query and the segments."""

import numpy as np
import pytest

from longdoc.analysis.segments import between_document_cosine, document_cosines, segment_spread, tsne_points


def test_collapsed_segments_have_cosine_one_and_orthogonal_ones_zero():
    vectors = np.array([[1, 0, 0], [2, 0, 0], [0, 1, 0], [0, 0, 3], [5, 5, 5]], dtype=np.float32)
    owners = np.array([0, 0, 1, 1, 2])  # document 2 has one segment: left out
    assert document_cosines(vectors, owners) == pytest.approx({0: 1.0, 1: 0.0})


def test_within_document_cosine_equals_brute_force_and_between_is_its_background():
    rng = np.random.default_rng(0)
    owners = np.repeat(np.arange(30), rng.integers(1, 5, size=30))
    vectors = rng.normal(size=(len(owners), 8)).astype(np.float32) + 2 * rng.normal(size=(30, 8))[owners]
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    brute = []
    for doc in range(30):
        rows = unit[owners == doc]
        pairs = [rows[i] @ rows[j] for i in range(len(rows)) for j in range(len(rows)) if i != j]
        if pairs:
            brute.append(np.mean(pairs))
    spread = segment_spread(vectors, owners)
    assert spread["within-document cosine"] == pytest.approx(np.mean(brute), abs=1e-6)
    different = owners[:, None] != owners[None, :]
    exact_between = (unit @ unit.T)[different].mean()  # every pair of segments of different documents
    assert spread["between-document cosine"] == pytest.approx(exact_between, abs=0.01)  # 20,000 sampled pairs
    assert spread["within-document cosine"] > spread["between-document cosine"] + 0.3


def test_tsne_gives_one_point_per_row_with_the_query_first():
    rng = np.random.default_rng(0)
    points = tsne_points(rng.normal(size=8), rng.normal(size=(12, 8)))
    assert points.shape == (13, 2) and np.isfinite(points).all()


def test_a_gap_subtracts_the_models_background_cosine():
    from longdoc.analysis.segments import document_gaps

    rng = np.random.default_rng(1)
    owners = np.repeat(np.arange(20), 3)
    vectors = rng.normal(size=(60, 6)).astype(np.float32)
    shifted = vectors + 5.0  # a narrower space: every cosine rises, within and between
    background = between_document_cosine(shifted, owners)
    gaps = document_gaps(shifted, owners)
    assert gaps == pytest.approx({d: c - background for d, c in document_cosines(shifted, owners).items()})
    assert np.mean(list(document_cosines(shifted, owners).values())) > 0.9 > abs(np.mean(list(gaps.values())))
