"""One process of a multi-process fitting (``torchrun ... -m longdoc.experiments.families.worker JOB.json``),
launched from the notebook's kernel by :func:`launch`, so that a kernel never holds a process group.

The job file names the family's runner and job class (``"module:name"``), the job's fields, and how to
load the dataset again (its loader, name, subsample and checksum: every process loads it and checks that
it is the kernel's). Accelerate reads the process group from torchrun's environment (NCCL on GPUs, gloo
on CPUs); every process encodes its share of the corpus for dev evaluation (:mod:`longdoc.sharding`) and
the first one writes the results. Runners: the retrieval family's fine-tuning
(:func:`~longdoc.experiments.families.retrieval.fitting.run_finetune_job`), the matching family's
(:func:`~longdoc.experiments.families.matching.run_matching_job`) and pre-training
(:func:`~longdoc.experiments.families.pretraining.run_pretraining_job`, which reads a token store).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import longdoc.experiments.backbones  # noqa: F401  registers the cache: backbone resolver (it builds a missing one)
from longdoc.launch import (
    FIT_PROCESS_VARIABLE,
    GROUP_VARIABLE,
    LAUNCHER_VARIABLE,
    NODES_VARIABLE,
    launch_commands,
    outer_launch,
    run_joined,
    run_launchers,
)


def named(reference: str):
    """The object ``"module:name"``."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def dataset_reference(dataset, loader: str) -> dict:
    """How another process loads the same dataset with ``loader`` (``"module:function"`` taking the
    dataset parameter, ``max_docs`` and ``seed``)."""
    subsample = dataset.manifest.get("subsample") or {}
    if "dataset_parameter" not in dataset.manifest:
        raise ValueError(f"{dataset.name}: not loaded by a dataset loader, so other processes cannot load it")
    return {
        "loader": loader,
        "name": dataset.manifest["dataset_parameter"],
        "max_docs": subsample.get("max_docs", 0),
        "seed": subsample.get("seed", 0),
        "checksum": dataset.checksum,
        "documents": len(dataset.corpus),
    }


def launch(runner: str, job, reference: dict | None, directory: Path, resume: Path, n_devices: int) -> None:
    """``job`` (a dataclass) run by ``runner`` in ``n_devices`` processes (:func:`longdoc.launch.launch_commands`: this
    node, or ``LONGDOC_NODES`` nodes; under an outer launch, its ranks: :func:`longdoc.launch.run_joined`) with
    the dataset of ``reference`` (None: none); the output of the first launcher goes into the notebook, the
    others' tails when one fails."""
    from longdoc.io import atomic_write

    spec = {
        "runner": runner,
        "job_class": f"{type(job).__module__}:{type(job).__name__}",
        "job": asdict(job),
        "dataset": reference,
        "directory": str(directory),
        "resume": str(resume),
    }
    job_file = Path(resume) / "job.json"
    with atomic_write(job_file) as handle:
        json.dump(spec, handle)
    outer = outer_launch(os.environ)
    if outer is not None:
        codes = run_joined(job_file, outer)
        if any(codes):
            raise RuntimeError(
                f"fitting in the {outer.world_size} ranks of the outer {outer.launcher} launch failed (exit codes by "
                f"rank {codes}; each rank's output is in its own log): {job_file}"
            )
        return
    nodes = int(os.environ.get(NODES_VARIABLE) or 1)
    commands = launch_commands(job_file, n_devices, nodes, os.environ.get(LAUNCHER_VARIABLE) or "srun")
    logs = [Path(resume) / f"launcher-{i}.log" for i in range(len(commands))]
    os.environ[FIT_PROCESS_VARIABLE] = "1"  # the fit's processes inherit it: they are no outer launch's ranks
    try:
        codes = run_launchers(commands, logs)
    finally:
        os.environ.pop(FIT_PROCESS_VARIABLE)
    if any(codes):
        tails = "".join(
            f"\n--- launcher {i}:\n{log.read_text()[-2000:]}" for i, log in enumerate(logs) if i and log.exists()
        )
        where = f"{n_devices} processes" + (f" on {nodes} nodes" if nodes > 1 else "")
        raise RuntimeError(f"fitting in {where} failed (exit {codes}): {' '.join(commands[0])}{tails}")


def join_processes() -> None:
    """Start torchrun's process group here (NCCL on GPUs, gloo on CPUs) before the runner does any work,
    so that what the first process must build alone (a token store) is built before the others look;
    Accelerate then uses this group. A fit of an outer launch (``LONGDOC_GROUP``) meets in the launch's
    store under a prefix of its own job, so that no key of an earlier fit's group is read again."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    if dist.is_initialized() or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    group = os.environ.get(GROUP_VARIABLE)
    if not group:
        dist.init_process_group(backend)
        return
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timedelta(minutes=30)
    )
    dist.init_process_group(
        backend,
        store=dist.PrefixStore(f"longdoc/group/{group}/", store),
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
    )


def main(job_file: str) -> None:
    join_processes()
    spec = json.loads(Path(job_file).read_text())
    reference, dataset = spec["dataset"], None  # no reference: the job reads its data itself (pre-training's tokens)
    if reference is not None:
        dataset = named(reference["loader"])(reference["name"], max_docs=reference["max_docs"], seed=reference["seed"])
        if dataset.checksum != reference["checksum"] or len(dataset.corpus) != reference["documents"]:
            raise RuntimeError(f"{reference['name']}: the dataset changed since the job was written (checksum differs)")
    job = named(spec["job_class"])(**spec["job"])
    named(spec["runner"])(job, dataset, Path(spec["directory"]), Path(spec["resume"]))
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()  # the first process has written the results
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
