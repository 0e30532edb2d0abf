"""Losses as pure tensor functions (no model inside), each tested on its own."""

from longdoc.losses.consistency import consistency_loss, nci_loss
from longdoc.losses.contrastive import contrastive_loss
from longdoc.losses.late_cache import LateCacheNegatives
from longdoc.losses.pair_bce import pair_bce_loss
from longdoc.losses.sentence_block import sentence_block_loss

__all__ = [
    "LateCacheNegatives",
    "consistency_loss",
    "contrastive_loss",
    "nci_loss",
    "pair_bce_loss",
    "sentence_block_loss",
]
