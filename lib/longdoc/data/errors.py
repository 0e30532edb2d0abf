"""The one error type for bad input files (it always names the file and, where there is one, the
line), and the one way input text files are read (:func:`text_lines`)."""

from __future__ import annotations

import re
import reprlib
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class DataFormatError(ValueError):
    """A malformed, inconsistent or unusable input file."""

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


_SHORT = reprlib.Repr()  # (Python 3.11's Repr takes no keywords)
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 2, 6, 6, 6
_SHORT.maxstring = _SHORT.maxother = 60


def shown(value: Any) -> str:
    """``repr`` cut to a few dozen characters, however large or deeply nested the value (a profile
    of nested YAML aliases is a few hundred bytes that expand to megabytes)."""
    return _SHORT.repr(value)


def bounded(message: str, limit: int = 2000) -> str:
    """A message cut to ``limit`` characters, saying so."""
    return message if len(message) <= limit else f"{message[:limit]}... ({len(message) - limit} more characters)"


PROGRESS_BYTES = 64 << 20  # files larger than this show a progress bar while read (MS MARCO: 22 GB)


def require_file(path: str | Path) -> Path:
    """``path`` when it is a regular file that can be opened; otherwise an error saying what it is."""
    import errno
    import os
    import stat

    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        if err.errno == errno.ENOENT and path.is_symlink():
            raise DataFormatError(path, f"a symbolic link to {os.readlink(path)}, which does not exist") from None
        causes = {
            errno.ENOENT: "no such file",
            errno.ELOOP: "a loop of symbolic links, not a file",
            errno.EACCES: "cannot be read (permission denied on a folder above it)",
            errno.ENOTDIR: "no such file (a part of the path is a file, not a folder)",
        }
        raise DataFormatError(path, causes.get(err.errno, f"cannot be read ({err.strerror})")) from None
    if stat.S_ISDIR(mode):
        raise DataFormatError(path, "is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise DataFormatError(path, "is not a regular file (a pipe or a device cannot be read twice)")
    try:
        with open(path, "rb"):
            pass
    except OSError as err:
        cause = "permission denied" if err.errno in (errno.EACCES, errno.EPERM) else err.strerror
        raise DataFormatError(path, f"cannot be read ({cause})") from None
    return path


def require_folder(path: str | Path, what: str = "folder") -> Path:
    """``path`` when it is a folder whose entries can be listed and read; otherwise an error saying why."""
    import errno
    import os

    path = Path(path)
    try:
        os.stat(path)
    except OSError as err:
        causes = {errno.ENOENT: "no such folder", errno.ELOOP: "a loop of symbolic links, not a folder"}
        raise DataFormatError(path, causes.get(err.errno, f"cannot be read ({err.strerror})")) from None
    if not path.is_dir():
        raise DataFormatError(path, f"is a file, not a {what}")
    if not os.access(path, os.R_OK | os.X_OK):
        raise DataFormatError(path, f"cannot be read (permission denied: the {what} needs read and search permission)")
    return path


COMPRESSED = {  # the first bytes of a file -> how it is read (MS MARCO and NCI publish .tsv.gz)
    b"\x1f\x8b": "gzip",
    b"\xfd7zXZ\x00": "xz",
}
_BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")  # a block's (or the empty stream's end) magic after the header
ARCHIVES = {b"PK\x03\x04": "a zip archive", b"ustar": "a tar archive"}  # many files: unpack first


def _archive(path: Path, head: bytes) -> None:
    for magic, name in ARCHIVES.items():
        if head.startswith(magic) or head[257:262] == magic:
            raise DataFormatError(path, f"is {name} of files, not a text file: unpack it and name the file inside")


def compression(path: Path) -> str | None:
    """``gzip``, ``bzip2`` or ``xz`` when the file starts with that format's magic bytes (whatever its
    name), None for plain text; an archive of several files (zip, tar, a compressed tar) is an error saying
    to unpack it."""
    with open(path, "rb") as handle:
        head = handle.read(512)
    _archive(path, head)
    kind = next((name for magic, name in COMPRESSED.items() if head.startswith(magic)), None)
    if kind is None and _BZIP2.match(head):
        kind = "bzip2"
    if kind is not None:  # a .tar.gz: the archive is inside the compressed stream
        with open(path, "rb") as raw, _decompressed(kind, raw) as stream:
            try:
                inside = stream.read(512)
            except Exception:  # a damaged stream: text_lines says where, line by line
                inside = b""
            _archive(path, inside)
    return kind


def _decompressed(kind: str | None, raw):
    """The text stream of ``raw`` (a binary file) as a context: decompressed when ``kind`` names a
    compression, else ``raw`` itself (left open)."""
    import bz2
    import contextlib
    import gzip
    import lzma

    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if kind == "bzip2":
        return bz2.BZ2File(raw)
    if kind == "xz":
        return lzma.LZMAFile(raw)
    return contextlib.nullcontext(raw)


def text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file without its line ending (LF, CRLF, or, in a file whose
    first 64 KiB hold no LF, a lone CR, as old Mac exports end lines); a byte-order mark at the start is
    dropped, and a byte that is not UTF-8 (a Latin-1 export) is an error naming the line. A gzip, bzip2 or xz
    file (``msmarco-docs.tsv.gz`` as distributed) is read decompressed, streaming: memory does not grow with
    the file, and a damaged or cut-off stream is an error naming the line it reached."""
    import lzma
    import zlib

    from longdoc.progress import tqdm

    path = require_file(path)
    kind = compression(path)
    damaged = (EOFError, OSError, zlib.error, lzma.LZMAError) if kind else ()
    size = path.stat().st_size
    number = 0
    with (
        open(path, "rb") as raw,
        tqdm(total=size, desc=f"reading {path.name}", unit="B", unit_scale=True, disable=size < PROGRESS_BYTES) as bar,
    ):
        try:
            head = _head(kind, raw, damaged)
            lone_cr = b"\n" not in head and b"\r" in head  # an old Mac export: CR ends its lines
            raw.seek(0)
            with _decompressed(kind, raw) as handle:
                read = 0
                for chunk in handle:
                    bar.update(raw.tell() - read)
                    read = raw.tell()
                    body = chunk.removesuffix(b"\n").removesuffix(b"\r")
                    for line_bytes in body.split(b"\r") if lone_cr else (body,):
                        number += 1
                        yield number, _decoded(line_bytes, path, number)
        except damaged as err:
            raise DataFormatError(
                path, f"the {kind} stream is damaged or cut off after line {number} ({err})", number + 1
            ) from None


def _head(kind: str | None, raw, damaged: tuple) -> bytes:
    """Up to the first 64 KiB of the text (what a damaged stream yields before its damage: the line loop
    then says where it broke)."""
    head = b""
    with _decompressed(kind, raw) as stream:
        try:
            while len(head) < 1 << 16 and (piece := stream.read1(1 << 16)):
                head += piece
        except damaged:
            pass
    return head[: 1 << 16]


def _decoded(line: bytes, path: Path, number: int) -> str:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataFormatError(
            path,
            f"byte 0x{line[err.start]:02x} at column {err.start + 1} is not UTF-8 (re-encode the file as UTF-8)",
            number,
        ) from None
    return text.removeprefix("\ufeff") if number == 1 else text


_WHITESPACE = re.compile(r"\s")


def check_id(value, path: str | Path, line: int, what: str = "document id") -> str:
    """An id as a string: a JSON string or integer, non-empty and without whitespace (TREC run files
    separate fields by whitespace)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        quoted = "" if value is None else f" {shown(value)}"
        raise DataFormatError(path, f"{what} must be a string, got {json_type(value)}{quoted}", line)
    text = str(value)
    problem = id_problem(text, what)
    if problem:
        raise DataFormatError(path, problem, line)
    return text


def id_problem(text: str, what: str = "document id") -> str | None:
    """What is wrong with ``text`` as an id (the corpus's rules, which run files and qrels follow too), or
    None: empty, whitespace, not NFC, an invisible character."""
    if not text:
        return f"{what} is empty"
    if _WHITESPACE.search(text):
        return f"{what} {shown(text)} contains whitespace (run files cannot hold it)"
    if unicodedata.normalize("NFC", text) != text:  # the same visible id in NFD would be another document
        return (
            f"{what} {ascii(text)[:80]} is not in Unicode NFC form (its NFC form, which looks the same: "
            f"{ascii(unicodedata.normalize('NFC', text))[:80]})"
        )
    hidden = next((c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs") or _ignorable(c)), None)
    if hidden is not None:  # an id the user cannot see differs from the one they can
        return f"{what} {ascii(text)[:80]} contains the invisible character U+{ord(hidden):04X} (a control or format character)"
    return None


_DEFAULT_IGNORABLE = (  # Unicode's Default_Ignorable_Code_Point ranges outside Cc/Cf (DerivedCoreProperties.txt)
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def _ignorable(character: str) -> bool:
    """Drawn as nothing: a variation selector, the combining grapheme joiner, a Hangul filler."""
    code = ord(character)
    return any(low <= code <= high for low, high in _DEFAULT_IGNORABLE)


def visible(text: str) -> bool:
    """Whether ``text`` has a character one can see (not only spaces, control or format characters)."""
    return any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Zs") for c in text)


ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")  # not Python's int(): no "1_0", no non-ASCII digits
ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # nor float()'s


def ascii_integer(text: str, path: str | Path, line: int, what: str = "relevance") -> int:
    """A judgement's grade: an optional sign and ASCII digits only (``int`` would read "1_0" as 10 and
    "١" as 1)."""
    if not ASCII_INTEGER.fullmatch(text):
        raise DataFormatError(path, f"{what} {shown(text)} is not an integer (ASCII digits, an optional sign)", line)
    if len(text.lstrip("+-")) > 18:
        raise DataFormatError(path, f"{what} {shown(text)}: {len(text)} digits; a grade fits in 18", line)
    return int(text)


def json_type(value) -> str:
    return {
        type(None): "null",
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), "number" if type(value).__name__ == "LongInteger" else type(value).__name__)
