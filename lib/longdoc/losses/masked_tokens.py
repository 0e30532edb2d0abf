"""The masked-token losses of pre-training (BERT's MLM, Longtriever's MLM and LMAE, eq. 8 and 11, SMITH's
L_wp, eq. 3): the cross-entropy of a prediction head over the positions that carry a label.

It is returned as a sum and a count, so that the mean can be taken over every process's positions
(:func:`longdoc.distributed.token_mean`), as one process holding the global batch would take it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

IGNORE = -100  # the label of positions that are not predicted (torch's ignore_index; text.masking.IGNORE)


def masked_token_sum(head: nn.Module, states: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The summed cross-entropy of ``head(states)`` at the positions whose label is not IGNORE (the head
    runs on those only; 0 connected to ``states`` where there is none) and their number."""
    chosen = labels != IGNORE
    if bool(chosen.any()):
        total = F.cross_entropy(head(states[chosen]).float(), labels[chosen], reduction="sum")
    else:
        total = states.sum().float() * 0.0
    return total, chosen.sum()
