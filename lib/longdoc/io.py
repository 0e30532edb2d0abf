"""Atomic file writing: a reader never sees a half-written file, a failure never clobbers an old one,
and a process killed mid-write (SIGKILL, out of memory) leaves nothing that a later run keeps.

Temporary names carry the writer's host and process id (``.<name>.<host>.<pid>.<random>.tmp``);
:func:`sweep_stale` removes those of this host whose process is gone, and puts back a folder that a
killed replacement had moved aside. Files and folders get the permissions the umask gives (a
``tempfile`` name is created 0600/0700, which would otherwise survive the rename). :func:`exclusive`
keeps a second writer of the same path out (a lock file beside it, released by the kernel when its
holder dies).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"
_STALE = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.[^.]+\.tmp$")
_UMASK = os.umask(0)  # read once, at import (setting it back at once; no thread is writing yet)
os.umask(_UMASK)


def _prefix(path: Path) -> str:
    return f".{path.name}.{_HOST}.{os.getpid()}."


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep_stale(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove the temporary files and folders in ``folder`` left by writers of this host that no
    longer run; a ``.<name>.old`` folder of a replacement killed half-way is renamed back to
    ``<name>`` when ``<name>`` is missing (the previous version survives whole), else removed.
    ``name``: only the leftovers of writing ``folder/name`` (a folder that is not ours, a user's, whose
    other hidden ``.x.old`` entries are theirs). Returns what was removed."""
    folder = Path(folder)
    removed = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        if name is not None and not entry.name.startswith(f".{name}."):
            continue
        match = _STALE.match(entry.name)
        dead_temporary = match is not None and match["host"] == _HOST and not _alive(int(match["pid"]))
        moved_aside = (
            entry.name.startswith(".")
            and entry.name.endswith(".old")
            and (name is None or entry.name == f".{name}.old")
            and entry.is_dir()
            and not _alive_writer_of(folder, entry.name[1:-4])
        )
        if moved_aside and not (folder / entry.name[1:-4]).exists():
            os.replace(entry, folder / entry.name[1:-4])
            continue
        if dead_temporary or moved_aside:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
            removed.append(entry)
    return removed


def _alive_writer_of(folder: Path, name: str) -> bool:
    """Whether a live process of this host is writing ``name`` in ``folder`` (it may be mid-replacement)."""
    for entry in folder.glob(f".{name}.{_HOST}.*.tmp"):
        match = _STALE.match(entry.name)
        if match and _alive(int(match["pid"])):
            return True
    return False


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file beside ``path``; on success rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_prefix(path), suffix=".tmp")
    os.close(fd)
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": "\n"}
        with open(tmp, mode, **kwargs) as handle:
            yield handle
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class ConcurrentWriteError(OSError):
    """Another process writes, or wrote meanwhile, the same path."""


def _state(path: Path) -> tuple | None:
    """What tells a replaced or edited folder from the one seen before: the identity, time and size of
    the folder and of everything in it (None: absent). Stats only: cheap for a dataset's few big files."""
    if not os.path.lexists(path):
        return None
    entries = [path, *(Path(root) / name for root, dirs, files in os.walk(path) for name in dirs + files)]
    seen = []
    for entry in sorted(entries):
        try:
            found = os.lstat(entry)
        except FileNotFoundError:  # removed while walked: a change
            seen.append((str(entry), None))
            continue
        seen.append((str(entry), found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size))
    return tuple(seen)


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, wait: Callable[[str], None] | None = None):
    """Hold the lock of ``path`` (``.<name>.lock`` beside it) for the block; when another process holds
    it, :class:`ConcurrentWriteError` names that process at once or, with ``wait``, ``wait(holder)`` is
    called once and the lock is waited for (a second task of a job array needing the same artefact). The
    lock is ``flock``'s: released by the kernel when its holder dies, and seen across the hosts of a shared
    file system that supports it (NFSv4, Lustre mounted with ``flock``). The lock file is removed on release."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    told = False
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_UMASK)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                if wait is None:
                    raise ConcurrentWriteError(
                        f"{path}: {holder} is writing it now; wait for it to end, or write somewhere else"
                    ) from None
                if not told:
                    wait(holder)
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the holder ends (or dies)
            # the file we locked may have been released and removed meanwhile: then lock the new one
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                break
        except FileNotFoundError:
            pass
        except BaseException:  # refused, or Ctrl-C while waiting: the descriptor (and any lock) goes
            os.close(fd)
            raise
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"process {os.getpid()} on {_HOST}".encode(), 0)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # before unlocking: a waiter that opened it sees it gone and retries
        os.close(fd)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, refuse_if_changed: bool = False):
    """Build a directory under a temporary name; on success replace ``path`` with it. With
    ``refuse_if_changed``, a ``path`` created, replaced or edited by someone else since the block began
    is kept and :class:`ConcurrentWriteError` raised (ours is discarded)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    before = _state(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_prefix(path), suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_UMASK)
        if refuse_if_changed and _state(path) != before:
            raise ConcurrentWriteError(
                f"{path}: changed by another writer while this one ran; kept theirs, discarded this one's output"
            )
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


IMPORTED_MARKER = "imported.json"  # in a cached artefact imported without its checkpoint (experiments.cache)


def missing_checkpoint(path: str | os.PathLike) -> str:
    """Why ``path`` (a checkpoint inside a cached artefact) is missing, when it is because its artefact was
    imported from another machine without it; "" otherwise."""
    for folder in Path(path).parents:
        if (folder / IMPORTED_MARKER).is_file():
            return (
                f"{path} is missing: its artefact {folder} was imported without its checkpoint "
                f"(python -m longdoc.experiments.cache import; {folder / IMPORTED_MARKER} names the export). "
                "What loads it (a warm start, a pre-trained start, a timing, a figure of its vectors) needs the "
                "artefact made here: move that folder away and rerun"
            )
    return ""


_CAUSES = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOSPC: "no space left on the device: the disk is full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large: a file-size limit (ulimit -f) or the file system's largest file",
    errno.ELOOP: "a loop of symbolic links",
    errno.EISDIR: "is a directory, not a file",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EROFS: "the file system is read-only",
    errno.ENOENT: "no such file or folder",
    errno.EEXIST: "already exists",
}


def final_path(path: str | os.PathLike) -> Path:
    """``path`` with every temporary name of :func:`atomic_write` / :func:`atomic_directory` in it replaced
    by the name it becomes (a message names the user's file, not ``.x.host.123.abc.tmp``)."""
    parts = []
    for part in Path(path).parts:
        match = _STALE.match(part)
        parts.append(part[1 : part.rfind(f".{match['host']}.{match['pid']}.")] if match else part)
    return Path(*parts)


def _making_a_folder(err: OSError) -> bool:
    """Whether ``err`` (EEXIST) came from making a folder where a file is, not from creating a file."""
    import traceback

    return any(frame.name in ("mkdir", "makedirs") for frame in traceback.extract_tb(err.__traceback__))


class FileSystemError(OSError):
    """An operating-system error said in one line: the file, what was done, and the cause in words."""


def file_system_error(err: OSError, doing: str, path: str | os.PathLike | None = None) -> FileSystemError:
    """``err`` as :class:`FileSystemError`: ``<file>: cannot <doing> (<cause>)``, the file being the one
    the error names (its final name, not a temporary one) or else ``path``."""
    if isinstance(err, FileSystemError):
        return err
    where = err.filename if err.filename is not None else path
    cause = _CAUSES.get(err.errno, err.strerror or str(err))
    if where is not None and err.errno in (errno.EEXIST, errno.ENOTDIR):  # a folder made or entered below a file
        found = Path(os.fsdecode(where))
        candidates = found.parents if err.errno == errno.ENOTDIR else (found,) if _making_a_folder(err) else ()
        above = next((p for p in candidates if p.exists() and not p.is_dir()), None)
        if above is not None:
            where, cause = above, "is a file, not a folder"
    if where is not None and Path(os.fsdecode(where)).name.endswith(".lock") and path is not None:
        where = path  # the lock beside a folder: name the folder
    shown = final_path(os.fsdecode(where)) if where is not None else "?"
    problem = FileSystemError(f"{shown}: cannot {doing} ({cause})")
    problem.errno = err.errno  # str() stays the one line (OSError's two-argument form prefixes "[Errno N]")
    return problem


@contextlib.contextmanager
def naming_files(doing: str, path: str | os.PathLike | None = None):
    """Operating-system errors inside the block become :class:`FileSystemError` (see
    :func:`file_system_error`); errors already saying their file pass unchanged."""
    try:
        yield
    except FileSystemError:
        raise
    except OSError as err:
        if type(err).__module__ != "builtins":
            raise  # an OSError subclass of our own (ConcurrentWriteError): already a message
        raise file_system_error(err, doing, path) from None


def unwritable_folder(folder: str | os.PathLike) -> str | None:
    """Why files cannot be made in ``folder`` (a file, a loop of links, no permission, a read-only file
    system), or None; a folder that does not exist yet is fine where its nearest existing parent is."""
    folder = Path(folder)
    existing = folder
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "a file"
        if existing.is_symlink() and not existing.exists():
            try:
                os.stat(existing)
            except OSError as err:
                what = "a loop of symbolic links" if err.errno == errno.ELOOP else "a link to nothing"
        return f"{existing} is {what}, not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".longdoc-write-check."):
            pass
    except OSError as err:
        return f"{existing} cannot be written ({_CAUSES.get(err.errno, err.strerror)})"
    return None


def rewrite_marked_block(path: str | os.PathLike, markers: tuple[str, str], block: str) -> None:
    """Replace the text from ``markers[0]`` to ``markers[1]`` (both included) in ``path`` by ``block`` (a
    generated table of the README, kept between its two comment lines), written atomically."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    start, end = text.find(markers[0]), text.find(markers[1])
    if start < 0 or end < start:
        raise ValueError(f"{path}: no {markers[0]} ... {markers[1]} block")
    with atomic_write(path) as out:
        out.write(text[:start] + block + text[end + len(markers[1]) :])
