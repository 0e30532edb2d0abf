"""The notebooks' parameter defaults are the smoke profile, and every profile names known parameters."""

import ast
import json
from pathlib import Path

import pytest
import yaml

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PROFILES = Path(__file__).parents[2] / "notebooks" / "profiles"


def parameters(notebook: Path) -> dict:
    cells = json.loads(notebook.read_text())["cells"]
    cell = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)}


def test_every_notebook_has_a_parameters_cell():
    assert len(NOTEBOOKS) >= 2
    for notebook in NOTEBOOKS:
        assert parameters(notebook)["profile"] == "smoke", notebook


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_defaults_equal_the_smoke_profile(notebook):
    smoke = yaml.safe_load((PROFILES / "smoke.yaml").read_text())
    for name, value in parameters(notebook).items():
        assert smoke[name] == value, (notebook.name, name)


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
def test_profiles_only_set_parameters_some_notebook_has(profile):
    known = set().union(*(parameters(n) for n in NOTEBOOKS))
    values = yaml.safe_load((PROFILES / f"{profile}.yaml").read_text())
    assert values["profile"] == profile
    assert set(values) <= known, set(values) - known
