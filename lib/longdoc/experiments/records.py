"""Result records: ``results/<profile>/<dataset>/<notebook>/metrics.json`` with config, seeds, data
checksum, code fingerprint and versions, written atomically; a rerun never silently overwrites the
results of a different configuration or dataset."""

from __future__ import annotations

import json
import math
import platform
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from longdoc.data.registry import REPO_ROOT
from longdoc.io import atomic_directory, sweep_stale

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


STUDY_OUTPUTS = ("results", "figures", "RESULTS.md")  # what a study run itself rewrites: not a code change


def _git_state() -> dict:
    """The commit, and whether tracked files differed from it: ``git_dirty`` counts every tracked file,
    ``git_dirty_code`` all but the study's own outputs (the record then does not match the commit's code)."""
    try:
        outputs = [f":(exclude){path}" for path in STUDY_OUTPUTS]
        return {
            "git_commit": _git("rev-parse", "HEAD"),
            "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "git_dirty_code": bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", *outputs)),
        }
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": "unknown"}


def machine() -> dict[str, str | int]:
    """The CPU (and GPU) the record was made on: timings mean nothing without it."""
    import os

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    found = {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        found["gpu"] = torch.cuda.get_device_name()
    return found


class ConfigMismatchError(RuntimeError):
    pass


THROWAWAY_PROFILES = ("smoke",)  # records that only show a notebook runs (CI, nbval): a rerun replaces them


def check_record_slot(directory: Path, profile: str, config: dict, data_checksum: str) -> None:
    """Refuse, before any work, to put a record where one of another configuration or dataset lies
    (naming what differs), except under a throwaway profile."""
    path = Path(directory) / "metrics.json"
    if profile in THROWAWAY_PROFILES or not path.exists():
        return
    previous = json.loads(path.read_text())
    config = json.loads(json.dumps(finite(config), default=str))
    old = previous.get("config", {})
    same_data = previous.get("data_checksum") == data_checksum  # then the dataset's path may differ
    differing = sorted(
        k for k in set(old) | set(config) if old.get(k) != config.get(k) and not (same_data and k == "dataset")
    )
    if not same_data:
        differing.append("data checksum")
    if differing:
        raise ConfigMismatchError(
            f"{path} holds results of another configuration or dataset (differs in {differing}); move or delete "
            "that folder, or run under another profile (a copy of the profile file with another name)"
        )


def finite(value):
    """JSON without NaN/Infinity (invalid JSON for most readers): non-finite floats become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_metrics(
    directory: Path,
    notebook: str,
    profile: str,
    config: dict,
    metrics: dict,
    data_checksum: str,
    seeds: list[int],
    extra: dict | None = None,
    overwrite: bool = False,
    write_files: Callable[[Path], None] | None = None,
) -> Path:
    """Write ``directory/metrics.json`` (strict JSON: non-finite numbers become null) and whatever
    ``write_files(folder)`` adds (the TREC runs); refuse (unless ``overwrite``) when a record exists
    with a different config or data checksum. The folder is built under a temporary name and
    replaces the old one at once: a killed run leaves the previous record whole, never half of one."""
    directory = Path(directory)
    config = json.loads(json.dumps(finite(config), default=str))
    if not overwrite:
        check_record_slot(directory, profile, config, data_checksum)
    record = {
        "notebook": notebook,
        "profile": profile,
        "config": config,
        "seeds": seeds,
        "data_checksum": data_checksum,
        "versions": versions(),
        "machine": machine(),
        **(extra or {}),
        "metrics": metrics,
    }
    text = json.dumps(finite(json.loads(json.dumps(record, default=str))), indent=2, sort_keys=True, allow_nan=False)
    sweep_stale(directory.parent)
    with atomic_directory(directory) as tmp:
        (tmp / "metrics.json").write_text(text + "\n", encoding="utf-8")
        if write_files is not None:
            write_files(tmp)
    return directory


def read_metrics(path: Path) -> dict:
    return json.loads(Path(path).read_text())
