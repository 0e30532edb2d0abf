"""The encoder registry: every document encoder by the name the tables, the cache keys and the training
processes use (one registry for the retrieval and the matching families).

A new model is one module with its :class:`~longdoc.models.biencoder.BiEncoder` subclass (here in
``models/``, under the cache's code fingerprint); it joins with ``register_encoder("Name", ModelClass)``
(in its module or its paper module), so that no file here changes. ``MatchBERT`` is FirstP under the name the SMITH paper gives it.
"""

from __future__ import annotations

from pathlib import Path

from longdoc.models.biencoder import BiEncoder, EncoderConfig, FirstP, MaxP
from longdoc.models.han import HAN
from longdoc.models.hi_transformer import HiTransformer
from longdoc.models.longtriever import Longtriever
from longdoc.models.parade import Parade
from longdoc.models.sedr import SeDR
from longdoc.models.smith import Smith
from longdoc.seeding import seeded

ENCODERS: dict[str, type[BiEncoder]] = {
    "FirstP": FirstP,
    "MaxP": MaxP,
    "PARADE": Parade,
    "Hi-Transformer": HiTransformer,
    "Longtriever": Longtriever,
    "SeDR": SeDR,
    "MatchBERT": FirstP,
    "SMITH": Smith,
    "HAN": HAN,
}


def register_encoder(name: str, model_class: type[BiEncoder]) -> type[BiEncoder]:
    """Add ``model_class`` under ``name`` (a second class under a taken name is refused)."""
    if not (isinstance(model_class, type) and issubclass(model_class, BiEncoder)):
        raise TypeError(f"register_encoder({name!r}, ...): {model_class!r} is not a BiEncoder subclass")
    if ENCODERS.get(name, model_class) is not model_class:
        raise ValueError(f"encoder name {name!r} is taken by {ENCODERS[name].__name__}")
    ENCODERS[name] = model_class
    return model_class


def encoder_class(name: str) -> type[BiEncoder]:
    if name not in ENCODERS:
        raise KeyError(f"unknown model {name!r}; known: {sorted(ENCODERS)}")
    return ENCODERS[name]


def build_encoder(name: str, config: EncoderConfig, seed: int, init: str | Path | None = None) -> BiEncoder:
    """A model of the registry from the backbone (new parameters drawn under ``seed``) or a saved checkpoint."""
    model_class = encoder_class(name)
    with seeded(seed):
        return model_class.load(init) if init else model_class(config)


def load_encoder(name: str, directory: str | Path) -> BiEncoder:
    """A saved model of the registry."""
    return encoder_class(name).load(directory)
