import numpy as np
import pytest
import torch
import torch.nn.functional as F

from longdoc.losses.pair_bce import match_probability, pair_bce_loss
from longdoc.models.biencoder import EncoderConfig, MaxP
from longdoc.models.matching import SiameseMatcher, pair_cosines, stored_pair_cosines


def test_pair_cosines_against_brute_force():
    torch.manual_seed(0)
    a, b = F.normalize(torch.randn(3, 4, 5), dim=-1), F.normalize(torch.randn(3, 2, 5), dim=-1)
    a_mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    b_mask = torch.tensor([[1, 0], [1, 1], [1, 1]], dtype=torch.bool)
    got = pair_cosines(a, a_mask, b, b_mask)
    for p in range(3):
        best = max(float(a[p, s] @ b[p, t]) for s in range(4) for t in range(2) if a_mask[p, s] and b_mask[p, t])
        assert got[p].item() == pytest.approx(best, abs=1e-6)


def test_the_pair_loss_is_bce_of_the_scaled_cosine():
    cosines, labels = torch.tensor([0.9, -0.2, 0.1]), torch.tensor([1, 0, 0])
    p = match_probability(cosines)
    expected = -(torch.log(p[0]) + torch.log(1 - p[1]) + torch.log(1 - p[2])) / 3
    assert pair_bce_loss(cosines, labels).item() == pytest.approx(expected.item(), rel=1e-6)
    with pytest.raises(ValueError):
        pair_bce_loss(cosines, labels[:2])


def test_stored_vectors_give_the_training_forward_scores(tiny_backbone):
    torch.manual_seed(0)
    matcher = SiameseMatcher(MaxP(EncoderConfig(backbone=tiny_backbone, segment_length=8, max_segments=3))).eval()
    docs = [[[2001, 2002], [2003]], [[2004, 2005, 2006]], [[2007], [2008], [2009, 2010]]]
    batch = matcher.encoder.doc_inputs(docs)
    sources, targets = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])
    with torch.no_grad():
        forward = matcher(batch, sources, targets)
        vectors, owner, _ = matcher.encoder.document_vectors(batch)
    stored = stored_pair_cosines(vectors.numpy(), owner.numpy(), [0, 1, 2], [1, 2, 0])
    assert np.allclose(forward.numpy(), stored, atol=1e-5)
