"""One entry point for every dataset: a name of an embedded benchmark or a BEIR-layout directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

from longdoc.data.beir import RetrievalDataset, load_beir

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA_DIR = Path(os.environ.get("LONGDOC_DATA", REPO_ROOT / "data"))


def dataset_directory(name: str) -> Path:
    """Where a dataset's files are: ``data/<name>`` for embedded benchmarks, else the path itself."""
    return DATA_DIR / name if name == "manpages" else Path(name)


def benchmark_built(name: str = "manpages") -> bool:
    """Whether the embedded benchmark is built and current (nothing needs the man pages' packages)."""
    from longdoc.data.manpages import BUILDER_VERSION

    manifest = dataset_directory(name) / "manifest.json"
    return manifest.exists() and json.loads(manifest.read_text()).get("builder_version", 1) == BUILDER_VERSION


def ensure_built(name: str) -> Path:
    """The directory of ``name``: ``manpages`` is built on first use, and again when its build is older
    than the builder (``BUILDER_VERSION``); any other name is a directory that must exist."""
    if name != "manpages":
        path = Path(name)
        if not path.is_dir():
            raise FileNotFoundError(f"dataset={name!r}: neither an embedded benchmark ('manpages') nor a dataset directory")
        return path
    from longdoc.data.manpages import build_manpages

    directory = dataset_directory(name)
    if not benchmark_built(name):
        build_manpages(directory)
    return directory


def load_dataset(name: str = "manpages", max_docs: int = 0, seed: int = 0) -> RetrievalDataset:
    """``manpages`` is built on first use (into ``data/manpages``); anything else is a path to a BEIR
    directory (see the importers in ``longdoc.data`` for the papers' own formats). ``max_docs`` > 0
    subsamples for smoke runs."""
    if name == "manpages":
        directory = ensure_built(name)
        dataset = load_beir(directory, name="manpages", trust_manifest_checksum=True)
    else:
        path = Path(name)
        if not path.is_dir():
            raise FileNotFoundError(
                f"dataset={name!r}: neither an embedded benchmark ('manpages') nor a BEIR directory"
            )
        dataset = load_beir(path)
    dataset.manifest["dataset_parameter"] = name if name == "manpages" else str(Path(name).resolve())
    return dataset.subsample(max_docs, seed) if max_docs else dataset
