"""The committed records against the code and profiles that would replace them: a rerun of a profile as
its file says must find its own folder and be allowed to replace what lies there (a fresh clone's
``./run_all.sh --only 00,01`` once stopped at notebook 01 because the records were older than the
profile's newest parameters), and a run with other values must be stopped before its first notebook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.conftest import committed_records, copied_results, papermill_values

from longdoc.experiments import records
from longdoc.experiments.profiles import NOTEBOOKS_DIR, PROFILES_DIR, parameters_for
from longdoc.experiments.records import THROWAWAY_PROFILES, check_record_slot, planned_folder
from longdoc.experiments.study import Study

ROOT = Path(__file__).resolve().parents[2]


def test_the_cpu_records_are_committed():
    found = committed_records()
    assert len(found) >= 20 and {json.loads(p.read_text())["profile"] for p in found} == {"cpu"}


@pytest.mark.parametrize("path", committed_records(), ids=lambda p: "/".join(p.parts[-4:-1]))
def test_a_rerun_of_its_profile_as_written_files_into_its_folder_and_may_replace_it(path):
    record = json.loads(path.read_text())
    profile, notebook = record["profile"], record["notebook"]
    assert profile not in THROWAWAY_PROFILES
    study = Study(notebook, papermill_values(profile, notebook))  # checks the slot the data does not name
    assert planned_folder(profile, notebook, study.params, ROOT / "results") == path.parent
    line = check_record_slot(path.parent, profile, study.params, record["data_checksum"], study.profile_config)
    old = record["config"]
    names = sorted(k for k in set(old) | set(study.params) if old.get(k) != records.as_json(study.params).get(k))
    assert line is None or (f"other values of {', '.join(names)}" in line) == bool(names), line


def test_run_alls_check_names_what_a_rerun_replaces_and_stops_other_values_before_any_notebook(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(records, "RESULTS_DIR", copied_results(tmp_path))
    notebooks = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    as_written, overridden = tmp_path / "as-written", tmp_path / "overridden"
    for folder, overrides in [(as_written, None), (overridden, {"seeds": [0]})]:
        folder.mkdir()
        for notebook in notebooks:
            values = parameters_for(PROFILES_DIR / "cpu.yaml", notebook, overrides)
            (folder / f"{notebook.stem}.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    before = {p: p.read_bytes() for p in records.RESULTS_DIR.rglob("metrics.json")}

    assert records._main(["--profile", "cpu", "--notes", str(as_written), *map(str, as_written.glob("*.yaml"))]) == 0
    printed = capsys.readouterr().out.splitlines()
    replaced = {p.stem for p in as_written.glob("*.replaced")}
    assert replaced == {json.loads(p.read_text())["notebook"] for p in before}  # every record, one line each
    assert len(printed) == len(replaced) and all(": replaces " in line for line in printed)
    assert "01_baselines: replaced" in (as_written / "01_baselines.replaced").read_text()

    assert records._main(["--profile", "cpu", *map(str, overridden.glob("*.yaml"))]) == 2
    errors = capsys.readouterr().err.splitlines()
    refused = {line.split(": ")[1] for line in errors if "is the folder of the cpu profile's own records" in line}
    changed = {
        p.stem for p in overridden.glob("*.yaml") if p.read_text() != (as_written / p.name).read_text()
    }  # every notebook that declares seeds, and the ladder (its command line changed)
    assert refused == changed and {"01_baselines", "40_nci_main", "90_budget_ladder"} <= refused
    assert sum("--profile NAME" in line for line in errors) == 1  # the way out, said once
    assert {p: p.read_bytes() for p in records.RESULTS_DIR.rglob("metrics.json")} == before
