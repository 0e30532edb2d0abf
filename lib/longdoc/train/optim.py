"""AdamW with linear warm-up and decay, weight decay off for biases and LayerNorm (BERT's recipe);
shared by fine-tuning and pre-training."""

from __future__ import annotations

import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup

NO_DECAY = ("bias", "LayerNorm", "layer_norm")


def adamw_with_warmup(
    model: nn.Module,
    learning_rate: float,
    weight_decay: float,
    warmup_ratio: float,
    total_steps: int,
    trainable_only: bool = False,
):
    """``(optimizer, scheduler)`` for ``total_steps`` steps (over the parameters that require a
    gradient only, with ``trainable_only``)."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad or not trainable_only]
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for n, p in named if not any(k in n for k in NO_DECAY)], "weight_decay": weight_decay},
            {"params": [p for n, p in named if any(k in n for k in NO_DECAY)], "weight_decay": 0.0},
        ],
        lr=learning_rate,
    )
    return optimizer, get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * total_steps), total_steps)
