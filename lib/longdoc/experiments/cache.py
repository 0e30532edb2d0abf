"""Artefact cache: expensive outputs (fine-tuned checkpoints, mined negatives) stored under a key
derived from everything that determines them, so notebooks share a run and a changed parameter
never reuses a stale artefact."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from longdoc.data.registry import DATA_DIR
from longdoc.io import atomic_directory, atomic_write

CACHE_DIR = Path(os.environ.get("LONGDOC_CACHE", DATA_DIR / "cache"))


def cache_key(**determinants) -> str:
    canonical = json.dumps(determinants, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def cached_directory(kind: str, build, **determinants) -> Path:
    """``CACHE_DIR/kind/<key>``; calls ``build(tmp_dir)`` to create it when missing (atomically)."""
    directory = CACHE_DIR / kind / cache_key(**determinants)
    if not (directory / "key.json").exists():
        with atomic_directory(directory) as tmp:
            build(tmp)
            with atomic_write(tmp / "key.json") as handle:
                json.dump(determinants, handle, indent=2, sort_keys=True, default=str)
    return directory


def portable(path: str | Path) -> str:
    """A cached artefact's path relative to the cache (so keys do not depend on the checkout's place)."""
    path = Path(path).resolve()
    try:
        return "cache:" + str(path.relative_to(Path(CACHE_DIR).resolve()))
    except ValueError:
        return str(path)
