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
from longdoc.experiments.families.retrieval import RETRIEVAL
from longdoc.experiments.profiles import NOTEBOOKS_DIR, PROFILES_DIR, changing_values, parameters_for, profile_values
from longdoc.experiments.records import THROWAWAY_PROFILES, check_record_slot
from longdoc.experiments.study import Study

ROOT = Path(__file__).resolve().parents[2]


def test_the_cpu_records_are_committed():
    profiles = [json.loads(p.read_text())["profile"] for p in committed_records()]
    assert profiles.count("cpu") >= 20, "git ls-files lists no committed cpu record (these tests need a git checkout)"
    assert set(profiles) <= {"cpu", "gpu"}  # gpu: what a lent GPU node brought back (results/gpu/README.md)


@pytest.mark.parametrize("path", committed_records(), ids=lambda p: "/".join(p.parts[-4:-1]))
def test_a_rerun_of_its_profile_as_written_files_into_its_folder_and_may_replace_it(path):
    record = json.loads(path.read_text())
    profile, notebook = record["profile"], record["notebook"]
    assert profile not in THROWAWAY_PROFILES
    study = Study(notebook, papermill_values(profile, notebook))  # a study without data checks its slot now
    assert study.directory == path.parent  # named by the values, as the record's own run named it
    line = check_record_slot(*study._slot(record["data_checksum"]))
    old, new = record["config"], records.as_json(study.params)
    names = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    assert line is not None  # a record names the commit before the one that holds it: always "another commit"
    assert (f"other values of {', '.join(names)}" in line) == bool(names), line


def test_what_names_a_profiles_own_folder_and_what_may_write_there():
    manpages = str(ROOT / "data" / "manpages")  # the benchmark's folder read as a BEIR directory: same folder name
    nq = str(ROOT / "tests" / "fixtures" / "beir")

    def slot(notebook: str, overrides: dict, profile: str = "cpu"):
        values = papermill_values(profile, notebook, overrides)
        folder = records.record_folder(profile, notebook, values)
        return folder, lambda: check_record_slot(folder, profile, values, None, profile_values(profile, notebook))

    folder, check = slot("01_baselines", {"dataset": manpages})
    assert folder == records.RESULTS_DIR / "cpu" / "manpages" / "01_baselines"
    with pytest.raises(records.ProfileFolderError, match=r"in \['dataset'\]"):
        check()
    folder, check = slot("01_baselines", {"max_docs": 5000})  # more than the corpus: no subsample, its own folder
    assert folder.parent.name == "manpages-5000" and check() is None
    folder, check = slot("90_budget_ladder", {"datasets": {"nci": nq}}, "paper")  # a role's data names the folder
    assert folder.parent.name == "manpages+nci-beir" and check() is None
    for notebook in ("01_baselines", "90_budget_ladder"):  # the file's values, or only how the fits run
        for same in ({"dataset": "manpages"}, {"n_devices": 2}, {"seeds": [0, 1]}):
            if notebook == "90_budget_ladder" and "seeds" in same:
                continue
            folder, check = slot(notebook, same)
            assert folder.parent.name == "manpages" and check() is not None  # replaces the committed record
    with pytest.raises(records.ProfileFolderError, match=r"command_line=\['seeds'\], its file \[\]"):
        slot("90_budget_ladder", {"seeds": [0, 1, 2]})[1]()  # 21's own seeds [0, 1]: the ladder's rungs would differ


def test_a_command_line_value_is_left_out_only_where_it_changes_nothing():
    nq = str(ROOT / "tests" / "fixtures" / "beir")
    both = papermill_values("cpu", "40_nci_main", {"dataset": "manpages", "datasets": {"nci": nq}})
    assert both["dataset"] == "manpages"  # --dataset beats the role's --data, even at the profile's own value
    ladder = papermill_values("cpu", "90_budget_ladder", {"dataset": "manpages", "datasets": {"nci": nq}})
    assert ladder["command_line"] == ["dataset", "datasets"]
    entries = {"90_budget_ladder": {"datasets": {"nci": "B"}}}
    assert changing_values({"datasets": {"nci": "A"}}, entries, {"datasets": {"nci": "A"}}) == {
        "datasets": {"nci": "A"}
    }
    assert changing_values({"datasets": {"nci": "A"}}, {}, {"datasets": {"nci": "A", "matching": "M"}}) == {
        "datasets": {"matching": "M"}
    }
    assert changing_values({"seeds": [0, 1]}, {"21_x": {"seeds": [0]}}, {"seeds": [0, 1]}) == {"seeds": [0, 1]}
    assert changing_values({"seeds": [0, 1], "datasets": {}}, {}, {"seeds": [0, 1], "dataset": "x"}) == {"dataset": "x"}


def test_a_notebook_is_refused_when_it_opens_its_study_before_reading_any_data():
    overridden = papermill_values("cpu", "90_budget_ladder", {"train_steps": 5})
    with pytest.raises(records.ProfileFolderError, match=r"in \['command_line', 'train_steps'\]"):
        Study.open("90_budget_ladder", overridden, RETRIEVAL)
    assert Study.open("90_budget_ladder", papermill_values("cpu", "90_budget_ladder"), RETRIEVAL)._data is None


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
    assert len(printed) == len(replaced) and all(
        ": will replace " in line and "/results/cpu/" in line for line in printed
    )
    assert "01_baselines: replaced" in (as_written / "01_baselines.replaced").read_text()
    assert {p.read_text() for p in as_written.glob("*.folder")} == {""}  # executed notebooks where the committed are

    other = tmp_path / "other-data"  # another dataset: its own folder, its executed notebook and timing apart
    other.mkdir()
    mine = str(ROOT / "tests" / "fixtures" / "beir")
    values = parameters_for(PROFILES_DIR / "cpu.yaml", NOTEBOOKS_DIR / "01_baselines.ipynb", {"dataset": mine})
    (other / "01_baselines.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    assert records._main(["--profile", "cpu", "--notes", str(other), str(other / "01_baselines.yaml")]) == 0
    assert (other / "01_baselines.folder").read_text() == "beir" and not list(other.glob("*.replaced"))

    assert records._main(["--profile", "cpu", *map(str, overridden.glob("*.yaml"))]) == 2
    errors = capsys.readouterr().err.splitlines()
    refused = {line.split(": ")[1] for line in errors if "is the folder of the cpu profile's own records" in line}
    changed = {
        p.stem for p in overridden.glob("*.yaml") if p.read_text() != (as_written / p.name).read_text()
    }  # every notebook that declares seeds, and the ladder (its command line changed)
    assert refused == changed and {"01_baselines", "40_nci_main", "90_budget_ladder"} <= refused
    assert sum("--profile NAME" in line for line in errors) == 1  # the way out, said once
    assert {p: p.read_bytes() for p in records.RESULTS_DIR.rglob("metrics.json")} == before
