"""The notebooks' parameter defaults are the smoke profile, and every profile names known parameters."""

from pathlib import Path

import pytest
import yaml

from longdoc.experiments.profiles import ACCELERATOR, OUTSIDE, ProfileError, outside_the_study, parameters_for
from longdoc.experiments.profiles import notebook_parameters as parameters

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PROFILES = Path(__file__).parents[2] / "notebooks" / "profiles"


def test_every_notebook_has_a_parameters_cell():
    assert len(NOTEBOOKS) >= 2
    for notebook in NOTEBOOKS:
        assert parameters(notebook)["profile"] == "smoke", notebook


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_defaults_equal_the_smoke_profile(notebook):
    smoke = yaml.safe_load((PROFILES / "smoke.yaml").read_text())
    for name, value in parameters(notebook).items():
        expected = [] if name == "command_line" else smoke[name]  # command_line: set by run_all.sh, in no profile
        assert value == expected, (notebook.name, name)


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu", "paper"])
def test_profiles_only_set_parameters_some_notebook_has(profile):
    known = set().union(*(parameters(n) for n in NOTEBOOKS))
    values = yaml.safe_load((PROFILES / f"{profile}.yaml").read_text())
    assert values["profile"] == profile
    per_notebook = values.pop("notebooks", None) or {}
    assert set(per_notebook) <= {n.stem for n in NOTEBOOKS}, set(per_notebook)
    assert set(values.pop(OUTSIDE, None) or []) <= {n.stem for n in NOTEBOOKS}
    assert values.pop(ACCELERATOR, "cpu") in ("cpu", "gpu")  # what the profile is sized for, no notebook's
    assert set(values) <= known, set(values) - known


def _profile_copy(tmp_path, profile: str = "smoke") -> tuple[Path, dict]:
    """The notebooks and one profile's values, copied under ``tmp_path`` (a profile file is checked against
    the notebooks beside its folder)."""
    profiles = tmp_path / "notebooks" / "profiles"
    profiles.mkdir(parents=True)
    for notebook in NOTEBOOKS:
        (tmp_path / "notebooks" / notebook.name).write_text(notebook.read_text())
    return profiles / f"{profile}.yaml", yaml.safe_load((PROFILES / f"{profile}.yaml").read_text())


def test_a_profile_names_the_notebooks_its_study_leaves_out_and_each_must_exist(tmp_path):
    path, values = _profile_copy(tmp_path)
    path.write_text(yaml.safe_dump(values))
    assert outside_the_study(path) == []
    values[OUTSIDE] = [NOTEBOOKS[-1].stem]
    path.write_text(yaml.safe_dump(values))
    assert outside_the_study(path) == [NOTEBOOKS[-1].stem]
    assert OUTSIDE not in parameters_for(path, NOTEBOOKS[-1])  # a list for run_all.sh, no notebook's parameter
    for wrong, said in (
        (["99_no_such_notebook"], "are not notebooks"),
        (NOTEBOOKS[-1].stem, "expected a list of notebook names"),
        ([NOTEBOOKS[-1].stem] * 2, "named twice"),
    ):
        values[OUTSIDE] = wrong
        path.write_text(yaml.safe_dump(values))
        with pytest.raises(ProfileError, match=said):
            outside_the_study(path)


def test_the_cpu_study_leaves_out_only_notebooks_whose_every_row_runs_one_seed():
    """The reason ``cpu.yaml`` gives for its ``outside_the_study``: those notebooks run one seed, so no claim
    of theirs can be tested there; the 7-hour limit is the rest's."""
    left_out = outside_the_study(PROFILES / "cpu.yaml")
    assert left_out
    for stem in left_out:
        assert parameters_for(PROFILES / "cpu.yaml", NOTEBOOKS[0].parent / f"{stem}.ipynb")["seeds"] == [0], stem


def test_a_notebook_value_overrides_the_shared_one(tmp_path):
    profiles = tmp_path / "notebooks" / "profiles"
    profiles.mkdir(parents=True)
    for notebook in NOTEBOOKS:
        (tmp_path / "notebooks" / notebook.name).write_text(notebook.read_text())
    notebook = next(n for n in NOTEBOOKS if "batch_size" in parameters(n))
    profile = yaml.safe_load((PROFILES / "smoke.yaml").read_text())
    profile["notebooks"] = {notebook.stem: {"batch_size": 7}}
    (profiles / "smoke.yaml").write_text(yaml.safe_dump(profile))
    assert parameters_for(profiles / "smoke.yaml", notebook)["batch_size"] == 7
    other = next(n for n in NOTEBOOKS if n != notebook and "batch_size" in parameters(n))
    assert parameters_for(profiles / "smoke.yaml", other)["batch_size"] == profile["batch_size"]
    profile["notebooks"] = {notebook.stem: {"bench_batch": 1}}
    (profiles / "smoke.yaml").write_text(yaml.safe_dump(profile))
    with pytest.raises(ValueError, match="bench_batch"):
        parameters_for(profiles / "smoke.yaml", notebook)


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_profile_sets_every_parameter_of_every_notebook(profile, notebook):
    values = parameters_for(PROFILES / f"{profile}.yaml", notebook)
    assert set(values) == set(parameters(notebook))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_parses_every_parameter_line(notebook, caplog):
    """papermill's own parser sees every parameter with its default (a comment holding '=' hid lines
    from it, with an "Unable to parse line" warning) and every profile sets exactly those names."""
    import logging

    import papermill

    with caplog.at_level(logging.WARNING, logger="papermill"):
        inspected = papermill.inspect_notebook(str(notebook))
    assert not [r for r in caplog.records if "Unable to parse" in r.getMessage()]
    defaults = parameters(notebook)
    assert list(inspected) == list(defaults)
    assert {name: eval(spec["default"]) for name, spec in inspected.items()} == defaults
    for profile in ("smoke", "cpu", "paper"):
        assert set(parameters_for(PROFILES / f"{profile}.yaml", notebook)) == set(inspected)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_accepts_the_gpu_profile(notebook):
    """The one-GPU profile: every notebook gets checked values (and every rule between them holds); its
    fine-tuning and NCI budgets are ceilings, each run stopping at its dev plateau."""
    values = parameters_for(PROFILES / "gpu.yaml", notebook)
    assert values["profile"] == "gpu"
    if "train_steps" in values:
        assert values["patience"] > 0 and values["dev_evals"] > values["patience"] and values["precision"] == "bf16"
    if "nci_train_steps" in values:
        assert values["nci_patience"] > 0 and values["max_docs"] == 0  # NCI on all 1,100 documents
    if "seeds" in values:  # two runs a side at least for every claim (the main tables three)
        assert len(values["seeds"]) >= 2
