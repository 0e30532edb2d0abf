"""The kernel-free notebook runner (``python -m longdoc.run_notebook``): papermill's parameter cell, a
kernel's outputs, errors kept in the executed notebook; and under ``smoke`` the same record and outputs
as papermill for notebook 00 and a training notebook (SMITH's length sweep)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from longdoc import run_notebook
from longdoc.run_notebook import NotebookError, execute, inject_parameters

ROOT = Path(__file__).resolve().parents[1]
PROVENANCE = {"code_fingerprint", "versions", "usage", "machine"}  # where and with what a record was made


def notebook(*sources: str, parameters: str = "a = 1\n") -> dict:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# a notebook"}]
    cells.append({"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": parameters, "outputs": []})
    cells += [
        {"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None} for s in sources
    ]
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}


def code_cells(executed: dict) -> list[dict]:
    return [c for c in executed["cells"] if c["cell_type"] == "code"]


def test_values_go_into_a_tagged_cell_after_the_parameters_cell_and_replace_an_earlier_one():
    values = {"a": 2, "name": 'it\'s "x"', "rates": [1e-4, 5e-5], "roles": {"nci": "data/nq", 1: [True]}, "off": None}
    once = inject_parameters(notebook("b = a + 1"), {"a": 9})
    twice = inject_parameters(once, values)
    tags = [c["metadata"].get("tags", []) for c in twice["cells"]]
    assert tags == [[], ["parameters"], ["injected-parameters"], []]
    namespace: dict = {}
    exec(twice["cells"][2]["source"], namespace)
    assert {k: namespace[k] for k in values} == values
    executed, failure = execute(twice)
    assert failure is None and code_cells(executed)[-1]["execution_count"] == 3
    assert twice["cells"][2]["id"] == "injected-parameters"  # nbformat 4.5 cells carry ids


def test_a_value_python_cannot_write_back_is_named_and_infinities_survive():
    import datetime
    import math

    injected = inject_parameters(notebook(), {"big": float("inf"), "gap": float("nan")})
    namespace: dict = {}
    exec(injected["cells"][2]["source"], namespace)
    assert namespace["big"] == float("inf") and math.isnan(namespace["gap"])
    with pytest.raises(NotebookError, match=r"v.yaml: parameter 'when' is a date .*quote a date"):
        inject_parameters(notebook(), {"when": datetime.date(2024, 1, 1)}, "v.yaml")


def test_a_notebook_without_a_parameters_cell_is_refused():
    plain = notebook("x = 1")
    plain["cells"][1]["metadata"] = {}
    with pytest.raises(NotebookError, match="no cell tagged 'parameters'"):
        inject_parameters(plain, {"a": 1}, "nb.ipynb")


def test_outputs_are_a_kernels_prints_values_displays_and_open_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    executed, failure = execute(
        notebook(
            "print('one'); print('two')",
            "import pandas as pd\npd.DataFrame({'x': [1, 2]})",
            "class Note:\n    def _repr_markdown_(self):\n        return '**bold**'\ndisplay(Note(), 3)",
            "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nfig",
            "figure = plt.figure()\nNone",
            "x = 1",
            "import logging, sys\nlog = logging.getLogger('t')\nlog.addHandler(logging.StreamHandler(sys.stderr))",
            "log.warning('late')\n2 + 2;  # quiet",
        )
    )
    assert failure is None
    outputs = [c["outputs"] for c in code_cells(executed)[1:]]
    printed, frame, shown, returned, left_open, silent, handler, logged = outputs
    assert handler == [] and logged == [{"output_type": "stream", "name": "stderr", "text": "late\n"}]
    assert printed == [{"output_type": "stream", "name": "stdout", "text": "one\ntwo\n"}]
    (result,) = frame
    assert result["output_type"] == "execute_result" and result["execution_count"] == 3
    assert "<table" in result["data"]["text/html"] and "x" in result["data"]["text/plain"]
    assert [o["data"].get("text/markdown") for o in shown] == ["**bold**", None]
    assert [o["data"]["text/plain"] for o in shown][1] == "3"
    assert len(returned) == 1 and returned[0]["output_type"] == "display_data"  # the figure, once
    assert "image/png" in returned[0]["data"] and "image/png" in left_open[0]["data"]
    assert silent == [] and plt.get_fignums() == []  # every figure closed after its cell


def test_the_notebook_is_written_after_each_cell(tmp_path):
    source = tmp_path / "dies.ipynb"
    source.write_text(json.dumps(notebook("print('kept')", "import os\nos._exit(3)")))
    output = tmp_path / "out.ipynb"
    died = subprocess.run([sys.executable, "-m", "longdoc.run_notebook", str(source), str(output)], check=False)
    assert died.returncode == 3
    cells = code_cells(json.loads(output.read_text()))
    assert cells[2]["outputs"][0]["text"] == "kept\n" and cells[3]["execution_count"] is None


def test_an_error_stays_in_the_executed_notebook_and_later_cells_do_not_run(tmp_path):
    source = tmp_path / "failing.ipynb"
    source.write_text(json.dumps(notebook("print('before')", "1 / 0", "print('after')")))
    values = tmp_path / "values.yaml"
    values.write_text("a: 5\n")
    output = tmp_path / "out.ipynb"
    assert run_notebook.main([str(source), str(output), "-f", str(values)]) == 1
    cells = code_cells(json.loads(output.read_text()))
    assert cells[1]["source"].endswith("a = 5\n")
    assert cells[2]["outputs"][0]["text"] == "before\n"
    (error,) = cells[3]["outputs"]
    assert error["output_type"] == "error" and error["ename"] == "ZeroDivisionError"
    assert "1 / 0" in "".join(error["traceback"])  # the cell's line in the traceback
    assert cells[4]["execution_count"] is None and cells[4]["outputs"] == []


def test_a_magic_or_unreadable_input_is_refused_before_any_cell_runs(tmp_path, capsys):
    marker = tmp_path / "ran"
    source = tmp_path / "magic.ipynb"
    source.write_text(json.dumps(notebook(f"open({str(marker)!r}, 'w').close()", "%time x = 1")))
    assert run_notebook.main([str(source), str(tmp_path / "out.ipynb")]) == 2
    assert "cell 4 is not plain Python" in capsys.readouterr().err and not marker.exists()
    values = tmp_path / "values.yaml"
    values.write_text("- a list\n")
    assert run_notebook.main([str(source), str(tmp_path / "out.ipynb"), "-f", str(values)]) == 2
    assert f"{values}: parameter values must be a mapping" in capsys.readouterr().err
    (tmp_path / "broken.ipynb").write_text("{")
    assert run_notebook.main([str(tmp_path / "broken.ipynb"), str(tmp_path / "out.ipynb")]) == 2
    assert "broken.ipynb: not a readable notebook" in capsys.readouterr().err


def _texts(executed: dict) -> list[list[tuple]]:
    """Each code cell's outputs as a reader compares them: kind, MIME types and text."""
    join = lambda text: "".join(text) if isinstance(text, list) else text  # noqa: E731
    return [
        [
            (
                o["output_type"],
                sorted(o.get("data", {})),
                join(o.get("text") or o.get("data", {}).get("text/plain", "")),
            )
            for o in cell["outputs"]
            if o.get("name") != "stderr"  # progress and warnings
        ]
        for cell in code_cells(executed)
    ]


@pytest.mark.parametrize("name", ["00_data", "31_smith_length"])
def test_both_ways_give_the_same_record_and_outputs_under_smoke(name, tmp_path):
    """As ``run_all.sh`` runs them: papermill in a kernel, and this runner without one, each from an empty
    cache; records equal apart from provenance, and every cell's outputs equal (figures aside). The
    notebook writes its record into the checkout's ``results/smoke`` (ignored by git, nbval's too): it is
    removed before each run, so each way must write its own."""
    pytest.importorskip("papermill")
    values = tmp_path / f"{name}.yaml"
    profiles = [sys.executable, "-m", "longdoc.experiments.profiles", "notebooks/profiles/smoke.yaml"]
    values.write_text(
        subprocess.run(
            [*profiles, f"notebooks/{name}.ipynb"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0", "LONGDOC_PROGRESS": "final"}
    record_of = {}
    executed = {}
    for way, command in {
        "papermill": [sys.executable, "-m", "papermill", "-k", "python3", "--log-level", "WARNING", "-f"],
        "in-process": [sys.executable, "-m", "longdoc.run_notebook", "-f"],
    }.items():
        output = tmp_path / f"{way}.ipynb"
        env_way = {**env, "LONGDOC_CACHE": str(tmp_path / f"cache-{way}")}
        if way == "in-process":
            env_way["MPLBACKEND"] = "Agg"
        else:
            env_way.pop("MPLBACKEND", None)
        for old in (ROOT / "results" / "smoke").glob(f"*/{name}/metrics.json"):
            old.unlink()
        subprocess.run(
            [*command, str(values), f"notebooks/{name}.ipynb", str(output)], cwd=ROOT, env=env_way, check=True
        )
        (record,) = (ROOT / "results" / "smoke").glob(f"*/{name}/metrics.json")
        record_of[way] = {k: v for k, v in json.loads(record.read_text()).items() if k not in PROVENANCE}
        executed[way] = _texts(json.loads(output.read_text()))
    assert record_of["in-process"] == record_of["papermill"]
    assert executed["in-process"] == executed["papermill"]
    assert yaml.safe_load(values.read_text())["profile"] == "smoke"
