"""One entry point for every dataset: a name of an embedded benchmark or a BEIR-layout directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

from longdoc.data.beir import RetrievalDataset, load_beir

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA_DIR = Path(os.environ.get("LONGDOC_DATA") or REPO_ROOT / "data")  # empty is unset


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
            raise FileNotFoundError(
                f"dataset={name!r}: neither an embedded benchmark ('manpages') nor a dataset directory"
            )
        return path
    from longdoc.data.manpages import build_manpages

    directory = dataset_directory(name)
    if not benchmark_built(name):
        build_manpages(directory)
    return directory


def load_dataset(
    name: str = "manpages",
    max_docs: int = 0,
    seed: int = 0,
    store_dir: str | Path | None = None,
    mapped: bool | None = None,
) -> RetrievalDataset:
    """``manpages`` is built on first use (into ``data/manpages``); anything else is a path to a BEIR
    directory (see the importers in ``longdoc.data`` for the papers' own formats). ``max_docs`` > 0
    subsamples for smoke runs. ``mapped``: read the corpus through a memory-mapped store under
    ``store_dir`` (:mod:`longdoc.data.corpus_store`); None maps a ``corpus.jsonl`` of
    ``MAPPED_FROM_BYTES`` (1 GiB) or more when ``store_dir`` is given."""
    from longdoc.data.corpus_store import MAPPED_FROM_BYTES

    directory = ensure_built(name) if name == "manpages" else Path(name)
    if name != "manpages" and not directory.is_dir():
        raise FileNotFoundError(f"dataset={name!r}: neither an embedded benchmark ('manpages') nor a BEIR directory")
    if mapped and store_dir is None:
        raise ValueError("load_dataset(mapped=True) needs store_dir (the folder its corpus stores live in)")
    corpus_file = directory / "corpus.jsonl"
    if mapped is None:
        mapped = store_dir is not None and corpus_file.is_file() and corpus_file.stat().st_size >= MAPPED_FROM_BYTES
    dataset = load_beir(
        directory,
        name="manpages" if name == "manpages" else None,
        trust_manifest_checksum=name == "manpages",
        store_dir=store_dir if mapped else None,
    )
    dataset.manifest["dataset_parameter"] = name if name == "manpages" else str(Path(name).resolve())
    return dataset.subsample(max_docs, seed) if max_docs else dataset
