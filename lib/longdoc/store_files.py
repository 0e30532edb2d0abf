"""A store that notices its own damage: the corpus store (:mod:`longdoc.data.corpus_store`) and the
token store (:mod:`longdoc.text.segments`) record each file's size and SHA-256 in ``store.json`` when
built; every open checks the sizes (a copy cut short, a disk that filled) and the checksums of the small
arrays, :func:`verify` every checksum (after every build, and when asked). A damaged store is an error naming the file and what is
wrong, never a document cut short; the callers that can rebuild it from its source do, saying so.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

MANIFEST = "store.json"


class StoreDamaged(ValueError):
    """A store file that is missing, unreadable, of the wrong size or checksum, or a manifest that is not
    the JSON its builder wrote: ``<file>: <what is wrong>``."""

    def __init__(self, path: str | Path, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_facts(directory: Path, names: list[str]) -> dict[str, dict]:
    """``{name: {"bytes": size, "sha256": digest}}`` of the store's files, for ``store.json``."""
    return {name: {"bytes": (directory / name).stat().st_size, "sha256": sha256_of(directory / name)} for name in names}


def read_manifest(directory: Path) -> dict | None:
    """``store.json`` of ``directory`` (None when there is none): a JSON object, or :class:`StoreDamaged`."""
    path = Path(directory) / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise StoreDamaged(path, f"cannot be read ({err.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise StoreDamaged(
            path, f"is not the JSON its builder wrote ({getattr(err, 'msg', err)}): the store is damaged"
        ) from None
    if not isinstance(manifest, dict):
        raise StoreDamaged(path, "is not the JSON object its builder wrote: the store is damaged")
    return manifest


def check_sizes(
    directory: Path, manifest: dict, hashed: tuple[str, ...] = (), expected: set[str] | None = None
) -> None:
    """Each file ``store.json`` lists (``expected``: exactly these) exists, can be read and has its recorded
    size; the files named in ``hashed`` (a store's small arrays: cheap beside its text) also their SHA-256."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise StoreDamaged(Path(directory) / MANIFEST, "lists no files with their sizes (built by older code)")
    if expected is not None and set(files) != expected:
        raise StoreDamaged(Path(directory) / MANIFEST, f"lists {sorted(files)}, not the store's {sorted(expected)}")
    for name, facts in files.items():
        if not (
            isinstance(facts, dict)
            and type(facts.get("bytes")) is int
            and isinstance(facts.get("sha256"), str)
            and Path(name).name == name
        ):
            raise StoreDamaged(Path(directory) / MANIFEST, f"its entry for {name!r} is not what its builder wrote")
    for name, facts in files.items():
        path = Path(directory) / name
        try:
            size = path.stat().st_size
            with open(path, "rb"):
                pass
        except FileNotFoundError:
            raise StoreDamaged(path, "missing: the store is damaged") from None
        except OSError as err:
            raise StoreDamaged(path, f"cannot be read ({err.strerror})") from None
        if size != facts.get("bytes"):
            what = "truncated" if size < facts.get("bytes", 0) else "longer than built"
            raise StoreDamaged(
                path, f"is {size:,} bytes, store.json says {facts.get('bytes'):,} ({what}): the store is damaged"
            )
        if name in hashed and sha256_of(path) != facts["sha256"]:
            raise StoreDamaged(path, "its SHA-256 differs from the one in store.json: the store is damaged")


def verify(directory: Path, manifest: dict | None = None) -> None:
    """Sizes and SHA-256 of every file against ``store.json`` (reads the whole store)."""
    manifest = read_manifest(directory) if manifest is None else manifest
    if manifest is None:
        raise StoreDamaged(Path(directory) / MANIFEST, "missing: no complete store here")
    check_sizes(directory, manifest)
    for name, facts in manifest["files"].items():
        if sha256_of(Path(directory) / name) != facts.get("sha256"):
            raise StoreDamaged(
                Path(directory) / name, "its SHA-256 differs from the one in store.json: the store is damaged"
            )


def rebuilding(problem: Exception, source: Path | str) -> None:
    """The one line saying a damaged store is rebuilt from its source."""
    print(f"{problem}; rebuilding it from {source}", file=sys.stderr)


def short_read(path: Path, wanted: int, got: int) -> StoreDamaged:
    return StoreDamaged(
        path, f"read {got} of {wanted} bytes (the file was cut short after it was opened): the store is damaged"
    )
