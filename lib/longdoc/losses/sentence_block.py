"""SMITH's masked sentence-block prediction loss (section 4.2.2, eq. 4–6).

For B masked blocks of a batch (b documents × m blocks each), with predicted representations
Ŝ ``[B, H]`` (the document-level outputs at the masked positions) and the original block
representations h ``[B, H]``:

    Sim(Ŝ, h) = Ŝ hᵀ                                   (eq. 4, [B, B])
    p(h_i | Ŝ_j) = softmax_i Sim(Ŝ_j, h_i)              (eq. 5)
    L_sp = -1/B Σ_i log p(h_i | Ŝ_i)                   (eq. 6)

Every other masked block of the batch, in the same document or another, is a negative class. No
parameter depends on B (the released code added a learned bias of size batch × k). Under several
processes the batch is the global one (:func:`longdoc.models.smith.global_sentence_block_loss`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sentence_block_loss(predicted: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
    """``predicted`` Ŝ and ``original`` h, both ``[B, H]``, row j of each for the same masked block."""
    if predicted.ndim != 2 or predicted.shape != original.shape:
        raise ValueError(
            f"predicted and original must both be [B, H]; got {tuple(predicted.shape)} and {tuple(original.shape)}"
        )
    similarity = predicted @ original.T  # row j: Ŝ_j against every h_i
    return F.cross_entropy(similarity, torch.arange(len(predicted), device=predicted.device))
