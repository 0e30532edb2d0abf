"""A fresh clone's first run of a training notebook of each family under the ``cpu`` profile, as
``run_all.sh`` gives it its values, over a copy of the committed records: its first cells (the study
opened, its data read, its record's folder checked) run, it stops before training, and its record (of
no rows) replaces the committed one; with another value it stops in those cells. Before the fix,
notebook 01 of a fresh clone stopped here: its committed record was older than the profile's newest
parameters, and the check took the project's own record for another configuration's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import copied_results, papermill_values

from longdoc.experiments import records, study
from longdoc.experiments.records import ProfileFolderError

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
FIRST_OF_EACH_FAMILY = ["01_baselines", "30_smith_main", "40_nci_main"]  # retrieval, matching, generative


def run_until_the_study_opens(notebook: str, values: dict) -> dict:
    """Run the notebook's code cells after its parameters cell (papermill's place for the values), up to
    and including the one that opens the study; the namespace they left."""
    namespace = dict(values)
    for cell in json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]:
        if cell["cell_type"] != "code" or "parameters" in cell["metadata"].get("tags", []):
            continue
        source = "".join(cell["source"])
        exec(compile(source, f"{notebook}.ipynb", "exec"), namespace)
        if "Study.open(" in source:
            return namespace
    raise AssertionError(f"{notebook} never opens a study")


@pytest.mark.parametrize("notebook", FIRST_OF_EACH_FAMILY)
def test_a_fresh_clone_gets_past_the_record_check_of_each_family(notebook, isolated_outputs, monkeypatch, capsys):
    results = copied_results(isolated_outputs)
    monkeypatch.setattr(records, "RESULTS_DIR", results)
    monkeypatch.setattr(study, "RESULTS_DIR", results)
    committed = next(results.glob(f"cpu/*/{notebook}/metrics.json"))
    before = committed.read_bytes()
    values = papermill_values("cpu", notebook)

    opened = run_until_the_study_opens(notebook, values)["study"]  # reads its data: the record's folder checked
    assert opened.directory / "metrics.json" == committed and committed.read_bytes() == before
    old = json.loads(before)["config"]
    differing = sorted(k for k in set(old) | set(opened.params) if old.get(k) != opened.params.get(k))
    capsys.readouterr()
    opened.record()  # what the notebook's last cell does once it has trained: the committed record is replaced
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{notebook}: replaced {committed}, a record of commit ")
    assert ("other values of " + ", ".join(differing) in line) == bool(differing), line
    assert json.loads(committed.read_text())["config"] == opened.params

    overridden = papermill_values("cpu", notebook, {"seeds": [5]})
    with pytest.raises(ProfileFolderError, match=r"own records.* in \['seeds'\]"):
        run_until_the_study_opens(notebook, overridden)
