"""Profiles (``notebooks/profiles/<name>.yaml``) hold the parameters of every notebook; each notebook
receives only the ones its ``parameters`` cell declares (``python -m longdoc.experiments.profiles``
writes them for papermill's ``-f``). An optional ``notebooks:`` mapping gives values for one notebook
only (``{notebook stem: {parameter: value}}``), over the profile's shared ones. An optional
``outside_the_study:`` list names notebooks that a run without ``--only`` leaves out (the profile's
study, and its time limit, is the rest); ``--only`` runs them. ``accelerator: gpu`` says the profile is sized
for GPUs: ``run_all.sh`` stops before any work where torch sees none (``--allow-cpu`` runs it anyway). Every name must be a parameter of
:mod:`longdoc.experiments.parameters`, and every value passes its check, before any notebook starts.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import yaml

from longdoc.data.errors import bounded, shown
from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.parameters import check_combinations, check_parameters

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PROFILES_DIR = NOTEBOOKS_DIR / "profiles"  # the profiles run_all.sh --profile NAME reads


class ProfileError(ValueError):
    pass


COMMAND_LINE_ONLY = "which the profiles tool sets to the names given on run_all.sh's command line"
OUTSIDE = "outside_the_study"  # notebooks a run without --only leaves out (a list of notebook stems)
ACCELERATOR = "accelerator"  # what the profile is sized for: "gpu" (run_all.sh stops without one) or "cpu"
ACCELERATORS = ("cpu", "gpu")


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


class ProfileLoader(yaml.SafeLoader):
    """YAML with the 1.2 core schema's scalars, and duplicate keys refused. PyYAML reads YAML 1.1, where
    ``010`` is 8, ``1:30`` is 90, ``1_000`` is 1000, ``yes`` is True and ``1e-4`` a string; here ``010`` is
    10, ``0o10`` is 8, ``1e-4`` is a float, and the other forms stay strings (the parameter check names
    them). PyYAML also keeps the last of two equal keys silently. A merge key (``<<: *defaults``) merges
    as YAML defines it: the mapping's own keys win."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # ``<<: *defaults``: merged below, where the mapping's own keys win (YAML's merge key)
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise ProfileError(
                    f"a key must be a name, got a {type(key).__name__} (line {key_node.start_mark.line + 1})"
                )
            if key in seen:
                raise ProfileError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            seen.add(key)
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
        return super().construct_mapping(node, deep)

    def construct_core_int(self, node) -> int:
        text = self._core_scalar(node, "int")
        base = {"0o": 8, "0x": 16}.get(text[:2], 10)
        return int(text[2:] if base != 10 else text, base)

    def construct_core_float(self, node) -> float:
        text = self._core_scalar(node, "float").lower()
        return float(text.replace(".inf", "inf").replace(".nan", "nan"))

    def _core_scalar(self, node, kind: str) -> str:
        """The scalar's text when it has the core schema's form for ``kind`` (an explicit ``!!int 1_0``
        or ``!!float ١٢`` would otherwise reach Python's more lenient int and float)."""
        text = self.construct_scalar(node)
        pattern = _CORE_SCALARS[f"tag:yaml.org,2002:{kind}"][0]
        if kind == "float":
            pattern = f"{pattern}|{_CORE_SCALARS['tag:yaml.org,2002:int'][0]}"
        if not re.fullmatch(pattern, text):
            raise ProfileError(f"{shown(text)} is not a YAML 1.2 {kind} (line {node.start_mark.line + 1})")
        if len(text) > 40:  # no count or rate of this study has 40 digits (Python refuses 4,300)
            raise ProfileError(f"{shown(text)}: a number of {len(text)} characters (line {node.start_mark.line + 1})")
        return text


_CORE_SCALARS = {  # YAML 1.2.2, section 10.3.2 (the core schema's tag resolution)
    "tag:yaml.org,2002:bool": (r"true|True|TRUE|false|False|FALSE", "tTfF"),
    "tag:yaml.org,2002:int": (r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    "tag:yaml.org,2002:float": (
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
}
_YAML_1_1_ONLY = ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")  # 2024-01-01 a date, = a value
ProfileLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in _CORE_SCALARS and tag not in _YAML_1_1_ONLY]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, (_pattern, _first) in _CORE_SCALARS.items():
    ProfileLoader.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), list(_first))
ProfileLoader.add_constructor("tag:yaml.org,2002:int", ProfileLoader.construct_core_int)
ProfileLoader.add_constructor("tag:yaml.org,2002:float", ProfileLoader.construct_core_float)


def read_yaml(text_or_stream):
    """A profile's (or a ``--set`` value's) YAML under :class:`ProfileLoader`."""
    return yaml.load(text_or_stream, Loader=ProfileLoader)


def load_profile(profile: str | Path) -> dict:
    """The profile's mapping, checked: known parameter names, valid values, known notebooks, and every
    top-level name declared by some notebook. ``profile`` is the file's stem (results and figures go
    to folders of that name); a ``profile:`` key, if present, must agree."""
    path = Path(profile)
    try:
        with open(path, encoding="utf-8") as stream:  # a stream: YAML errors then name the file
            values = read_yaml(stream)
    except OSError as err:
        raise ProfileError(f"{path}: cannot read the profile ({err.strerror})") from None
    except (yaml.YAMLError, ValueError) as err:  # a ProfileError, undecodable bytes, an int of 5,000 digits
        raise ProfileError(f"{path}: {bounded(str(err))}") from None
    if values is None:
        raise ProfileError(f"{path}: the profile is empty")
    if not isinstance(values, dict):
        raise ProfileError(f"{path}: expected a mapping of parameter names to values, got {type(values).__name__}")
    if values.get("profile", path.stem) != path.stem:
        raise ProfileError(
            f"{path}: profile: {values['profile']!r} differs from the file's name {path.stem!r} "
            "(results go to results/<file name>/)"
        )
    values["profile"] = path.stem
    if "command_line" in values:
        raise ProfileError(f"{path}: sets command_line, {COMMAND_LINE_ONLY}")
    outside = values.pop(OUTSIDE, None)
    if outside is None:
        outside = []
    if not isinstance(outside, list) or not all(isinstance(n, str) for n in outside):
        raise ProfileError(f"{path}: {OUTSIDE}: expected a list of notebook names, got {shown(outside)}")
    if len(set(outside)) < len(outside):
        raise ProfileError(f"{path}: {OUTSIDE}: a notebook is named twice ({shown(outside)})")
    accelerator = values.pop(ACCELERATOR, "cpu")
    if accelerator not in ACCELERATORS:
        raise ProfileError(f"{path}: {ACCELERATOR}: expected one of {list(ACCELERATORS)}, got {shown(accelerator)}")
    per_notebook = values.pop("notebooks", None)
    if per_notebook is None:
        per_notebook = {}
    if not isinstance(per_notebook, dict):
        raise ProfileError(
            f"{path}: notebooks: expected a mapping of notebook names to values, got {shown(per_notebook)}"
        )
    try:
        check_parameters(values)
        for name, own in per_notebook.items():
            if not isinstance(own, dict):
                raise ValueError(f"notebooks.{name}: expected a mapping of parameter names to values")
            if "profile" in own:
                raise ValueError(f"notebooks.{name}: sets profile, the file's name (results are filed under it)")
            if "command_line" in own:
                raise ValueError(f"notebooks.{name}: sets command_line, {COMMAND_LINE_ONLY}")
            check_parameters(own)
    except ValueError as err:
        raise ProfileError(f"{path}: {err}") from None
    declared = {p.stem: set(notebook_parameter_names(p)) for p in (path.parent.parent).glob("[0-9][0-9]_*.ipynb")}
    if declared:
        for key, names in (("notebooks", per_notebook), (OUTSIDE, outside)):
            unknown = sorted(set(names) - set(declared))
            if unknown:
                raise ProfileError(
                    f"{path}: {key}: {unknown} are not notebooks of {path.parent.parent} (they are {sorted(declared)})"
                )
        unused = sorted(set(values) - set().union(*declared.values()))
        if unused:
            raise ProfileError(f"{path}: {unused} set but declared by no notebook")
        for name, own in per_notebook.items():
            undeclared = sorted(set(own) - declared[name])
            if undeclared:
                raise ProfileError(f"{path}: notebooks.{name} sets {undeclared}, which {name} does not declare")
    return {**values, "notebooks": per_notebook, OUTSIDE: outside, ACCELERATOR: accelerator}


def outside_the_study(profile: str | Path) -> list[str]:
    """The notebooks (stems) the profile's study leaves out: a run without ``--only`` skips them, and the
    study's time limit does not count them ([] for a profile that names none, or no profile file)."""
    path = Path(profile) if Path(profile).suffix else PROFILES_DIR / f"{profile}.yaml"
    return load_profile(path)[OUTSIDE] if path.is_file() else []


# by the notebook number's first digit, or its two digits (50-51: the start built here, one of each)
ROLES = {"retrieval": ("0", "1", "2", "50"), "matching": ("3", "51"), "nci": ("4",)}
PRETRAINING = "pretraining"  # the role of the pre-training corpus (Longtriever: BookCorpus + Wikipedia), read by
# every notebook that declares pretrain_corpus


def dataset_role(notebook: str | Path) -> str | None:
    """The kind of dataset a notebook reads (``ROLES``); None for one that reads several (the ladder, 90)."""
    stem = Path(notebook).stem
    number = stem[:2] if any(stem[:2] in prefixes for prefixes in ROLES.values()) else stem[:1]
    return next((role for role, prefixes in ROLES.items() if number in prefixes), None)


def role_problem(role: str, dataset: str) -> str | None:
    """What a dataset directory lacks for ``role`` (matching: pairs; retrieval and NCI: judgements); None when
    it looks right, or when it is the embedded benchmark or not a directory (then loading names the error)."""
    directory = Path(dataset)
    if dataset == "manpages" or not directory.is_dir():
        return None
    needed = ["pairs/train.tsv", "pairs/dev.tsv", "pairs/test.tsv"] if role == "matching" else ["qrels"]
    missing = [name for name in needed if not (directory / name).exists()]
    if missing:
        return f"{dataset} has no {', '.join(missing)}"
    return None


def parameters_for(profile: str | Path, notebook: str | Path, overrides: dict | None = None) -> dict:
    """The values of ``notebook``'s parameters under ``profile``, then ``overrides`` (checked; e.g.
    ``run_all.sh --dataset DIR --backbone NAME``). ``dataset`` comes from, first to last: the command line,
    the notebook's own entry, the dataset of the notebook's role (``datasets``: the profile's, updated by
    the command line's), the profile's; a dataset that lacks what its role needs is refused here. Overrides
    that change nothing are left out (:func:`changing_values`). A notebook that declares ``command_line``
    gets the names of the others (the budget ladder: see
    :func:`~longdoc.experiments.papers.ladder.rung_parameters`)."""
    values = load_profile(profile)
    names = notebook_parameter_names(notebook)
    entries = values.pop("notebooks")
    values.pop(OUTSIDE)
    values.pop(ACCELERATOR)
    own = entries.get(Path(notebook).stem, {})
    if "profile" in (overrides or {}):
        raise ProfileError(
            f"command line: profile={shown(overrides['profile'])} cannot be set: it is the profile "
            "file's name, where results are filed (choose the profile with --profile NAME)"
        )
    if "command_line" in (overrides or {}):
        raise ProfileError(f"command line: command_line cannot be set: it is the list {COMMAND_LINE_ONLY}")
    try:
        command_line = changing_values(values, entries, check_parameters(overrides or {}))
    except ValueError as err:
        raise ProfileError(f"command line: {err}") from None
    set_names = sorted(command_line)
    values.update(own)
    roles = {**values.get("datasets", {}), **command_line.pop("datasets", {})}
    values.update(command_line)
    values["datasets"] = roles
    role = dataset_role(notebook)
    if role in roles and "dataset" not in own and "dataset" not in command_line:
        values["dataset"] = roles[role]
    if PRETRAINING in roles and "pretrain_corpus" not in own and "pretrain_corpus" not in command_line:
        values["pretrain_corpus"] = roles[PRETRAINING]  # a dataset role of its own (run_all.sh --data pretraining=)
    problem = role and "dataset" in names and role_problem(role, values.get("dataset", ""))
    if problem:
        raise ProfileError(f"{Path(notebook).stem} reads a {role} dataset, but {problem}")
    values["command_line"] = set_names
    missing = [n for n in names if n not in values]
    if missing:
        raise ProfileError(f"profile {profile} does not set {missing}, which {Path(notebook).name} declares")
    chosen = {n: values[n] for n in names}
    try:
        check_combinations(chosen)
    except ValueError as err:
        raise ProfileError(f"{Path(notebook).stem} under profile {Path(profile).stem}: {err}") from None
    return chosen


def changing_values(shared: dict, entries: dict, command_line: dict) -> dict:
    """The command line's values that change what some notebook gets from the profile (``shared`` values,
    ``entries`` per notebook). A value equal to the shared one, for a name that no notebook entry sets,
    changes nothing and is left out, so that ``--dataset manpages`` under a profile of ``dataset: manpages``
    is the profile as written, ``command_line`` included. ``dataset`` is kept wherever a role's dataset
    exists (the profile's or the command line's: ``--dataset`` beats them), and roles of ``datasets`` are
    left out only when equal to the profile's and no notebook entry sets ``datasets``."""
    in_entries = set().union(*entries.values())  # the names some notebook entry sets
    profile_roles = shared.get("datasets") or {}
    kept = {}
    for name, value in command_line.items():
        if name == "datasets":
            value = {
                r: d for r, d in value.items() if name in in_entries or r not in profile_roles or profile_roles[r] != d
            }
            if value:
                kept[name] = value
        elif name not in shared or shared[name] != value or name in in_entries:
            kept[name] = value
        elif name == "dataset" and (profile_roles or command_line.get("datasets") or "datasets" in in_entries):
            kept[name] = value
    return kept


def profile_values(profile: str, notebook: str) -> dict | None:
    """The values ``notebook`` gets from the file of ``profile`` as it is written (no command line), checked
    as a study checks its own: what a run must have to file its record where the profile's records go
    (:func:`longdoc.experiments.records.check_record_slot`). None when ``notebooks/profiles/<profile>.yaml``
    or ``notebooks/<notebook>.ipynb`` does not exist (a profile named only in a notebook's parameters), or
    when the file as written gives the notebook no valid values (it runs only with a command line's)."""
    path, notebook_path = PROFILES_DIR / f"{profile}.yaml", NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if not path.is_file() or not notebook_path.is_file():
        return None
    try:
        return check_parameters(parameters_for(path, notebook_path))
    except ProfileError:  # the file as written does not run this notebook (a role's dataset only on the command line)
        return None


def command_line_value(item: str):
    """``NAME=VALUE`` of ``--set`` as ``(name, value)``, the value read as profile YAML (one line; ``1e-4``
    is a float, ``010`` is 10), but for a parameter that is a string (a name or a path), taken as typed
    unless quoted; a malformed one names the argument, not a YAML traceback."""
    name, sep, text = item.partition("=")
    if not sep or not name:
        raise ProfileError(f"--set {shown(item)}: expected NAME=VALUE")
    if not text:
        return name, ""
    from longdoc.experiments.parameters import PARAMETERS

    if name in PARAMETERS and PARAMETERS[name].kind is str and text.strip()[:1] not in ("'", '"'):
        return name, text.strip()  # a name or a path as typed: "mydata #2", "a: b" and 2024 are folders
    try:
        value = read_yaml(text)
    except (yaml.YAMLError, ValueError) as err:
        problem = getattr(err, "problem", None) or shown(str(err).splitlines()[0])
        raise ProfileError(
            f"--set {shown(item)}: the value is not valid YAML ({problem}); quote a string, e.g. --set 'name=\"a: b\"'"
        ) from None
    return name, value


def _main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m longdoc.experiments.profiles",
        description="Print a notebook's parameters under a profile (YAML for papermill -f).",
    )
    parser.add_argument("profile")
    parser.add_argument("notebook")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a parameter (value parsed as YAML; a name or a path as typed), e.g. --set dataset=data/mine",
    )
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="ROLE=DIR",
        help=f"the dataset of one role's notebooks ({', '.join([*ROLES, PRETRAINING])}), e.g. --data nci=data/nq320k",
    )
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.data:
        role, sep, directory = item.partition("=")
        if not sep or not directory:
            sys.exit(f"profile error: --data {item!r}: expected ROLE=DIR")
        roles = overrides.setdefault("datasets", {})
        if role in roles:
            sys.exit(
                f"profile error: --data {role}= is given twice ({roles[role]} and {directory}): one dataset per role"
            )
        roles[role] = directory
    try:
        for item in args.set:
            name, value = command_line_value(item)
            if name in overrides:
                raise ProfileError(f"--set {name}= is given twice ({shown(overrides[name])} and {shown(value)})")
            overrides[name] = value
        yaml.safe_dump(parameters_for(args.profile, args.notebook, overrides), sys.stdout, sort_keys=False)
    except (ProfileError, ValueError, OSError) as err:
        sys.exit(f"profile error: {bounded(str(err))}")


if __name__ == "__main__":
    _main(sys.argv[1:])
