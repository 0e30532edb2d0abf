"""The document-matching loss (SMITH section 4.3; MatchBERT 3.2.1): binary cross-entropy between the
estimated matching probability of a pair and its 0/1 label.

The probability is σ(scale · cos(E(d_s), E(d_c))). The paper does not give the scale; the released
code multiplies the cosine by a fixed 6.0 with no bias (so the untrained decision point is cos = 0),
and so do we. Accuracy, precision and recall are then read at a threshold chosen on dev.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOGIT_SCALE = 6.0


def pair_bce_loss(cosines: torch.Tensor, labels: torch.Tensor, scale: float = LOGIT_SCALE) -> torch.Tensor:
    """Mean BCE of ``[P]`` pair cosines against ``[P]`` 0/1 labels."""
    if cosines.shape != labels.shape or cosines.ndim != 1:
        raise ValueError(f"cosines and labels must both be [P]; got {tuple(cosines.shape)} and {tuple(labels.shape)}")
    return F.binary_cross_entropy_with_logits(scale * cosines, labels.to(cosines.dtype))


def match_probability(cosines: torch.Tensor, scale: float = LOGIT_SCALE) -> torch.Tensor:
    return torch.sigmoid(scale * cosines)
