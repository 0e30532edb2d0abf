"""Losses as pure tensor functions (no model inside), each tested on its own."""

from longdoc.losses.contrastive import contrastive_loss
from longdoc.losses.late_cache import LateCacheNegatives

__all__ = ["LateCacheNegatives", "contrastive_loss"]
