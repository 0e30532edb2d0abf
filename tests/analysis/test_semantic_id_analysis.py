import numpy as np
import pytest

from longdoc.analysis.semantic_ids import (
    prefix,
    prefix_overlap,
    query_groups,
    relevant_prefix_agreement,
    retrieved_prefixes,
)


def test_relevant_pairs_sharing_the_first_digit():
    identifiers = {"a": (0, 1), "b": (0, 2), "c": (1, 0), "d": (2, 0)}
    qrels = {"q1": {"a": 1, "b": 1, "c": 1}, "q2": {"c": 1}, "q3": {"d": 1, "a": 0}}
    found = relevant_prefix_agreement(qrels, identifiers, samples=4000)
    assert found["relevant pairs"] == 3 and found["relevant pairs sharing the first digit"] == pytest.approx(1 / 3)
    assert found["random pairs sharing the first digit"] == pytest.approx(2 / 12, abs=0.03)  # one same-digit pair of 6


def test_similar_queries_overlap_more_when_their_runs_do():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 8)) * 4
    vectors = np.concatenate([c + rng.normal(size=(5, 8)) * 0.1 for c in centres])
    qids = [f"q{i}" for i in range(20)]
    identifiers = {f"d{t}{j}": (t, j) for t in range(4) for j in range(3)}
    runs = {q: [f"d{i // 5}{j}" for j in range(3)] for i, q in enumerate(qids)}  # each topic retrieves its cluster
    found = prefix_overlap(runs, identifiers, vectors, qids, share=0.1, samples=200)
    assert found["similar pairs: mean overlap"] == 1.0 and found["dissimilar pairs: mean overlap"] == 0.0
    assert found["95% CI low"] > 0
    groups = query_groups(vectors, qids)
    a, b = ({int(q[1:]) // 5 for q in groups[g]} for g in "AB")
    assert len(a) == 1 and len(b) == 1 and a != b


def test_retrieved_prefixes_recover_the_sequence_probability():
    frame = retrieved_prefixes([("x", -0.5), ("y", -1.0), ("gone", -0.1)], {"x": (1, 2, 3), "y": (12, 0)}, 2, 0.8)
    assert list(frame["prefix"]) == ["12", "(12)0"]
    assert frame["probability"][0] == pytest.approx(np.exp(-0.5 * 4**0.8))
    assert prefix((3, 4, 5), 2) == "34"
