"""The training loop of the matching family (HF Accelerate: one CPU process or N GPUs, same code).

Each step takes ``batch_size`` labelled training pairs per process (one seeded shuffle of the pairs
per pass, the same on every process); the pair's documents go through the shared encoder once each,
and the loss is the binary cross-entropy of σ(scale · cos) against the label
(:func:`longdoc.losses.pair_bce.pair_bce_loss`; SMITH 4.3). Under several processes the gradients
are averaged (each process's mean over its pairs; equal shares). AdamW with linear warm-up and decay,
gradient clipping; the model is evaluated on dev every ``eval_every`` steps and after the last one,
and the weights of the best evaluation are kept. A :class:`~longdoc.train.checkpoint.Checkpointer`
saves the whole state, and a killed run resumes to the same final weights.
"""

from __future__ import annotations

import copy
import math
import random
import time
from dataclasses import asdict
from typing import Callable

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

from longdoc.data.pairs import DocumentPair
from longdoc.losses.pair_bce import pair_bce_loss
from longdoc.models.matching import SiameseMatcher
from longdoc.progress import tqdm
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import Checkpointer
from longdoc.train.loop import TrainConfig, TrainResult, _evaluation_steps
from longdoc.train.optim import adamw_with_warmup


def pair_batch(matcher: SiameseMatcher, corpus: SegmentedCorpus, index: dict[str, int], pairs: list[DocumentPair]):
    """The encoder's inputs for the distinct documents of ``pairs``, with each pair's two positions."""
    documents = list(dict.fromkeys(d for p in pairs for d in (p.source, p.target)))
    position = {d: i for i, d in enumerate(documents)}
    batch = matcher.encoder.doc_inputs([corpus.segments[index[d]] for d in documents])
    sources = torch.tensor([position[p.source] for p in pairs])
    targets = torch.tensor([position[p.target] for p in pairs])
    return batch, sources, targets


def train_matcher(matcher: SiameseMatcher, corpus: SegmentedCorpus, pairs: list[DocumentPair], config: TrainConfig,
                  dev_eval: Callable[[SiameseMatcher, int], float] | None = None, progress: bool = True,
                  checkpoint: Checkpointer | None = None) -> TrainResult:
    """Fine-tune ``matcher`` in place on labelled ``pairs`` (documents of ``corpus``); on return it holds
    the weights of the best dev evaluation (the first of equal scores)."""
    if not pairs:
        raise ValueError("no training pair")
    set_seed(config.seed)
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    world, rank = accelerator.num_processes, accelerator.process_index
    index = {d: i for i, d in enumerate(corpus.doc_ids)}
    missing = sorted({d for p in pairs for d in (p.source, p.target)} - set(index))
    if missing:
        raise ValueError(f"training pairs name {len(missing)} document(s) outside the corpus, e.g. {missing[0]!r}")
    global_batch = config.batch_size * world
    steps_per_epoch = max(1, len(pairs) // global_batch if world > 1 else math.ceil(len(pairs) / global_batch))
    total_steps = config.steps or steps_per_epoch * config.epochs
    evaluate_at = _evaluation_steps(config, steps_per_epoch, total_steps)
    optimizer, scheduler = adamw_with_warmup(matcher, config.learning_rate, config.weight_decay, config.warmup_ratio, total_steps)
    wrapped, optimizer = accelerator.prepare(matcher, optimizer)  # the scheduler stays outside (see train.loop)
    result = TrainResult(config=asdict(config), steps_per_epoch=steps_per_epoch)
    best_state, step, epoch, position, losses = None, 0, 0, 0, []
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:
        if saved["config"] != asdict(config) or saved["world"] != world:
            raise ValueError(f"{checkpoint.directory}: a saved state of another run (config or process count differs)")
        accelerator.unwrap_model(wrapped).load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        step, epoch, position, losses, best_state = (saved[k] for k in ("step", "epoch", "position", "losses", "best_state"))
        result.history, result.best_step, result.best_dev = saved["history"], saved["best_step"], saved["best_dev"]
        result.train_seconds = saved["train_seconds"]
        if saved.get("dev_eval") is not None:
            dev_eval.load_state_dict(saved["dev_eval"])
    bar = tqdm(total=total_steps, initial=step, desc=f"training {matcher.name} (pairs)",
               disable=not (progress and accelerator.is_main_process))
    while step < total_steps:
        if position == 0:
            epoch += 1
        order = list(pairs)
        random.Random(config.seed + epoch).shuffle(order)
        for start in range(position * global_batch, steps_per_epoch * global_batch, global_batch):
            if step >= total_steps:
                break
            local = order[start : start + global_batch][rank * config.batch_size : (rank + 1) * config.batch_size]
            if not local:
                break
            wrapped.train()
            started = time.perf_counter()
            batch, sources, targets = pair_batch(matcher, corpus, index, local)
            device = accelerator.device
            cosines = wrapped(batch.to(device), sources.to(device), targets.to(device))
            loss = pair_bce_loss(cosines, torch.tensor([p.label for p in local], device=device))
            accelerator.backward(loss)
            if config.max_grad_norm:
                accelerator.clip_grad_norm_(wrapped.parameters(), config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            result.train_seconds += time.perf_counter() - started
            step += 1
            position += 1
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", epoch=epoch)
            if step in evaluate_at:
                record = {"step": step, "epoch": epoch, "train_loss": sum(losses) / len(losses),
                          "learning_rate": scheduler.get_last_lr()[0]}
                losses = []
                if dev_eval is not None:
                    record["dev"] = float(dev_eval(accelerator.unwrap_model(wrapped), step))
                    if best_state is None or record["dev"] > result.best_dev:
                        result.best_dev, result.best_step = record["dev"], step
                        best_state = copy.deepcopy(accelerator.unwrap_model(wrapped).state_dict())
                result.history.append(record)
            if checkpoint is not None and checkpoint.due(step):
                checkpoint.save({
                    "config": asdict(config), "world": world, "model": accelerator.unwrap_model(wrapped).state_dict(),
                    "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step,
                    "epoch": epoch, "position": position, "losses": losses, "best_state": best_state,
                    "history": result.history, "best_step": result.best_step, "best_dev": result.best_dev,
                    "train_seconds": result.train_seconds,
                    "dev_eval": dev_eval.state_dict() if hasattr(dev_eval, "state_dict") else None})
        position = 0
    bar.close()
    if best_state is not None:
        matcher.load_state_dict(best_state)
    else:
        result.best_step = step
    matcher.eval()
    return result
