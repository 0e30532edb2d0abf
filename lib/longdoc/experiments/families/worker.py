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
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path


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
    """``torchrun --standalone --nproc_per_node n_devices -m longdoc.experiments.families.worker`` on
    ``job`` (a dataclass) run by ``runner`` with the dataset of ``reference`` (None: none); its output
    goes into the notebook."""
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
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={n_devices}",
        "-m",
        "longdoc.experiments.families.worker",
        str(job_file),
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as workers:
        for line in workers.stdout:  # into the notebook, not the kernel's terminal
            print(line, end="", flush=True)
    if workers.returncode != 0:
        raise RuntimeError(f"fitting in {n_devices} processes failed (exit {workers.returncode}): {' '.join(command)}")


def join_processes() -> None:
    """Start torchrun's process group here (NCCL on GPUs, gloo on CPUs) before the runner does any work,
    so that what the first process must build alone (a token store) is built before the others look;
    Accelerate then uses this group."""
    import os

    import torch
    import torch.distributed as dist

    if dist.is_initialized() or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


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
