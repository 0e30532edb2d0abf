"""Backbones and the retrieval models built on the shared bi-encoder interface."""

from longdoc.models.backbone import DEFAULT_BACKBONE, BackboneNotFoundError, load_backbone, resolve_backbone
from longdoc.models.biencoder import BiEncoder, EncoderConfig, FirstP, MaxP

__all__ = [
    "DEFAULT_BACKBONE",
    "BackboneNotFoundError",
    "BiEncoder",
    "EncoderConfig",
    "FirstP",
    "MaxP",
    "load_backbone",
    "resolve_backbone",
]
