"""Result records: ``results/<profile>/<dataset>/<notebook>/metrics.json`` with config, seeds, data
checksum, code fingerprint and versions, written atomically. A rerun of a profile as its file says
replaces that profile's records, saying what it replaced; a run with other values never writes where
they go, and never replaces a record of another configuration or dataset (:func:`check_record_slot`)."""

from __future__ import annotations

import json
import math
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from longdoc.data.errors import shown
from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.profiles import profile_values
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
    if (REPO_ROOT / ".longdoc-pack.json").is_file():  # unpacked by a pack's node.sh (maybe inside a checkout)
        return _pack_state()
    try:
        outputs = [f":(exclude){path}" for path in STUDY_OUTPUTS]
        return {
            "git_commit": _git("rev-parse", "HEAD"),
            "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "git_dirty_code": bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", *outputs)),
        }
    except (OSError, subprocess.CalledProcessError):
        return _pack_state()


def _pack_state() -> dict:
    """In a folder that a pack's node.sh unpacked (:mod:`longdoc.pack`), the commit the pack was made from
    (``git_dirty`` where its tracked files differed from it); elsewhere outside a checkout, unknown."""
    manifest = REPO_ROOT / ".longdoc-pack.json"
    if not manifest.is_file():
        return {"git_commit": "unknown"}
    commit = json.loads(manifest.read_text()).get("commit", "unknown")
    return {
        "git_commit": commit.removesuffix("+uncommitted"),
        "git_dirty": commit.endswith("+uncommitted"),
        "from_pack": True,
    }


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


class ProfileFolderError(ConfigMismatchError):
    """A run with other values than its profile's file would file its record where the profile's go."""

    def __init__(self, folder: Path, profile: str, config: dict, written: dict):
        names = differing(written, config)
        values = "; ".join(f"{k}={shown(config.get(k))}, its file {shown(written.get(k))}" for k in names[:4])
        self.problem = (
            f"{_shown(folder)} is the folder of the {profile} profile's own records, and this run's values differ "
            f"from those its file gives {folder.name} in {names} ({values}{'; ...' if len(names) > 4 else ''})"
        )
        self.advice = (
            f"a run with other values never writes there: run it under a profile of its own (copy "
            f"notebooks/profiles/{profile}.yaml to notebooks/profiles/NAME.yaml, set profile: NAME and your values "
            "in it, and run ./run_all.sh --profile NAME)"
        )
        super().__init__(f"{self.problem}; {self.advice}")


THROWAWAY_PROFILES = ("smoke",)  # records that only show a notebook runs (CI, nbval): a rerun replaces them
EXECUTION_ONLY = ("n_devices",)  # how a run executes, not what it computes (N processes equal one: the tests)


def differing(old: dict, new: dict, same_data: bool = False) -> list[str]:
    """The parameter names whose values differ between two configurations (``dataset``, a path, not
    when ``same_data``: the same checksum read from another place)."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and not (same_data and k == "dataset"))


def as_json(config: dict) -> dict:
    """A configuration as a record holds it (tuples as lists, non-finite numbers as null)."""
    return json.loads(json.dumps(finite(config), default=str))


def dataset_slug(name: str) -> str:
    """A folder name for a dataset's results: ``manpages``, ``manpages-200`` (subsampled), ``<dir name>``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "dataset"


def data_folder(config: dict) -> str:
    """The folder of a run's records within its profile, from the data parameters alone: the dataset's name
    (``manpages``, or its directory's name) with ``-<max_docs>`` when it is subsampled, and ``+<role>-<name>``
    for each dataset by role (the budget ladder's ``datasets``); ``random-weights`` for a study without data."""
    if config.get("dataset") is None:
        return "random-weights"
    folder = dataset_slug(_data_name(config["dataset"]) + (f"-{config['max_docs']}" if config.get("max_docs") else ""))
    roles = sorted((config.get("datasets") or {}).items())
    return "+".join([folder, *(dataset_slug(f"{role}-{_data_name(directory)}") for role, directory in roles)])


def _data_name(dataset: str) -> str:
    return "manpages" if dataset == "manpages" else Path(dataset).name


def record_folder(profile: str, notebook: str, config: dict, root: Path | None = None) -> Path:
    """``results/<profile>/<data folder>/<notebook>``: where a run of ``config`` files its record."""
    return (RESULTS_DIR if root is None else root) / profile / data_folder(config) / notebook


def check_record_slot(
    directory: Path, profile: str, config: dict, data_checksum: str | None, profile_config: dict | None = None
) -> str | None:
    """May a run of ``config`` file its record in ``directory`` (:func:`record_folder`)? Decided before any
    work; the record is replaced only when the run finishes. ``profile_config``: the values the profile's
    file gives this notebook (:func:`~longdoc.experiments.profiles.profile_values`; None: no such file).

    - a throwaway profile (``smoke``) replaces whatever is there;
    - **a run of the profile as its file says** (``config == profile_config``, ``EXECUTION_ONLY`` aside)
      replaces the profile's own record, whatever commit, code or profile version wrote it; the returned
      line says what it replaces (then ``git diff RESULTS.md results/`` shows what the reproduction changed);
    - **a run with other values** (``--set``, ``--backbone``, an edited parameters cell) never writes into
      the folder the profile's own values lead to, record or not (refused naming what differs); elsewhere
      (another dataset) it refuses a record of another configuration or dataset, and replaces its own.

    ``data_checksum`` None: not known yet (the values alone are compared, the dataset's path left to the
    check that knows the data).
    """
    directory = Path(directory)
    path = directory / "metrics.json"
    if profile in THROWAWAY_PROFILES:
        return None
    config = as_json(config)
    written = as_json(profile_config) if profile_config is not None else None
    if written is not None and _without(config, EXECUTION_ONLY) == _without(written, EXECUTION_ONLY):
        return replaced_line(path, config, data_checksum) if path.exists() else None
    if written is not None and directory.parent.name == data_folder(written):
        raise ProfileFolderError(directory, profile, config, written)
    if not path.exists():
        return None
    previous = json.loads(path.read_text())
    same_data = previous.get("data_checksum") == data_checksum
    names = differing(previous.get("config", {}), config, same_data=same_data or data_checksum is None)
    if data_checksum is not None and not same_data:
        names.append("data checksum")
    if names:
        raise ConfigMismatchError(
            f"{_shown(path)} holds results of another configuration or dataset (differs in {names}); move or "
            "delete that folder, or run under another profile (a copy of the profile file with another name)"
        )
    return None


def _without(config: dict, names: tuple[str, ...]) -> dict:
    """``config`` without ``names``, from its keys and from the names its ``command_line`` lists."""
    kept = {k: v for k, v in config.items() if k not in names}
    if isinstance(kept.get("command_line"), list):
        kept["command_line"] = [name for name in kept["command_line"] if name not in names]
    return kept


def own_data_folder(profile: str, notebook: str) -> str | None:
    """The data folder of the records the file of ``profile`` makes for ``notebook`` (None: no such file)."""
    written = profile_values(profile, notebook)
    return data_folder(written) if written is not None else None


def replaced_line(path: Path, config: dict, data_checksum: str | None) -> str | None:
    """What a profile's rerun replaces in ``path``: ``<path>, a record of`` its commit and code fingerprint
    where they are not the current ones, the parameters whose values differ, another data checksum; None
    when the record is of the same commit, code, values and data."""
    previous = json.loads(path.read_text())
    commit = previous.get("versions", {}).get("git_commit", "unknown")
    parts = []
    if commit != _git_state().get("git_commit"):
        parts.append(f"commit {commit[:7]}")
    made_by = stale(previous) if "code_fingerprint" in previous else None  # records of notebooks have one
    if made_by is not None:
        parts.append(f"code {_short(made_by)} (now {_short(_current_fingerprint(made_by))})")
    names = differing(previous.get("config", {}), config)
    if names:
        parts.append(f"other values of {', '.join(names)}")
    if data_checksum is not None and previous.get("data_checksum") != data_checksum:
        parts.append(f"data checksum {str(previous.get('data_checksum'))[:12]} (now {data_checksum[:12]})")
    return f"{_shown(path)}, a record of {'; '.join(parts)}" if parts else None


def stale(record: dict) -> str | None:
    """What made a record, where it is not this checkout's code (None: current): its artefacts' code and
    its verdicts' (:func:`~longdoc.experiments.cache.record_fingerprint`; a record older than that
    fingerprint is judged by its code fingerprint alone)."""
    made_by = record.get("record_fingerprint", record.get("code_fingerprint"))
    return made_by if made_by != _current_fingerprint(made_by) else None


def _current_fingerprint(made_by: str | None) -> str:
    """This checkout's fingerprint of the kind ``made_by`` is: code+verdicts, or code alone (older records)."""
    from longdoc.experiments import cache  # looked up at call time: tests replace the fingerprints

    return cache.record_fingerprint() if made_by is not None and "+" in made_by else cache.code_fingerprint()


def _short(fingerprint: str) -> str:
    """A fingerprint as the first 8 characters of each part (``<code>+<verdicts>``, or ``<code>``)."""
    return "+".join(part[:8] for part in fingerprint.split("+"))


def _shown(path: Path) -> str:
    path = Path(path)
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


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
    profile_config: dict | None = None,
) -> Path:
    """Write ``directory/metrics.json`` (strict JSON: non-finite numbers become null) and whatever
    ``write_files(folder)`` adds (the TREC runs); refuse (unless ``overwrite``) where
    :func:`check_record_slot` refuses (``profile_config``: the values of the profile's file). The folder is built under a temporary name and
    replaces the old one at once: a killed run leaves the previous record whole, never half of one."""
    directory = Path(directory)
    config = as_json(config)
    if not overwrite:
        check_record_slot(directory, profile, config, data_checksum, profile_config)
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


def _main(argv: list[str]) -> int:
    """``run_all.sh``'s check before its first notebook: each notebook's record slot, from the parameter
    files the profiles tool wrote (``<notebook>.yaml``). Prints what a profile's rerun will replace (and
    writes the line to ``--notes DIR/<notebook>.replaced`` for the log when it finishes); refuses, for
    every notebook at once, a run with other values where the profile's records go or where a record of
    another configuration lies. ``--notes DIR/<notebook>.folder``: empty when the record goes where the
    profile's own go, else its data folder, under which its executed notebook and timing are filed (so
    that they never replace the profile's own)."""
    import argparse

    import yaml

    from longdoc.experiments.parameters import check_parameters

    parser = argparse.ArgumentParser(prog="python -m longdoc.experiments.records", description=_main.__doc__)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--notes", type=Path, help="a folder for the lines to log when each notebook finishes")
    parser.add_argument("parameters", nargs="+", type=Path, help="<notebook>.yaml files of papermill parameters")
    args = parser.parse_args(argv)
    problems, advice = [], []
    for file in args.parameters:
        notebook = file.stem
        config = check_parameters(yaml.safe_load(file.read_text()))  # as papermill and the study read them
        folder = record_folder(args.profile, notebook, config)
        if args.notes:
            own = folder.parent.name == own_data_folder(args.profile, notebook)
            (args.notes / f"{notebook}.folder").write_text("" if own else folder.parent.name, encoding="utf-8")
        try:
            line = check_record_slot(folder, args.profile, config, None, profile_values(args.profile, notebook))
        except ProfileFolderError as err:
            problems.append(f"{notebook}: {err.problem}")
            advice = [err.advice]
            continue
        except ConfigMismatchError as err:
            problems.append(f"{notebook}: {err}")
            continue
        if line:
            print(f"{notebook}: will replace {line}")
            if args.notes:
                (args.notes / f"{notebook}.replaced").write_text(f"{notebook}: replaced {line}\n", encoding="utf-8")
    for problem in problems + advice:
        print(f"run_all.sh: {problem}", file=sys.stderr)
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
