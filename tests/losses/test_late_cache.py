"""SeDR's Late-Cache Negative (eqs. 10-12) against hand computations on tiny tensors."""

import math

import pytest
import torch

from longdoc.losses import contrastive_loss
from longdoc.losses.late_cache import TENSORS, LateCacheNegatives
from longdoc.models.biencoder import maxp_scores

RELEVANT = {"q1": {10}, "q2": {20}, "q3": {30}, "q4": {40, 41}}


def step(qids, queries, docs, numbers, owner, segments_mask=None):
    documents = torch.tensor(docs, dtype=torch.float32)
    if documents.ndim == 2:
        documents = documents.unsqueeze(1)
    mask = torch.ones(documents.shape[:2], dtype=torch.bool) if segments_mask is None else torch.tensor(segments_mask)
    return dict(
        queries=torch.tensor(queries, dtype=torch.float32, requires_grad=True),
        documents=documents.requires_grad_(True),
        mask=mask,
        positive_index=torch.arange(len(qids)),
        query_ids=qids,
        doc_numbers=torch.tensor(numbers),
        doc_owner=torch.tensor(owner),
    )


def log_softmax_at(row, label):
    return row[label] - math.log(sum(math.exp(v) for v in row))


def test_without_a_cache_it_is_the_plain_contrastive_loss_and_keeps_nothing():
    torch.manual_seed(0)
    loss = LateCacheNegatives(0, RELEVANT.get, maxp_scores)
    batch = step(
        ["q1", "q4"], torch.randn(2, 3).tolist(), torch.randn(4, 2, 3).tolist(), [10, 40, 41, 99], [0, 1, 1, 0]
    )
    got = loss(**batch)
    scores = maxp_scores(batch["queries"], batch["documents"], batch["mask"])
    fn = torch.tensor([[False, False, False, False], [False, False, True, False]])  # 41 is relevant to q4 too
    assert torch.equal(got, contrastive_loss(scores, torch.arange(2), fn))
    assert len(loss) == 0 and loss.documents is None


def test_a_cached_instance_adds_negatives_and_its_own_row_by_hand():
    loss = LateCacheNegatives(5, RELEVANT.get, maxp_scores)
    loss(**step(["q1"], [[1.0, 0.0]], [[2.0, 0.0], [0.0, 1.0]], [10, 11], [0, 0]))  # cached: q1, d10 (+), d11 (-)
    batch = step(["q2"], [[0.0, 1.0]], [[0.5, 2.0], [1.0, 1.0]], [20, 21], [0, 0])
    got = loss.loss(
        batch["queries"],
        batch["documents"],
        batch["mask"],
        batch["positive_index"],
        batch["query_ids"],
        batch["doc_numbers"],
    )
    # columns: d20, d21 (current), d10, d11 (cached); rows: q2 (current), q1 (cached)
    q2 = [2.0, 1.0, 0.0, 1.0]
    q1 = [0.5, 1.0, 2.0, 0.0]
    want = -(log_softmax_at(q2, 0) + log_softmax_at(q1, 2)) / 2  # mean over B + C rows
    assert got.item() == pytest.approx(want, rel=1e-6)
    got.backward()
    assert batch["documents"].grad.abs().sum() > 0 and batch["queries"].grad is not None
    assert not loss.queries.requires_grad and not loss.documents.requires_grad  # the cache is detached


def test_cached_documents_relevant_to_a_query_are_not_its_negatives():
    loss = LateCacheNegatives(5, RELEVANT.get, maxp_scores)
    loss(**step(["q4"], [[1.0, 0.0]], [[0.0, 1.0], [3.0, 0.0]], [40, 41], [0, 0]))  # d41 is relevant to q4
    batch = step(["q4"], [[1.0, 0.0]], [[1.0, 1.0]], [41], [0])  # the same query again, positive d41 now
    got = loss.loss(
        batch["queries"],
        batch["documents"],
        batch["mask"],
        batch["positive_index"],
        batch["query_ids"],
        batch["doc_numbers"],
    )
    # row q4 (current): columns d41 (label), cached d40 and d41 both relevant -> masked
    # row q4 (cached): label cached d40 (score 0); current d41 and cached d41 relevant -> masked
    assert got.item() == pytest.approx(0.0, abs=1e-7)


def test_the_queue_keeps_the_newest_instances_with_their_documents():
    loss = LateCacheNegatives(2, RELEVANT.get, maxp_scores)
    for qid, number in (("q1", 10), ("q2", 20), ("q3", 30)):
        loss(**step([qid], [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [number, number + 5], [0, 0]))
    assert loss.query_ids == ["q2", "q3"] and loss.numbers.tolist() == [20, 25, 30, 35]
    assert loss.numbers[loss.positive].tolist() == [20, 30] and loss.owner.tolist() == [0, 0, 1, 1]
    restored = LateCacheNegatives(2, RELEVANT.get, maxp_scores)
    restored.load_state_dict(loss.state_dict())
    assert restored.query_ids == loss.query_ids and torch.equal(restored.documents, loss.documents)


def test_a_restored_queue_follows_the_device_of_the_next_step(monkeypatch):
    """A checkpoint restores the queue on the CPU; a resumed run on a GPU then scored CUDA queries
    against CPU documents ("mat2 is on cpu"). Each step first moves the queue to its documents' device
    (the 'meta' device stands in for a GPU here)."""
    loss = LateCacheNegatives(2, RELEVANT.get, maxp_scores)
    loss(**step(["q1"], [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [10, 15], [0, 0]))
    moves = []
    original = loss.to
    monkeypatch.setattr(loss, "to", lambda device: moves.append(device) or original(device))
    loss(**step(["q2"], [[0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [20, 25], [0, 0]))
    assert moves == [torch.device("cpu")]
    assert original("meta") is loss and loss.query_ids == ["q1", "q2"]
    assert {getattr(loss, name).device.type for name in TENSORS} == {"meta"}


def test_segments_score_by_their_maximum_and_padding_never_wins():
    loss = LateCacheNegatives(3, RELEVANT.get, maxp_scores)
    loss(
        **step(
            ["q1"],
            [[1.0, 0.0]],
            [[[1.0, 0.0], [5.0, 0.0]], [[0.0, 0.0], [9.0, 9.0]]],
            [10, 11],
            [0, 0],
            segments_mask=[[True, True], [True, False]],
        )
    )
    batch = step(["q2"], [[1.0, 0.0]], [[[2.0, 0.0], [0.0, 0.0]]], [20], [0], segments_mask=[[True, False]])
    got = loss.loss(
        batch["queries"],
        batch["documents"],
        batch["mask"],
        batch["positive_index"],
        batch["query_ids"],
        batch["doc_numbers"],
    )
    q2 = [2.0, 5.0, 0.0]  # d20 = 2; cached d10 = max(1, 5); cached d11 = 0 (its 9 is padding)
    q1 = [2.0, 5.0, 0.0]
    assert got.item() == pytest.approx(-(log_softmax_at(q2, 0) + log_softmax_at(q1, 1)) / 2, rel=1e-6)
