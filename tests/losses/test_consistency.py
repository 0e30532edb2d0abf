import math

import pytest
import torch

from longdoc.losses.consistency import IGNORE, consistency_loss, nci_loss


def hand_eq5(z1, z2, tau):
    """Eq. 5 written out for one step: each of the 2Q rows against its twin, the other 2Q - 1 below."""
    rows = [*z1, *z2]
    q = len(z1)
    total = 0.0
    for j, z in enumerate(rows):
        twin = (j + q) % (2 * q)
        numerator = math.exp(float(z @ rows[twin]) / tau)
        denominator = sum(math.exp(float(z @ other) / tau) for k, other in enumerate(rows) if k != j)
        total += -math.log(numerator / denominator)
    return total / (2 * q)


def test_consistency_loss_equals_eq5_by_hand_and_skips_padded_steps():
    torch.manual_seed(0)
    z1, z2 = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    labels = torch.tensor([[5, 1], [6, IGNORE], [7, 1]])  # step 1: query 1 has ended
    tau = 0.7
    step0 = hand_eq5(z1[:, 0], z2[:, 0], tau)
    step1 = hand_eq5(z1[[0, 2], 1], z2[[0, 2], 1], tau)
    expected = (3 * step0 + 2 * step1) / 5  # a mean over the real (query, step) terms
    assert consistency_loss(z1, z2, labels, tau).item() == pytest.approx(expected, rel=1e-5)


def test_identical_views_far_apart_cost_nothing():
    z = torch.eye(3).unsqueeze(1) * 20
    assert consistency_loss(z, z.clone(), torch.ones(3, 1, dtype=torch.long)).item() < 1e-6


def test_nci_loss_is_cross_entropy_of_both_passes_plus_alpha_times_consistency():
    torch.manual_seed(1)
    logits, states = torch.randn(4, 3, 7), torch.randn(4, 3, 5)
    labels = torch.tensor([[2, 4, 1], [3, 1, IGNORE]])
    losses = nci_loss(logits, states, labels, alpha=0.15)
    targets = labels.repeat(2, 1)
    real = targets != IGNORE
    cross_entropy = -torch.log_softmax(logits, -1)[real, targets[real]].mean()
    assert losses["cross_entropy"].item() == pytest.approx(cross_entropy.item(), rel=1e-6)
    expected = cross_entropy + 0.15 * consistency_loss(states[:2], states[2:], labels)
    assert losses["loss"].item() == pytest.approx(expected.item(), rel=1e-6)
    plain = nci_loss(logits[:2], states[:2], labels, alpha=0.0)
    assert set(plain) == {"cross_entropy", "loss"}
    with pytest.raises(ValueError, match="pass"):
        nci_loss(logits[:2], states[:2], labels, alpha=0.15)
