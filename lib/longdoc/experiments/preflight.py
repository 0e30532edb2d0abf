"""What ``run_all.sh`` checks before the first notebook starts, so that no input is refused an hour in: each
dataset a selected notebook reads (a readable folder, its files readable, every split it needs holding a
relevant judgement or a pair), the cache folder (a writable directory), the weights a notebook loads
(backbone, query generator) and the pre-training corpus of a notebook that pre-trains. Cheap: the judgement and pair files are read, the corpus only opened (loading
checks every line later).

    python -m longdoc.experiments.preflight --cache DIR PARAMETERS.yaml...
    python -m longdoc.experiments.preflight --only '01, 10'     # prints 01,10 (run_all.sh --only)
    python -m longdoc.experiments.preflight --outside notebooks/profiles/cpu.yaml   # 41,42,... (left out without --only)

(each file: a notebook's parameters, named after it, as ``run_all.sh`` writes them). Prints every problem,
one a line, and exits 2 when there is one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from longdoc.data.errors import DataFormatError, require_file, require_folder, text_lines

SPLITS = ("train", "dev", "test")


def needed_splits(notebook: str) -> tuple[str, ...]:
    """The splits ``notebook`` reads: every one of train, dev and test (fits are trained on train, chosen on
    dev, scored on test), but for 00_data, which describes the splits a dataset has."""
    return () if notebook.startswith("00") else SPLITS


def first_document(path: Path) -> None:
    """The corpus's first document read with every check (a gzip file, a JSON array, an empty corpus are
    refused here; loading checks every line)."""
    from longdoc.data.errors import check_id
    from longdoc.data.jsonl import jsonl_rows, text_field

    for number, row in jsonl_rows(path):
        check_id(row["_id"], path, number)
        text_field(row, "title", path, number), text_field(row, "text", path, number)
        return
    raise DataFormatError(path, "the corpus holds no documents")


def retrieval_problems(directory: Path, splits: tuple[str, ...]) -> list[str]:
    """A BEIR-layout folder (retrieval and NCI notebooks): corpus and queries readable, ``qrels/`` holding
    only ``<split>.tsv`` files, each split that is needed present, and each present split holding a query
    with a relevant document."""
    from longdoc.data.beir import qrels_files, read_qrels, read_queries

    first_document(directory / "corpus.jsonl")
    queries = read_queries(directory / "queries.jsonl")  # small beside the corpus; an empty file is refused
    files = {path.stem: path for path in qrels_files(directory)}
    missing = [split for split in splits if split not in files]
    if missing:
        return [f"{directory}: no {', '.join(f'qrels/{s}.tsv' for s in missing)} (the notebook needs {list(splits)})"]
    problems = []
    for split, path in files.items():
        qrels = read_qrels(path, queries=queries)  # a judged query missing from queries.jsonl names its line
        if not any(r > 0 for judged in qrels.values() for r in judged.values()):
            problems.append(f"{path}: split {split!r} has no query with a relevant document (relevance > 0)")
    return problems


def matching_problems(directory: Path, splits: tuple[str, ...]) -> list[str]:
    """A matching folder: corpus readable and ``pairs/<split>.tsv`` of each needed split holding a pair."""
    from longdoc.data.pairs import load_pairs

    require_file(directory / "corpus.jsonl")
    for split in splits or SPLITS:
        require_file(directory / "pairs" / f"{split}.tsv")
    pairs = load_pairs(directory)  # every split's file read, a pair in two splits refused
    problems = []
    for split in splits or SPLITS:
        labels = {pair.label for pair in pairs.get(split, [])}
        path = directory / "pairs" / f"{split}.tsv"
        if not labels:
            problems.append(f"{path}: split {split!r} holds no pair")
        elif split != "train" and labels != {0, 1}:  # accuracy, F1 and ROC AUC need both classes
            problems.append(f"{path}: split {split!r} holds only pairs labelled {labels.pop()} (it is scored on both)")
        elif 1 not in labels:
            problems.append(f"{path}: split {split!r} holds no matching pair (label 1) to learn from")
    return problems


def dataset_problems(dataset: str, role: str | None, notebook: str) -> list[str]:
    """What keeps ``notebook`` (reading ``dataset`` in ``role``) from starting; [] when nothing does."""
    if dataset == "manpages" or role is None:
        return []  # the embedded benchmark is built, and checked, by run_all.sh itself
    if not dataset.strip():
        return ["dataset is empty (give 'manpages' or a folder)"]
    try:
        directory = require_folder(dataset, "dataset folder")
        if role == "matching":
            return matching_problems(directory, needed_splits(notebook))
        return retrieval_problems(directory, needed_splits(notebook))
    except (DataFormatError, OSError) as err:
        return [str(err)]


def cache_problem(folder: str | Path) -> str | None:
    """Why fits cannot be cached in ``folder`` (:func:`longdoc.io.unwritable_folder`), or None."""
    from longdoc.io import unwritable_folder

    problem = unwritable_folder(folder)
    return f"the cache folder {folder} (LONGDOC_CACHE): {problem}" if problem else None


def pretrain_corpus_problem(value: str) -> str | None:
    """Why the pre-training corpus ``value`` cannot be read, or None (``""`` and ``unjudged``: the dataset's
    own documents; ``installed-manpages``: this machine's man pages; else a ``.txt`` file or a BEIR folder)."""
    from longdoc.data.installed_pages import INSTALLED_PAGES, installed_pages_problem
    from longdoc.experiments.parameters import UNJUDGED

    if value in ("", UNJUDGED):
        return None
    where = f"pretrain_corpus={value!r}"
    if value == INSTALLED_PAGES:
        problem = installed_pages_problem()
        return f"{where}: {problem} (or set pretrain_corpus: '')" if problem else None
    try:
        if value.endswith(".txt"):
            if not any(line.strip() for _, line in text_lines(value)):  # UTF-8, and a document in it
                return f"{where}: {value}: holds no document (documents are separated by blank lines)"
            return None
        found = retrieval_problems(require_folder(value, "pre-training corpus folder (a BEIR layout)"), ())
    except DataFormatError as err:
        return f"{where}: {err}"
    return f"{where}: {found[0]}" if found else None


def model_problem(name: str, value: str) -> str | None:
    """Why the weights ``value`` of parameter ``name`` (``backbone``, ``qg_generator``) cannot be found
    offline, or None ('' for qg_generator: one is trained)."""
    if not value:
        return None
    from longdoc.models.weights import BackboneNotFoundError, resolve_backbone

    try:
        resolve_backbone(value)  # found without importing torch (most runs: one check in a second)
        return None
    except BackboneNotFoundError as err:
        missing = f"{name}={value!r}: {err}"
    if name != "backbone":
        return missing
    from longdoc.experiments.backbones import build_problem, is_built  # torch: only for a name not found

    if is_built(value):  # trained here by the first notebook that reads it
        problem = build_problem(value)
        return f"{name}={value!r}: {problem}" if problem else None
    return missing


def problems(parameter_files: list[Path], cache: str | Path) -> list[str]:
    from longdoc.experiments.profiles import ROLES, dataset_role

    found = []
    problem = cache_problem(cache)
    if problem:
        found.append(problem)
    for path in parameter_files:
        notebook = path.stem
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        role = dataset_role(notebook)
        if "dataset" in values:
            found += [f"{notebook}: {p}" for p in dataset_problems(str(values["dataset"]), role, notebook)]
        if role is None:  # the ladder reads each role's dataset
            for other, dataset in (values.get("datasets") or {}).items():
                if other in ROLES:
                    found += [f"{notebook}: {p}" for p in dataset_problems(str(dataset), other, notebook)]
        for name in ("backbone", "qg_generator"):
            problem = model_problem(name, values.get(name) or "")
            if problem:
                found.append(f"{notebook}: {problem}")
        if "pretrain_corpus" in values:  # (pretrain_steps 0 is pretrain_epochs passes over it)
            problem = pretrain_corpus_problem(str(values["pretrain_corpus"]))
            if problem:
                found.append(f"{notebook}: {problem}")
    return list(dict.fromkeys(found))


def device_problem(
    accelerator: str, devices_asked: int, gpus_seen: int, allow_cpu: bool, torch_version: str, nodes: int = 1
) -> str | None:
    """What stops a run before any work: a GPU profile where torch sees no GPU (it would train for days
    on the CPU; ``allow_cpu`` runs it anyway), or ``n_devices / nodes`` (the processes a fit puts on each
    of its nodes) above the GPUs torch sees here (a batch split for 8 would run on fewer, or out of their
    memory)."""
    if accelerator == "gpu" and gpus_seen == 0 and not allow_cpu:
        return (
            f"this profile is sized for GPUs (accelerator: gpu) and torch {torch_version} sees none: it would "
            "train for days on the CPU. Run it where torch sees a GPU (on a node, LONGDOC_USE_ACTIVE_ENV=1 "
            "uses the environment with CUDA torch), or pass --allow-cpu to run it here anyway"
        )
    per_node = devices_asked // nodes
    if gpus_seen and per_node > gpus_seen:
        where = f" ({devices_asked} over {nodes} nodes)" if nodes > 1 else ""
        return (
            f"n_devices={devices_asked} puts {per_node} processes on each node{where}, more than the GPUs torch "
            f"sees ({gpus_seen}): --set n_devices={gpus_seen * nodes}, or run where {per_node} are visible"
        )
    return None


def _gpus_seen() -> tuple[int, str]:
    import torch

    return (torch.cuda.device_count() if torch.cuda.is_available() else 0), torch.__version__


def device_line() -> str:
    """What the numbers of this run are made on: the GPUs, or the CPU and its torch threads."""
    import platform

    import torch

    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        return f"device: {len(names)} GPU(s): {', '.join(names)} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), platform.processor()
        )
    cores = len(os.sched_getaffinity(0))
    return f"device: CPU {cpu}, {torch.get_num_threads()} torch threads on {cores} cores (torch {torch.__version__})"


def selected_notebooks(only: str, notebooks: list[str] | None = None) -> str:
    """``run_all.sh --only`` as the comma-separated numbers it selects: spaces and empty items dropped
    (``'01, 10'`` is ``01,10``); a number no notebook has, or one given twice, is refused naming them."""
    from longdoc.experiments.profiles import NOTEBOOKS_DIR

    if notebooks is None:
        notebooks = sorted(p.stem for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    numbers = {name[:2] for name in notebooks}
    items = [item.strip() for item in only.split(",") if item.strip()]
    if not items:
        raise ValueError(f"--only {only!r}: no notebook number (expected a list like 00,01)")
    unknown = [item for item in items if item not in numbers]
    if unknown:
        raise ValueError(
            f"--only {only!r}: no notebook numbered {', '.join(unknown)} (there are {', '.join(sorted(numbers))})"
        )
    repeated = sorted({item for item in items if items.count(item) > 1})
    if repeated:
        raise ValueError(
            f"--only {only!r}: {', '.join(repeated)} given twice (each notebook runs once, in number order)"
        )
    return ",".join(items)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m longdoc.experiments.preflight", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--only", help="print run_all.sh's --only list as the numbers it selects (and nothing else)")
    parser.add_argument(
        "--outside", type=Path, help="print the numbers of the notebooks a profile file leaves out of its study"
    )
    parser.add_argument("--cache", help="the cache folder (LONGDOC_CACHE)")
    parser.add_argument("--profile-file", type=Path, help="the profile (its accelerator) for the device check")
    parser.add_argument("--allow-cpu", action="store_true", help="run a GPU profile where torch sees no GPU")
    parser.add_argument("parameters", nargs="*", type=Path, help="each notebook's parameters (NAME.yaml)")
    args = parser.parse_args(argv)
    if args.only is not None:
        try:
            print(selected_notebooks(args.only))
        except ValueError as err:
            print(f"run_all.sh: {err}", file=sys.stderr)
            return 2
        return 0
    if args.outside is not None:
        from longdoc.experiments.profiles import ProfileError, outside_the_study

        try:
            print(",".join(name[:2] for name in outside_the_study(args.outside)))
        except ProfileError as err:
            print(f"run_all.sh: {err}", file=sys.stderr)
            return 2
        return 0
    if args.cache is None or not args.parameters:
        parser.error("give --cache DIR and the notebooks' parameter files")
    found = problems(args.parameters, args.cache)
    if args.profile_file is not None:
        from longdoc.experiments.profiles import ACCELERATOR, load_profile

        asked = max(
            int((yaml.safe_load(p.read_text(encoding="utf-8")) or {}).get("n_devices", 1)) for p in args.parameters
        )
        from longdoc.launch import launch_problem, outer_launch

        nodes, problem = launch_problem(asked, dict(os.environ))
        if problem:
            found.append(problem)
        seen, version = _gpus_seen()
        outer = outer_launch(os.environ)
        if outer is not None and outer.launcher == "srun" and seen == 1:
            nodes = asked  # srun --gpus-per-task=1: each rank sees its own GPU (under torchrun all see the node's)
        profile = load_profile(args.profile_file)[ACCELERATOR]
        problem = device_problem(profile, asked, seen, args.allow_cpu, version, nodes)
        if problem:
            found.append(problem)
        print(device_line())  # run_all.sh logs it (torch is imported here already)
    for problem in found:
        print(f"run_all.sh: {problem}", file=sys.stderr)
    if found:
        print(f"run_all.sh: no notebook was started ({len(found)} problem(s) above)", file=sys.stderr)
    return 2 if found else 0


if __name__ == "__main__":
    sys.exit(main())
