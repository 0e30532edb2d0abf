"""Backbones and the retrieval models built on the shared bi-encoder interface.

The names below load on first use (PEP 562): importing a light module of this package, such as
:mod:`longdoc.models.weights` for a check before any work, does not import torch and transformers.
"""

import importlib

_HOMES = {
    "DEFAULT_BACKBONE": "longdoc.models.weights",
    "BackboneNotFoundError": "longdoc.models.weights",
    "resolve_backbone": "longdoc.models.weights",
    "load_backbone": "longdoc.models.backbone",
    "BiEncoder": "longdoc.models.biencoder",
    "EncoderConfig": "longdoc.models.biencoder",
    "FirstP": "longdoc.models.biencoder",
    "MaxP": "longdoc.models.biencoder",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'longdoc.models' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
