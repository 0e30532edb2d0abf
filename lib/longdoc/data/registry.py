"""One entry point for every dataset: a name of an embedded benchmark or a BEIR-layout directory."""

from __future__ import annotations

import os
from pathlib import Path

from longdoc.data.beir import RetrievalDataset, load_beir

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA_DIR = Path(os.environ.get("LONGDOC_DATA", REPO_ROOT / "data"))


def dataset_directory(name: str) -> Path:
    """Where a dataset's files are: ``data/<name>`` for embedded benchmarks, else the path itself."""
    return DATA_DIR / name if name == "manpages" else Path(name)


def load_dataset(name: str = "manpages", max_docs: int = 0, seed: int = 0) -> RetrievalDataset:
    """``manpages`` is built on first use (into ``data/manpages``); anything else is a path to a BEIR
    directory (see the importers in ``longdoc.data`` for the papers' own formats). ``max_docs`` > 0
    subsamples for smoke runs."""
    if name == "manpages":
        directory = dataset_directory(name)
        if not (directory / "manifest.json").exists():
            from longdoc.data.manpages import build_manpages

            build_manpages(directory)
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
