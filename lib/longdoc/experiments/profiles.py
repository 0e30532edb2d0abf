"""Profiles (``notebooks/profiles/<name>.yaml``) hold the parameters of every notebook; each notebook
receives only the ones its ``parameters`` cell declares (``python -m longdoc.experiments.profiles``
writes them for papermill's ``-f``). An optional ``notebooks:`` mapping gives values for one notebook
only (``{notebook stem: {parameter: value}}``), over the profile's shared ones. Every name must be a
parameter of :mod:`longdoc.experiments.parameters`, and every value passes its check, before any
notebook starts.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import yaml

from longdoc.experiments.parameters import check_parameters


class ProfileError(ValueError):
    pass


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


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML with duplicate keys rejected (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ProfileError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_profile(profile: str | Path) -> dict:
    """The profile's mapping, checked: known parameter names, valid values, known notebooks."""
    path = Path(profile)
    try:
        values = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except (yaml.YAMLError, ProfileError) as err:
        raise ProfileError(f"{path}: {err}") from None
    if not isinstance(values, dict):
        raise ProfileError(f"{path}: expected a mapping of parameter names to values")
    per_notebook = values.pop("notebooks", None) or {}
    try:
        check_parameters(values)
        for name, own in per_notebook.items():
            if not isinstance(own, dict):
                raise ValueError(f"notebooks.{name}: expected a mapping of parameter names to values")
            check_parameters(own)
    except ValueError as err:
        raise ProfileError(f"{path}: {err}") from None
    notebooks = {p.stem for p in (path.parent.parent).glob("[0-9][0-9]_*.ipynb")}
    unknown = sorted(set(per_notebook) - notebooks) if notebooks else []
    if unknown:
        raise ProfileError(f"{path}: notebooks: {unknown} are not notebooks of {path.parent.parent}")
    return {**values, "notebooks": per_notebook}


def parameters_for(profile: str | Path, notebook: str | Path) -> dict:
    values = load_profile(profile)
    names = notebook_parameter_names(notebook)
    own = values.pop("notebooks").get(Path(notebook).stem, {})
    unknown = sorted(set(own) - set(names))
    if unknown:
        raise ProfileError(f"profile {profile} sets {unknown} for {Path(notebook).name}, which does not declare them")
    values.update(own)
    missing = [n for n in names if n not in values]
    if missing:
        raise ProfileError(f"profile {profile} does not set {missing}, which {Path(notebook).name} declares")
    return {n: values[n] for n in names}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m longdoc.experiments.profiles PROFILE.yaml NOTEBOOK.ipynb")
    try:
        yaml.safe_dump(parameters_for(sys.argv[1], sys.argv[2]), sys.stdout, sort_keys=False)
    except (ProfileError, ValueError, OSError) as err:
        sys.exit(f"profile error: {err}")
