import pytest
import torch

from longdoc.losses import contrastive_loss


def test_equals_cross_entropy_over_in_batch_and_hard_negatives():
    torch.manual_seed(0)
    scores = torch.randn(3, 6)
    labels = torch.tensor([0, 1, 2])
    want = -torch.log_softmax(scores / 0.5, dim=1)[torch.arange(3), labels].mean()
    assert contrastive_loss(scores, labels, temperature=0.5).item() == pytest.approx(want.item(), rel=1e-6)


def test_false_negatives_are_removed_but_never_the_positive():
    scores = torch.tensor([[2.0, 5.0, 0.0]])
    labels = torch.tensor([0])
    mask = torch.tensor([[True, True, False]])  # doc 1 is also relevant; doc 0 is the label
    got = contrastive_loss(scores, labels, mask)
    want = -torch.log_softmax(torch.tensor([2.0, 0.0]), 0)[0]
    assert got.item() == pytest.approx(want.item(), rel=1e-6)


def test_shape_errors():
    with pytest.raises(ValueError, match="positive_index"):
        contrastive_loss(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long))
