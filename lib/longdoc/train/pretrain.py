"""Continued pre-training (HF Accelerate, like fine-tuning) of Longtriever with MLM + LMAE (section 3.2)
and of SMITH with masked word + masked sentence-block prediction (SMITH 4.2): one loop, the task
module (:class:`~longdoc.models.lmae.LongtrieverPretraining`, :class:`~longdoc.models.smith.SmithPretraining`)
gives the losses.

One step takes ``batch_size`` documents per process, all of their blocks at once. AdamW with linear
warm-up and decay (the paper: lr 1e-4, warm-up 0.1, weight decay 0.01). Each document's masks at a step
are drawn from a generator of its own, seeded with (seed, step, document)
(:class:`~longdoc.text.masking.DocumentDraws`), and the losses are means over every process's tokens
and blocks, so a run is reproducible and n processes of ``batch_size`` documents train as one process
of ``n x batch_size`` (tested with two).

Head warm-up (not in the paper, which starts from BERT's trained MLM head): when the backbone ships no
MLM head (the packaged MiniLM), ψ's transform starts random and its gradients would first scramble the
encoder. ``head_warmup_steps`` steps then train only the parameters outside the encoder (ψ, the LMAE
decoder) with the encoder frozen, before the full pre-training steps.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, set_seed

from longdoc.distributed import mean_over_processes
from longdoc.models.lmae import DECODER_INITS, LongtrieverPretraining
from longdoc.progress import tqdm
from longdoc.text.masking import DocumentDraws, document_seed
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import Checkpointer
from longdoc.train.optim import adamw_with_warmup


@dataclass
class PretrainConfig:
    epochs: int = 1  # passes over the documents (when ``steps`` is 0)
    steps: int = 0  # > 0: exactly this many full pre-training steps
    batch_size: int = 4  # documents per process and step
    learning_rate: float = 1e-4
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    mlm_ratio: float = 0.3
    lmae_ratio: float = 0.5
    lmae: bool = True  # False: MLM only (Table 4, II)
    decoder_init: str = "random"  # the LMAE decoder layer: "random" (RetroMAE, released code) or "copy"
    masked_blocks: int = 2  # SMITH: sentence blocks masked per document (the paper: 2)
    block_prediction: bool = True  # SMITH: add the masked sentence-block loss (False: SMITH-WP, words only)
    head_warmup_steps: int = 0  # steps that train ψ and the decoder only, encoder frozen, before the rest
    head_learning_rate: float = 1e-3
    max_grad_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if (
            self.epochs < 1
            or self.batch_size < 1
            or self.steps < 0
            or self.head_warmup_steps < 0
            or self.masked_blocks < 0
        ):
            raise ValueError(
                f"epochs >= 1, batch_size >= 1, steps >= 0, head_warmup_steps >= 0 and masked_blocks >= 0 "
                f"are required: {self}"
            )
        for name in ("mlm_ratio", "lmae_ratio"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.decoder_init not in DECODER_INITS:
            raise ValueError(f"decoder_init must be one of {DECODER_INITS}, got {self.decoder_init!r}")


@dataclass
class PretrainResult:
    history: list[dict] = field(default_factory=list)  # one record per step ("phase": "head" or "full")
    head_pretrained: bool = False
    config: dict = field(default_factory=dict)


def _document_batches(
    documents: list[int], config: PretrainConfig, world: int, rank: int
) -> Iterator[tuple[int, list[int]]]:
    """``(epoch, this process's documents)`` for ever, one seeded shuffle per epoch. An epoch's last,
    shorter global batch of m documents is shared as evenly as it goes (m // world or one more each); one with fewer documents
    than processes is skipped by all of them (a process without a document could not take part)."""
    global_batch = config.batch_size * world
    epoch = 0
    while True:
        epoch += 1
        order = list(documents)
        random.Random(config.seed + epoch).shuffle(order)
        for start in range(0, len(order), global_batch):
            step = order[start : start + global_batch]
            if len(step) < world:
                continue
            yield epoch, step[rank * len(step) // world : (rank + 1) * len(step) // world]


def pretrain_encoder(
    task: LongtrieverPretraining,
    corpus: SegmentedCorpus,
    config: PretrainConfig,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
) -> PretrainResult:
    """Pre-train ``task.encoder`` in place on the documents of ``corpus`` (never on queries).
    ``checkpoint``: save the run's state there, and resume from a state found there."""
    set_seed(config.seed)
    accelerator = Accelerator(  # SMITH's mask vector meets no gradient in a step where no block is masked
        cpu=not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
    )
    world, rank = accelerator.num_processes, accelerator.process_index
    documents = [i for i, segments in enumerate(corpus.segments) if any(segments)]
    if not documents:
        raise ValueError("the pre-training corpus has no non-empty document")
    total_steps = config.steps or config.epochs * math.ceil(len(documents) / (config.batch_size * world))
    batches = _document_batches(documents, config, world, rank)
    result = PretrainResult(head_pretrained=task.head_pretrained, config=asdict(config))
    heads = task.head_parameters()
    phases = [
        ("head", config.head_warmup_steps, heads, config.head_learning_rate),
        ("full", total_steps, list(task.parameters()), config.learning_rate),
    ]
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None and (saved["config"] != asdict(config) or saved["world"] != world):
        raise ValueError(f"{checkpoint.directory}: a saved state of another run (config or process count differs)")
    done = {"head": 0, "full": 0} if saved is None else saved["done"]  # steps finished per phase
    if saved is not None:
        task.load_state_dict(saved["model"])
        result.history = saved["history"]
        for _ in range(saved["batches"]):  # the same data order from where the run stopped
            next(batches)
    consumed = 0 if saved is None else saved["batches"]
    bar = tqdm(
        total=config.head_warmup_steps + total_steps,
        initial=done["head"] + done["full"],
        desc=f"pre-training {task.encoder.name}",
        disable=not (progress and accelerator.is_main_process),
    )
    task.train()
    for phase, steps, trained, learning_rate in phases:
        if not steps or done[phase] >= steps:
            continue
        for parameter in task.parameters():  # the head phase freezes the encoder
            parameter.requires_grad_(phase == "full")
        for parameter in trained:
            parameter.requires_grad_(True)
        optimizer, scheduler = adamw_with_warmup(
            task, learning_rate, config.weight_decay, config.warmup_ratio, steps, trainable_only=True
        )
        # the scheduler stays outside prepare(): Accelerate would step it once per process and step,
        # ending the warm-up and decay n_devices times too early
        wrapped, optimizer = accelerator.prepare(task, optimizer)
        if saved is not None and saved["phase"] == phase:
            optimizer.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
        for step in range(done[phase] + 1, steps + 1):
            epoch, local = next(batches)
            consumed += 1
            batch = task.encoder.doc_inputs([corpus.segments[i] for i in local]).to(accelerator.device)
            encoder = task.encoder.config
            draws = DocumentDraws(
                [document_seed(config.seed, consumed, i) for i in local],
                batch.owner,
                encoder.segment_length,
                encoder.max_segments,
            )
            losses = wrapped(batch, draws)
            accelerator.backward(losses["loss"])
            if config.max_grad_norm:
                accelerator.clip_grad_norm_(trained, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            parts = [k for k in losses if k != "loss"]  # each the global batch's value, whatever the process count
            values = mean_over_processes(torch.stack([losses[k].detach().float() for k in parts])).tolist()
            record = {"phase": phase, "step": step, "epoch": epoch, **dict(zip(parts, values)), "loss": sum(values)}
            result.history.append(record)
            bar.update(1)
            bar.set_postfix(phase=phase, loss=f"{record['loss']:.3f}")
            done[phase] = step
            if checkpoint is not None and checkpoint.due(done["head"] + done["full"]):
                checkpoint.save(
                    {
                        "step": done["head"] + done["full"],
                        "config": asdict(config),
                        "world": world,
                        "model": task.state_dict(),
                        "phase": phase,
                        "done": dict(done),
                        "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(),
                        "history": result.history,
                        "batches": consumed,
                    }
                )
    for parameter in task.parameters():
        parameter.requires_grad_(True)
    bar.close()
    return result
