"""The one error type for bad input files: it always names the file and, where there is one, the line."""

from __future__ import annotations

from pathlib import Path


class DataFormatError(ValueError):
    """A malformed, inconsistent or unusable input file."""

    def __init__(self, path: str | Path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")
