"""One process of a multi-process fine-tuning (``torchrun ... -m longdoc.experiments.families.worker JOB.json``),
launched by :func:`longdoc.experiments.families.retrieval.launch_finetune_job`. Accelerate reads the process
group from torchrun's environment (NCCL on GPUs, gloo on CPUs); every process encodes its share of
the corpus for dev evaluation (:mod:`longdoc.sharding`) and the first one writes the results."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(job_file: str) -> None:
    from longdoc.data.registry import load_dataset
    from longdoc.experiments.families.retrieval import FinetuneJob, run_finetune_job

    spec = json.loads(Path(job_file).read_text())
    reference = spec["dataset"]
    dataset = load_dataset(reference["name"], max_docs=reference["max_docs"], seed=reference["seed"])
    if dataset.checksum != reference["checksum"] or len(dataset.corpus) != reference["documents"]:
        raise RuntimeError(f"{reference['name']}: the dataset changed since the job was written (checksum differs)")
    run_finetune_job(FinetuneJob(**spec["job"]), dataset, Path(spec["directory"]), Path(spec["resume"]))
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()  # the first process has written the results
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
