"""Contrastive ranking loss with in-batch and hard negatives (DPR; Longtriever eq. 8; SeDR eq. 6).

For query i with positive document p(i) among the batch's documents (its own positive, the other
queries' positives = in-batch negatives, and every mined hard negative):

    L = -1/B * sum_i log( exp(s(q_i, d_p(i)) / tau) / sum_j exp(s(q_i, d_j) / tau) )

Documents in the batch that are *also* relevant to query i (other than p(i)) are masked out of its
denominator: several manpages share one description, so an in-batch "negative" can be a positive.
The papers use the raw dot product, tau = 1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def contrastive_loss(
    scores: torch.Tensor,
    positive_index: torch.Tensor,
    false_negative_mask: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """``scores [B, D]``; ``positive_index [B]`` into D; ``false_negative_mask [B, D]`` True = drop."""
    if scores.ndim != 2 or positive_index.shape != (scores.shape[0],):
        raise ValueError(
            f"scores must be [B, D] and positive_index [B]; got {tuple(scores.shape)} and {tuple(positive_index.shape)}"
        )
    logits = scores / temperature
    if false_negative_mask is not None:
        keep_positive = F.one_hot(positive_index, scores.shape[1]).bool()
        logits = logits.masked_fill(false_negative_mask & ~keep_positive, float("-inf"))
    return F.cross_entropy(logits, positive_index)
