"""Continued pre-training of Longtriever with MLM + LMAE (section 3.2; HF Accelerate, like fine-tuning).

One step takes ``batch_size`` documents per process, all of their blocks at once. AdamW with linear
warm-up and decay (the paper: lr 1e-4, warm-up 0.1, weight decay 0.01). The masks are drawn from one
seeded generator per process, so a run is reproducible.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from tqdm.auto import tqdm

from longdoc.models.lmae import LongtrieverPretraining
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.optim import adamw_with_warmup


@dataclass
class PretrainConfig:
    epochs: int = 1
    batch_size: int = 4  # documents per process and step
    learning_rate: float = 1e-4
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    mlm_ratio: float = 0.3
    lmae_ratio: float = 0.5
    lmae: bool = True  # False: MLM only (Table 4, II)
    max_grad_norm: float = 1.0
    max_steps: int = 0  # > 0 stops early
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs >= 1 and batch_size >= 1 are required: {self}")
        for name in ("mlm_ratio", "lmae_ratio"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


@dataclass
class PretrainResult:
    history: list[dict] = field(default_factory=list)  # one record per step
    head_pretrained: bool = False
    config: dict = field(default_factory=dict)


def pretrain_longtriever(task: LongtrieverPretraining, corpus: SegmentedCorpus, config: PretrainConfig,
                         progress: bool = True) -> PretrainResult:
    """Pre-train ``task.encoder`` in place on the documents of ``corpus`` (never on queries)."""
    set_seed(config.seed)
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    world, rank = accelerator.num_processes, accelerator.process_index
    documents = [i for i, segments in enumerate(corpus.segments) if any(segments)]
    if not documents:
        raise ValueError("the pre-training corpus has no non-empty document")
    global_batch = config.batch_size * world
    steps_per_epoch = max(1, math.ceil(len(documents) / global_batch))
    total_steps = steps_per_epoch * config.epochs
    if config.max_steps:
        total_steps = min(total_steps, config.max_steps)
    optimizer, scheduler = adamw_with_warmup(task, config.learning_rate, config.weight_decay, config.warmup_ratio, total_steps)
    wrapped, optimizer, scheduler = accelerator.prepare(task, optimizer, scheduler)
    generator = torch.Generator(device=accelerator.device).manual_seed(config.seed + rank)
    result = PretrainResult(head_pretrained=task.head_pretrained, config=asdict(config))
    bar = tqdm(total=total_steps, desc="pre-training Longtriever", disable=not (progress and accelerator.is_main_process))
    step = 0
    wrapped.train()
    for epoch in range(1, config.epochs + 1):
        order = list(documents)
        random.Random(config.seed + epoch).shuffle(order)
        for start in range(0, len(order), global_batch):
            if step >= total_steps:
                break
            local = order[start : start + global_batch][rank * config.batch_size : (rank + 1) * config.batch_size]
            if not local:
                break
            batch = task.encoder.doc_inputs([corpus.segments[i] for i in local]).to(accelerator.device)
            losses = wrapped(batch, generator)
            accelerator.backward(losses["loss"])
            if config.max_grad_norm:
                accelerator.clip_grad_norm_(wrapped.parameters(), config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            record = {"step": step, "epoch": epoch, **{k: float(v.detach()) for k, v in losses.items()}}
            result.history.append(record)
            bar.update(1)
            bar.set_postfix(loss=f"{record['loss']:.3f}")
    bar.close()
    return result
