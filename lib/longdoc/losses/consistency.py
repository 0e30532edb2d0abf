"""NCI's training loss (section 3.4): sequence-to-sequence cross-entropy under teacher forcing plus
the consistency-based regularisation of eq. 5, weighted by α (eq. 6).

Eq. 5, for decoding step i: the batch's queries go through the model twice with independent dropout,
giving ``z_{i,1}`` and ``z_{i,2}`` per query; among the 2Q representations of the step, each one's
twin is its positive and the other 2Q − 2 are negatives (NT-Xent, dot-product similarity, temperature
τ; the paper's τ = 1). Eq. 5 as printed sums its denominator over k = 1..2Q, k ≠ 2: over the anchor
itself and not over its twin. We read that as a typo and use the form of the contrastive loss it cites
([8], NT-Xent: the twin in, the anchor out). ``z`` is the decoder's representation that enters the
classifier, as in the released code. Differences from the released code, which fed a softmax into a cross-entropy (two
softmaxes), had no temperature, counted padding steps and made the second view a corrupted copy of
the query: here it is the paper's loss, over the identifier's real steps only, and the two views
differ by dropout alone. Both terms are means over the identifier tokens of the batch (eq. 6's sums,
divided by the token count, so α keeps its meaning).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE = -100  # label of a padded step


def consistency_loss(
    first: torch.Tensor, second: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Eq. 5 averaged over the real steps: ``first``, ``second`` [Q, T, d] (the two passes), ``labels``
    [Q, T] (``IGNORE`` at padded steps)."""
    if first.shape != second.shape or first.shape[:2] != labels.shape:
        raise ValueError(
            f"first and second must be [Q, T, d] and labels [Q, T]; got {tuple(first.shape)}, "
            f"{tuple(second.shape)} and {tuple(labels.shape)}"
        )
    total, count = first.new_zeros(()), 0
    for step in range(labels.shape[1]):
        rows = labels[:, step] != IGNORE
        n = int(rows.sum())
        if n < 2:  # one query alone has no negative at this step
            continue
        z = torch.cat([first[rows, step], second[rows, step]])
        similarity = (z @ z.T) / temperature
        similarity = similarity.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
        twins = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
        total = total + F.cross_entropy(similarity, twins, reduction="sum") / 2
        count += n
    return total / max(count, 1)


def nci_loss(
    logits: torch.Tensor, states: torch.Tensor, labels: torch.Tensor, alpha: float = 0.15, temperature: float = 1.0
) -> dict[str, torch.Tensor]:
    """Eq. 6. With ``alpha > 0`` the batch holds the two passes stacked (``logits`` [2Q, T, V],
    ``states`` [2Q, T, d]) and the cross-entropy is over both; with ``alpha = 0`` one pass ([Q, ...])."""
    views = 2 if alpha > 0 else 1
    if logits.shape[0] != views * labels.shape[0]:
        raise ValueError(
            f"alpha={alpha} needs {views} pass(es) of {labels.shape[0]} queries, got {logits.shape[0]} rows"
        )
    targets = labels.repeat(views, 1)
    cross_entropy = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
    losses = {"cross_entropy": cross_entropy}
    if alpha > 0:
        first, second = states.chunk(2)
        losses["consistency"] = consistency_loss(first, second, labels, temperature)
        losses["loss"] = cross_entropy + alpha * losses["consistency"]
    else:
        losses["loss"] = cross_entropy
    return losses
