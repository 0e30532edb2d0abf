"""Every command of the README's recipe table runs as pasted: each is executed verbatim (``DIR`` replaced
by a dataset converted from the fixtures in the papers' distributed formats, ``...`` by every role's),
with ``--dry-run --allow-cpu`` appended, so that run_all.sh makes every check a real run makes (options,
the profile's values under the command's overrides, each role's dataset, the models in the Hugging Face
cache, the device) and stops before building or training anything. A recipe whose option, profile value
or role rots fails here. The node's Hugging Face cache is stood in for by one holding a tiny random BERT
under ``bert-base-uncased`` and docT5query's config (a dry run resolves models, it loads none)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from longdoc.bench.gpu_hours import README_MARKERS
from longdoc.data.convert import main as convert

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def recipe_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split(README_MARKERS[0], 1)[1].split(README_MARKERS[1], 1)[0]
    commands = [re.search(r"`([^`]*run_all\.sh[^`]*)`", line) for line in table.splitlines()]
    return [found.group(1) for found in commands if found]


@pytest.fixture(scope="module")
def role_datasets(tmp_path_factory) -> dict[str, Path]:
    return converted_role_datasets(tmp_path_factory.mktemp("recipes"))


def converted_role_datasets(root: Path) -> dict[str, Path]:
    """One dataset per role, converted from the distributed-format fixtures with the README's converters."""
    marco = FIXTURES / "msmarco"
    assert (
        convert(
            [
                "msmarco",
                "--docs",
                str(marco / "msmarco-docs.tsv.gz"),
                "--split",
                f"train={marco / 'msmarco-doctrain-queries.tsv.gz'},{marco / 'msmarco-doctrain-qrels.tsv.gz'}",
                "--split",
                f"dev={marco / 'msmarco-test2020-queries.tsv.gz'},{marco / '2020qrels-docs.txt'}",
                "--split",
                f"test={marco / 'msmarco-test2019-queries.tsv.gz'},{marco / '2019qrels-docs.txt'}",
                "--skip-unknown-docs",
                "--out",
                str(root / "msmarco-doc"),
            ]
        )
        == 0
    )
    assert convert(["nq320k", "--dir", str(FIXTURES / "nq320k"), "--out", str(root / "nq320k")]) == 0
    wiki = root / "wiki65k"
    assert convert(["documents", "--docs", str(FIXTURES / "pairs" / "wiki65k_docs.tsv"), "--out", str(wiki)]) == 0
    (root / "train.tsv").write_text("1\tdoc_4\tdoc_5\n0\tdoc_5\tdoc_6\n")
    (root / "dev.tsv").write_text("1\tdoc_2\tdoc_3\n0\tdoc_2\tdoc_4\n")
    splits = [f"--split={name}={path}" for name, path in (("train", root / "train.tsv"), ("dev", root / "dev.tsv"))]
    splits.append(f"--split=test={FIXTURES / 'pairs' / 'wiki65k_test.tsv'}")
    assert convert(["pairs", "--format", "smash", *splits, "--out", str(wiki)]) == 0
    text = root / "books_wiki.txt"  # the pre-training corpus as the README gives it: documents between blank lines
    pages = [" ".join(f"{word} of page {i}." for word in ("a", "line", "of", "text", "on", "each")) for i in range(8)]
    text.write_text("\n\n".join(pages) + "\n")
    return {"retrieval": root / "msmarco-doc", "nci": root / "nq320k", "matching": wiki, "pretraining": text}


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    return stand_in_hub_cache(tmp_path_factory.mktemp("hub"))


def stand_in_hub_cache(hub: Path) -> Path:
    """A Hugging Face cache in its on-disk layout holding the paper profile's two models."""
    from longdoc.models.backbone import random_backbone

    for name in ("bert-base-uncased", "castorini/doc2query-t5-base-msmarco"):
        model = hub / f"models--{name.replace('/', '--')}"
        revision = "0" * 40
        (model / "refs").mkdir(parents=True)
        (model / "refs" / "main").write_text(revision)
        snapshot = model / "snapshots" / revision
        if name == "bert-base-uncased":
            random_backbone(snapshot, hidden=32, layers=2, heads=2, intermediate=64)
        else:
            snapshot.mkdir(parents=True)
            (snapshot / "config.json").write_text('{"model_type": "t5"}')
    return hub


def test_the_readme_has_a_recipe_per_table_and_each_names_the_node_environment_and_eight_gpus():
    """... and every notebook that pre-trains Longtriever is given its own pre-training text (the paper's
    BookCorpus + Wikipedia), not the fine-tuning corpus it would otherwise read."""
    from longdoc.experiments.profiles import notebook_parameter_names

    commands = recipe_commands()
    assert len(commands) >= 20
    for command in commands:
        assert command.startswith("LONGDOC_USE_ACTIVE_ENV=1 ./run_all.sh --profile paper --set n_devices=8 ")
        if "--only " in command:
            (notebook,) = (ROOT / "notebooks").glob(f"{command.split('--only ')[1][:2]}_*.ipynb")
            pretrains = "pretrain_corpus" in notebook_parameter_names(notebook)
            assert ("--data pretraining=TEXT" in command) == pretrains, command


@pytest.mark.parametrize("command", recipe_commands(), ids=lambda command: command.split("--only ")[-1][:12])
def test_each_recipe_runs_as_pasted(command, role_datasets, hub_cache, tmp_path):
    every_role = " ".join(f"--data {role}={path}" for role, path in role_datasets.items())
    filled = command.replace("--data ...", every_role)
    for role, path in role_datasets.items():
        filled = filled.replace(f"--data {role}=DIR", f"--data {role}={path}").replace(
            f"--data {role}=TEXT", f"--data {role}={path}"
        )
    assert "DIR" not in filled and "TEXT" not in filled and "..." not in filled
    environment = {
        **os.environ,
        "LONGDOC_PYTHON": sys.executable,  # the active environment the recipe asks for: this one
        "LONGDOC_CACHE": str(tmp_path / "cache"),
        "HF_HUB_CACHE": str(hub_cache),
        "TMPDIR": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", "-c", f"{filled} --dry-run --allow-cpu"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "dry run: every check passed; would run" in done.stdout
    assert not (tmp_path / "cache").exists()  # nothing built


REAL_RECIPES = os.environ.get("LONGDOC_REAL_RECIPES", "")  # e.g. "01" or "01,30": run these recipes for real


@pytest.mark.skipif(not REAL_RECIPES, reason="minutes each on 2 cores: LONGDOC_REAL_RECIPES=01,30 runs them")
@pytest.mark.parametrize("number", REAL_RECIPES.split(",") if REAL_RECIPES else ["01"])
def test_a_recipe_runs_for_real_with_tiny_overrides(number, hub_cache, tmp_path):
    """A recipe as pasted, trained for real in its 8 gloo processes on the embedded benchmark (the converted
    fixtures hold 2 training queries, fewer than one step of 8 processes), with one seed, one learning rate,
    one pass and 300 documents: every row of the notebook fits, is evaluated and recorded (outside CI: the
    01 recipe took 344 s here)."""
    import shutil

    from longdoc.data.registry import DATA_DIR

    (command,) = [c for c in recipe_commands() if c.endswith(f"--only {number}")]
    role = command.split("--data ", 1)[1].split("=", 1)[0]
    benchmark = DATA_DIR / "manpages"
    if not (benchmark / "corpus.jsonl").exists():
        pytest.skip("the embedded benchmark is not built (./run_all.sh builds it)")
    checkout = tmp_path / "checkout"  # a copy, so that its records and figures land there, not in this checkout
    left_out = {  # what is built or run here (lib/longdoc/data is code, data/paper_results is read)
        ROOT: {".git", ".venv", "results", "figures"},
        ROOT / "data": {"manpages", "cache", "installed-manpages"},
    }
    shutil.copytree(ROOT, checkout, ignore=lambda folder, names: left_out.get(Path(folder), set()) & set(names))
    filled = command.replace(f"--data {role}=DIR", f"--data {role}={benchmark}")
    text = tmp_path / "pretraining.txt"  # pre-training text as the README gives it: the benchmark's pages
    pages = [json.loads(line)["text"] for line in (benchmark / "corpus.jsonl").read_text().splitlines()[:300]]
    text.write_text("\n\n".join(" ".join(page.split()) for page in pages) + "\n")
    filled = filled.replace("--data pretraining=TEXT", f"--data pretraining={text}")
    overrides = "--set 'seeds=[0]' --set 'learning_rates=[1.0e-5]' --set train_epochs=1 --set max_docs=300"
    environment = {
        **os.environ,
        "LONGDOC_PYTHON": sys.executable,
        "LONGDOC_CACHE": str(tmp_path / "cache"),
        "HF_HUB_CACHE": str(hub_cache),
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": str(checkout / "lib"),  # the copy's package, whose results folder is the copy's
    }
    done = subprocess.run(
        ["bash", "-c", f"{filled} --allow-cpu {overrides}"],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all 1 notebooks ran" in done.stdout
    assert list((checkout / "results" / "paper").glob(f"*/{number}_*/metrics.json")), "its record"
