"""One name per concept: every notebook parameter and profile key is in the glossary, with checked values."""

from pathlib import Path

import pytest

from longdoc.experiments.parameters import PARAMETERS, check_parameters
from longdoc.experiments.profiles import ProfileError, load_profile, notebook_parameters, parameters_for

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_parameter_is_a_known_concept(notebook):
    assert set(notebook_parameters(notebook)) <= set(PARAMETERS)


def test_values_are_checked_and_named():
    assert check_parameters({"learning_rates": [1, 2e-5], "batch_size": 4}) == {
        "learning_rates": [1.0, 2e-5],
        "batch_size": 4,
    }
    for bad, message in [
        ({"batch_size": True}, "batch_size=True"),
        ({"learning_rates": ["a"]}, r"learning_rates\[0\]"),
        ({"mlm_ratio": 1.5}, "mlm_ratio=1.5"),
        ({"segment_length": 64}, "unknown parameter"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_parameters(bad)


def write_profile(tmp_path, text):
    notebooks = tmp_path / "notebooks"
    (notebooks / "profiles").mkdir(parents=True)
    for notebook in NOTEBOOKS:
        (notebooks / notebook.name).write_text(notebook.read_text())
    path = notebooks / "profiles" / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("batch_sise: 4\n", "batch_sise"),
        ("batch_size: 4\nbatch_size: 5\n", "duplicate key 'batch_size'"),
        ("batch_size: four\n", "batch_size='four'"),
        ("notebooks:\n  10_longtriever_mian: {batch_size: 4}\n", "10_longtriever_mian"),
        ("notebooks:\n  10_longtriever_main: {learning_rate: 1.0e-4}\n", "learning_rate"),
        ("batch_size: [4\n", "p.yaml"),
        ("", "the profile is empty"),
        ("- 4\n", "expected a mapping"),
    ],
)
def test_a_bad_profile_names_its_file_and_the_problem(tmp_path, text, message):
    with pytest.raises(ProfileError, match=message):
        load_profile(write_profile(tmp_path, text))


def test_the_block_size_of_one_notebook_can_differ(tmp_path):
    profile = load_profile(ROOT / "notebooks" / "profiles" / "cpu.yaml")
    efficiency = parameters_for(
        ROOT / "notebooks" / "profiles" / "cpu.yaml", ROOT / "notebooks" / "14_efficiency.ipynb"
    )
    assert efficiency["block_size"] == profile["notebooks"]["14_efficiency"]["block_size"] != profile["block_size"]
