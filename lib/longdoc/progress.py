"""Progress bars: one line per loop wherever the study runs.

``LONGDOC_PROGRESS`` chooses: ``live`` (default: a text bar redrawn in place, in a terminal and in
JupyterLab, which draws carriage returns), ``final`` (only the loop's last line: what ``run_all.sh``
and the nbval checks use, because papermill stores every redraw as a separate output of the executed
notebook), or ``off``. Text bars only, so no "IProgress not found" without ipywidgets.
"""

from __future__ import annotations

import os

from tqdm import tqdm as _tqdm

MODES = ("live", "final", "off")


def progress_mode() -> str:
    mode = os.environ.get("LONGDOC_PROGRESS", "live")
    if mode not in MODES:
        raise ValueError(f"LONGDOC_PROGRESS={mode!r}: expected one of {list(MODES)}")
    return mode


class _Collected:
    """A stream that keeps what a bar writes and hands it on in one write (one notebook output)."""

    def __init__(self, target):
        self.target, self.text = target, ""
        self.encoding = getattr(target, "encoding", None) or "utf-8"

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass

    def hand_on(self) -> None:
        if self.text.strip():
            self.target.write(self.text.lstrip("\r"))
            self.target.flush()
        self.text = ""


class tqdm(_tqdm):
    """``tqdm.tqdm`` under ``LONGDOC_PROGRESS``: in ``final`` mode nothing is drawn until the loop
    ends, and then its last line is written at once."""

    def __init__(self, *args, **kwargs):
        self._collected = None  # first: a bad LONGDOC_PROGRESS raises below, and tqdm's __del__ reads it
        mode = progress_mode()
        if mode == "off":
            kwargs["disable"] = True
        elif mode == "final":
            import sys

            self._collected = _Collected(kwargs.get("file") or sys.stderr)
            kwargs["file"] = self._collected
        self._closing = False
        kwargs.setdefault("mininterval", 0.5)
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None):
        if self._collected is not None and not self._closing:
            return True
        return super().display(msg, pos)

    def close(self):
        self._closing = True
        super().close()
        if self._collected is not None:
            self._collected.hand_on()
