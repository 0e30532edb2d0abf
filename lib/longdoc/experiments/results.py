"""Result records: ``results/<profile>/<notebook>/metrics.json`` with config, seed, data checksum and
versions, written atomically; a rerun never silently overwrites a different configuration's results."""

from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from longdoc.data.registry import REPO_ROOT
from longdoc.io import atomic_write

RESULTS_DIR = REPO_ROOT / "results"
_PACKAGES = ("torch", "transformers", "faiss-cpu", "faiss-gpu", "bm25s", "numpy", "accelerate", "longdoc")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in _PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    found.update(_git_state())
    return found


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _git_state() -> dict:
    """The commit, and whether tracked files differed from it (the record then does not match the commit)."""
    try:
        return {"git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": "unknown"}


class ConfigMismatchError(RuntimeError):
    pass


def write_metrics(profile: str, notebook: str, config: dict, metrics: dict, data_checksum: str, seed: int,
                  overwrite: bool = False, root: Path | None = None) -> Path:
    """Write the record; refuse (unless ``overwrite``) when one exists with a different config."""
    directory = (root or RESULTS_DIR) / profile / notebook
    path = directory / "metrics.json"
    if path.exists() and not overwrite:
        previous = json.loads(path.read_text())
        if previous.get("config") != json.loads(json.dumps(config, default=str)):
            raise ConfigMismatchError(
                f"{path} holds results of another configuration; pass overwrite=True or use another profile name"
            )
    record = {"notebook": notebook, "profile": profile, "config": config, "seed": seed,
              "data_checksum": data_checksum, "versions": versions(), "metrics": metrics}
    with atomic_write(path) as handle:
        json.dump(record, handle, indent=2, sort_keys=True, default=str)
        handle.write("\n")
    return directory
