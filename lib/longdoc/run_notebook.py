"""A notebook executed in this Python process, where no Jupyter kernel is installed (an offline GPU node
with its own image): ``python -m longdoc.run_notebook IN.ipynb OUT.ipynb -f VALUES.yaml``.

It does what ``run_all.sh`` asks of papermill: the values of ``-f`` go into a new cell tagged
``injected-parameters`` right after the cell tagged ``parameters`` (papermill's place), the code cells run
in order in one namespace, and the executed notebook is written to ``OUT`` with each cell's outputs, as a
kernel would give them: what it prints (``stream``), the value of its last expression (none after a
trailing ``;``) and what it passes to ``display`` (``execute_result`` / ``display_data``: its
``_repr_html_``, ``_repr_markdown_`` ... and its text), and each figure still open when the cell ends
(PNG; a kernel's inline backend). The executed notebook is rewritten after every cell, so a process that
dies leaves the cells it ran. A cell that raises gets the error as its output, the notebook is written up
to it, and the command exits 1. Magics (``%``, ``!``) are not supported (no notebook of the study uses
one): such a cell is refused before any cell runs. Unlike a kernel, what a child process or C code writes
to the file descriptors themselves goes to the terminal (the study's launcher pipes its processes'
output through Python).
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import io
import json
import linecache
import math
import sys
import traceback
from pathlib import Path

import yaml

from longdoc.io import atomic_write

PARAMETERS_TAG, INJECTED_TAG = "parameters", "injected-parameters"


class NotebookError(ValueError):
    """A notebook this runner cannot execute (named, with the cell)."""


def read_notebook(path: Path) -> dict:
    try:
        notebook = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise NotebookError(f"{path}: not a readable notebook ({err})") from None
    if notebook.get("nbformat") != 4 or not isinstance(notebook.get("cells"), list):
        raise NotebookError(f"{path}: not a version 4 notebook")
    return notebook


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def inject_parameters(notebook: dict, values: dict, path: Path | str = "notebook") -> dict:
    """``notebook`` with a cell assigning ``values`` after its ``parameters`` cell (a previous injected cell
    is replaced), as papermill does; a notebook without a parameters cell is refused."""
    cells = [c for c in notebook["cells"] if INJECTED_TAG not in _tags(c)]
    index = next((i for i, c in enumerate(cells) if c["cell_type"] == "code" and PARAMETERS_TAG in _tags(c)), None)
    if index is None:
        raise NotebookError(f"{path}: no cell tagged {PARAMETERS_TAG!r} to put the values after")
    lines = ["# Parameters"] + [f"{name} = {python_literal(value, name, path)}" for name, value in values.items()]
    injected = {
        "cell_type": "code",
        "execution_count": None,
        "id": INJECTED_TAG,
        "metadata": {"tags": [INJECTED_TAG]},
        "outputs": [],
        "source": "\n".join(lines) + "\n",
    }
    return {**notebook, "cells": [*cells[: index + 1], injected, *cells[index + 1 :]]}


def python_literal(value, name: str = "value", path: Path | str = "notebook") -> str:
    """``value`` as Python source that evaluates to it (YAML's values: None, booleans, numbers, strings,
    lists and mappings; an infinite or NaN float as ``float('inf')``); anything else is refused, naming
    the parameter."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_literal(v, name, path) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{python_literal(k, name, path)}: {python_literal(v, name, path)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    raise NotebookError(
        f"{path}: parameter {name!r} is a {type(value).__name__} ({value!r}); parameter values are None, "
        "booleans, numbers, strings, lists and mappings (quote a date to pass it as a string)"
    )


class _Cell:
    """What one cell gives: its outputs, in order (consecutive writes to one stream make one output)."""

    def __init__(self, execution_count: int):
        self.count, self.outputs = execution_count, []
        self._chunks: dict[int, list[str]] = {}  # output index -> text written to it, joined by :meth:`done`

    def stream(self, name: str, text: str) -> None:
        if not text:
            return
        last = self.outputs[-1] if self.outputs else None
        if not (last and last["output_type"] == "stream" and last["name"] == name):
            self.outputs.append({"output_type": "stream", "name": name, "text": ""})
        self._chunks.setdefault(len(self.outputs) - 1, []).append(text)

    def done(self) -> list[dict]:
        """The outputs, each stream's text joined."""
        for index, chunks in self._chunks.items():
            self.outputs[index]["text"] = "".join(chunks)
        self._chunks = {}
        return self.outputs

    def display(self, *values) -> None:
        """The notebook's ``display``."""
        for value in values:
            self.show(value)

    def show(self, value, result: bool = False) -> None:
        data = mime_bundle(value)
        output = {"output_type": "execute_result" if result else "display_data", "data": data, "metadata": {}}
        if result:
            output["execution_count"] = self.count
        self.outputs.append(output)


class _Stream(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` while the notebook runs: text goes to the cell running now (a
    logging handler made in an earlier cell writes to the present one, as in a kernel)."""

    def __init__(self, name: str):
        self.name, self.cell = name, None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if self.cell is not None:
            self.cell.stream(self.name, text)
        return len(text)


REPRESENTATIONS = {  # what IPython's display formatter asks of an object, by MIME type
    "text/html": "_repr_html_",
    "text/markdown": "_repr_markdown_",
    "text/latex": "_repr_latex_",
    "image/png": "_repr_png_",
    "image/svg+xml": "_repr_svg_",
}


def mime_bundle(value) -> dict:
    """A kernel's display data for ``value``: a figure as PNG (the inline backend), else each of its
    ``_repr_*_`` representations, and always its text."""
    data = {"text/plain": repr(value)}
    if _is_figure(value):
        data["image/png"] = _png(value)
        return data
    for mime, method in REPRESENTATIONS.items():
        represent = getattr(value, method, None)
        shown = represent() if callable(represent) and not isinstance(value, type) else None
        if shown:
            data[mime] = base64.b64encode(shown).decode("ascii") if isinstance(shown, bytes) else shown
    return data


def _is_figure(value) -> bool:
    return type(value).__name__ == "Figure" and hasattr(value, "savefig")


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _open_figures() -> list:
    if "matplotlib.pyplot" not in sys.modules:
        return []
    pyplot = sys.modules["matplotlib.pyplot"]
    return [pyplot.figure(number) for number in pyplot.get_fignums()]


def _close_figures() -> None:
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def _compiled(source: str, name: str):
    """``(body, last expression or None)`` of a cell, compiled."""
    tree = ast.parse(source, name)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    return compile(tree, name, "exec"), (compile(last, name, "eval") if last is not None else None)


def _check_sources(notebook: dict, path: Path | str) -> None:
    """Every code cell parses as Python (no magics), before any runs."""
    for number, cell in enumerate(notebook["cells"], 1):
        if cell["cell_type"] != "code":
            continue
        try:
            ast.parse(_source(cell), f"{path} cell {number}")
        except SyntaxError as err:
            raise NotebookError(f"{path}: cell {number} is not plain Python ({err.msg}, line {err.lineno})") from None


@contextlib.contextmanager
def _display_as_a_kernel():
    """pandas' display options as in a Jupyter kernel: without IPython pandas assumes a terminal and cuts a
    wide frame's columns to its width; a kernel shows up to 20 columns, wrapped at 80 characters."""
    try:
        import pandas
    except ImportError:  # a notebook without pandas
        yield
        return
    with pandas.option_context("display.max_columns", 20, "display.width", 80):
        yield


def execute(notebook: dict, path: Path | str = "notebook", written=None) -> tuple[dict, BaseException | None]:
    """Run ``notebook``'s code cells in one namespace; the executed notebook and the error that stopped it
    (None: every cell ran). ``written(notebook)`` is called after each cell with the notebook so far."""
    _check_sources(notebook, path)
    with _display_as_a_kernel():
        return _execute(notebook, written)


def _execute(notebook: dict, written=None) -> tuple[dict, BaseException | None]:
    cells, failure, count = [dict(c) for c in notebook["cells"]], None, 0
    namespace: dict = {"__name__": "__main__"}
    stdout, stderr = _Stream("stdout"), _Stream("stderr")
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        if failure is not None:  # not run, as a kernel leaves the cells after an error
            cell.update(outputs=[], execution_count=None)
            continue
        count += 1
        ran = stdout.cell = stderr.cell = _Cell(count)
        namespace["display"] = ran.display
        source, name = _source(cell), f"<cell In[{count}]>"
        linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)  # tracebacks show it
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                body, last = _compiled(source, name)
                exec(body, namespace)
                value = eval(last, namespace) if last is not None else None
                if _ends_quietly(source):  # IPython: a trailing ";" shows nothing
                    value = None
                figures = _open_figures()
                if value is not None and not any(value is f for f in figures):
                    ran.show(value, result=True)
                for figure in figures:  # the inline backend: every figure still open is shown, then closed
                    ran.show(figure)
            except BaseException as err:  # noqa: BLE001 - recorded in the notebook, then re-raised by main
                failure = err
                ran.outputs.append(
                    {
                        "output_type": "error",
                        "ename": type(err).__name__,
                        "evalue": str(err),
                        "traceback": traceback.format_exception(err),
                    }
                )
            finally:
                _close_figures()
                stdout.cell = stderr.cell = None
        cell.update(outputs=ran.done(), execution_count=count)
        if written is not None:  # the notebook so far, in case the process dies in a later cell
            written({**notebook, "cells": cells})
    return {**notebook, "cells": cells}, failure


def _ends_quietly(source: str) -> bool:
    """Whether the cell's last line of code ends with ``;`` (comments and blank lines aside)."""
    for line in reversed(source.splitlines()):
        code = line.split("#", 1)[0].rstrip()
        if code:
            return code.endswith(";")
    return False


def write_notebook(notebook: dict, path: Path) -> None:
    """Written whole or not at all."""
    with atomic_write(path) as handle:
        handle.write(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


def read_values(path: Path) -> dict:
    try:
        values = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise NotebookError(f"{path}: not readable parameter values ({err})") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise NotebookError(f"{path}: parameter values must be a mapping of names to values")
    return values


def run(source: Path, output: Path, values: dict) -> BaseException | None:
    """``source`` executed with ``values`` into ``output`` (written even when a cell fails); the error."""
    notebook = read_notebook(source)
    _check_sources(notebook, source)  # cells numbered as in the file, before the injected one
    notebook = inject_parameters(notebook, values, source)
    executed, failure = execute(notebook, source, written=lambda so_far: write_notebook(so_far, output))
    write_notebook(executed, output)
    return failure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m longdoc.run_notebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("-f", "--parameters-file", type=Path, help="YAML values for the parameters cell")
    args = parser.parse_args(argv)
    try:
        values = read_values(args.parameters_file) if args.parameters_file else {}
        failure = run(args.source, args.output, values)
    except NotebookError as err:
        print(f"run_notebook: {err}", file=sys.stderr)
        return 2
    if failure is not None:
        print(
            f"run_notebook: {args.source} stopped: {type(failure).__name__}: {failure} "
            f"(the notebook up to the error: {args.output})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
