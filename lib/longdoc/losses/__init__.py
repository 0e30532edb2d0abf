"""Losses as pure tensor functions (no model inside), each tested on its own."""

from longdoc.losses.contrastive import contrastive_loss

__all__ = ["contrastive_loss"]
