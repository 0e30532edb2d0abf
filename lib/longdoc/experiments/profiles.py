"""Profiles (``notebooks/profiles/<name>.yaml``) hold the parameters of every notebook; each notebook
receives only the ones its ``parameters`` cell declares (``python -m longdoc.experiments.profiles``
writes them for papermill's ``-f``). An optional ``notebooks:`` mapping gives values for one notebook
only (``{notebook stem: {parameter: value}}``), over the profile's shared ones."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import yaml


def notebook_parameters(notebook: str | Path) -> dict:
    """The defaults of a notebook's cell tagged ``parameters`` (literal assignments only)."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise ValueError(f"{notebook} has no cell tagged 'parameters'")
    tree = ast.parse("".join(cell["source"]))
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)}


def notebook_parameter_names(notebook: str | Path) -> list[str]:
    return list(notebook_parameters(notebook))


def parameters_for(profile: str | Path, notebook: str | Path) -> dict:
    values = yaml.safe_load(Path(profile).read_text())
    names = notebook_parameter_names(notebook)
    own = (values.pop("notebooks", None) or {}).get(Path(notebook).stem, {})
    unknown = sorted(set(own) - set(names))
    if unknown:
        raise KeyError(f"profile {profile} sets {unknown} for {Path(notebook).name}, which does not declare them")
    values.update(own)
    missing = [n for n in names if n not in values]
    if missing:
        raise KeyError(f"profile {profile} does not set {missing}, which {Path(notebook).name} declares")
    return {n: values[n] for n in names}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m longdoc.experiments.profiles PROFILE.yaml NOTEBOOK.ipynb")
    yaml.safe_dump(parameters_for(sys.argv[1], sys.argv[2]), sys.stdout, sort_keys=False)
