"""Put every model a profile names into the Hugging Face cache, for GPU nodes without internet.

``python -m longdoc.fetch --profile paper [--only 40,41] [--set NAME=VALUE ...]`` reads each selected
notebook's parameters as ``run_all.sh`` would, collects the models they name (``MODEL_PARAMETERS``:
the backbone and NCI's query generator) and downloads each hub name with
``huggingface_hub.snapshot_download``. Run it where there is internet, then copy the cache (``HF_HOME``,
by default ``~/.cache/huggingface``) to the node; the study reads it there offline. Packaged names
(``minilm``) and local directories need nothing. ``--list`` prints the names without downloading; by hand,
each is ``hf download <name>``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from longdoc.data.registry import REPO_ROOT

MODEL_PARAMETERS = ("backbone", "qg_generator")  # parameters whose value is a model


def notebooks(only: str = "") -> list[Path]:
    """The study's notebooks (``only``: comma-separated number prefixes, as ``run_all.sh --only``)."""
    found = sorted((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not only:
        return found
    wanted = {prefix.strip() for prefix in only.split(",") if prefix.strip()}
    chosen = [nb for nb in found if nb.name[:2] in wanted]
    unknown = wanted - {nb.name[:2] for nb in chosen}
    if unknown:
        raise ValueError(f"--only {only}: no notebook starts with {sorted(unknown)}")
    return chosen


def needs_download(name: str) -> bool:
    """A hub name: not empty, not a packaged backbone, not one built here, not a local directory."""
    from longdoc.experiments.backbones import is_built
    from longdoc.models.weights import _PACKAGED

    return bool(name) and name not in _PACKAGED and not is_built(name) and not Path(name).is_dir()


def models_named(profile: str | Path, selected: list[Path], overrides: dict | None = None) -> dict[str, list[str]]:
    """``{model name: [notebooks that read it]}`` for the hub models of ``profile``."""
    from longdoc.experiments.profiles import parameters_for

    named: dict[str, list[str]] = {}
    for notebook in selected:
        values = parameters_for(profile, notebook, overrides)
        for parameter in MODEL_PARAMETERS:
            name = str(values.get(parameter) or "")
            if needs_download(name):
                named.setdefault(name, []).append(notebook.name[:2])
    return named


def main(argv: list[str] | None = None) -> dict[str, list[str]]:
    from longdoc.experiments.profiles import ProfileError, command_line_value

    parser = argparse.ArgumentParser(prog="python -m longdoc.fetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="paper", help="a name under notebooks/profiles/ or a YAML path")
    parser.add_argument("--only", default="", help="notebooks by number prefix, e.g. 40,41 (default: all)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="as run_all.sh --set")
    parser.add_argument("--list", action="store_true", help="print the names only")
    args = parser.parse_args(argv)
    try:
        overrides = dict(command_line_value(item) for item in args.set)
    except ProfileError as err:
        parser.error(str(err))
    profile = (
        args.profile
        if args.profile.endswith(".yaml")
        else REPO_ROOT / "notebooks" / "profiles" / f"{args.profile}.yaml"
    )
    try:
        named = models_named(profile, notebooks(args.only), overrides)
    except (ProfileError, ValueError, OSError) as err:
        sys.exit(f"longdoc.fetch: {err}")
    if not named:
        print(f"profile {args.profile}: every model is packaged or a local directory; nothing to fetch")
    for name, used_by in named.items():
        print(f"{name} (notebooks {', '.join(used_by)})")
        if not args.list:
            from huggingface_hub import snapshot_download

            print(f"  -> {snapshot_download(name)}")
    return named


if __name__ == "__main__":
    main()
