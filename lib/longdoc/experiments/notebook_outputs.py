"""The outputs nbval compares: what the smoke profile prints in the cells tagged ``nbval-check-output``,
stored in the notebooks themselves (every other cell is stored without outputs).

    python -m longdoc.experiments.notebook_outputs                 # re-execute every notebook, store
    python -m longdoc.experiments.notebook_outputs notebooks/01_baselines.ipynb

Run it after a change that is meant to change a checked number, and commit the notebooks: CI
(``pytest --nbval-lax notebooks``) then fails on any number that changes without that. Comparison goes
through ``notebooks/nbval-sanitize.cfg`` (numbers cut to two decimals, timings and paths blanked), so
last-digit differences between machines do not fail. The smoke profile runs in fp32 so that no
stored value depends on whether a CPU computes bf16 natively.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CHECK_TAG = "nbval-check-output"
NOTEBOOKS_DIR = Path(__file__).resolve().parents[3] / "notebooks"


def checked_cells(notebook) -> list[int]:
    return [i for i, cell in enumerate(notebook.cells) if CHECK_TAG in cell.get("metadata", {}).get("tags", [])]


def keep_checked_outputs(notebook, executed) -> None:
    """``notebook`` with the outputs of ``executed`` in its checked cells (streams merged, as nbval
    merges a new run's) and none elsewhere; no timings. Checked cells keep their execution count
    (nbval refuses a stored output of a cell that never ran); the others have none."""
    from nbval.plugin import coalesce_streams

    checked = set(checked_cells(notebook))
    for index, (cell, ran) in enumerate(zip(notebook.cells, executed.cells)):
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        cell.outputs = coalesce_streams(ran.outputs) if index in checked else []
        cell.execution_count = ran.execution_count if index in checked else None


def store(path: Path, timeout: int = 1800) -> Path:
    import nbformat
    from nbclient import NotebookClient

    from longdoc.io import atomic_write

    notebook = nbformat.read(path, as_version=4)
    executed = nbformat.read(path, as_version=4)
    os.environ["LONGDOC_PROGRESS"] = "off"  # the kernel inherits it
    NotebookClient(
        executed,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    keep_checked_outputs(notebook, executed)
    with atomic_write(path) as handle:
        nbformat.write(notebook, handle)
    return path


def main(argv: list[str]) -> int:
    import nbformat

    paths = [Path(p) for p in argv] or sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        checked = len(checked_cells(nbformat.read(path, as_version=4)))
        print(f"executing {path} (smoke defaults) and storing the outputs of {checked} checked cells", flush=True)
        store(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
