"""The optimizer-step loop every fine-tuning family shares (dense retrieval, pair matching, NCI).

A family gives its training items (queries, pairs, (query, identifier) examples) and a function
that turns one process's share of a batch into a loss; :func:`run_steps` does the rest the same way
for all of them: HF Accelerate (one CPU process or N GPUs), one seeded shuffle of the items per pass
(the same order on every process), ``batch_size`` items per process and step, AdamW with linear
warm-up and decay (or the family's own optimizer), gradient clipping, a dev evaluation every
``eval_every`` steps and after the last one with the weights of the best evaluation kept (the first
of equal scores), and a :class:`~longdoc.train.checkpoint.Checkpointer` that saves the whole state
(the loop's and the family's ``state`` objects) so a killed run resumes to the same final weights.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs
from torch import nn

from longdoc.progress import tqdm
from longdoc.train.checkpoint import Checkpointer
from longdoc.train.optim import adamw_with_warmup


class Stateful(Protocol):
    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


class RandomState:
    """A ``random.Random`` as a :class:`Stateful` (a family's sampler, saved with the run)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def state_dict(self):
        return self.rng.getstate()

    def load_state_dict(self, state) -> None:
        self.rng.setstate(state)


@dataclass
class TrainResult:
    history: list[dict] = field(default_factory=list)  # one record per dev evaluation (or pass, without dev)
    best_step: int = 0  # the step whose weights the model holds on return
    best_dev: float = float("nan")
    config: dict = field(default_factory=dict)
    train_seconds: float = 0.0  # wall time of the optimizer steps (dev evaluations and saving excluded)
    steps_per_epoch: int = 0
    stopped_early: bool = False  # ``patience`` evaluations in a row did not beat the best: training ended there


StepLoss = Callable[[nn.Module, list, torch.device], "tuple[torch.Tensor, float | dict[str, float]]"]


def mean_terms(logged: list) -> dict[str, float]:
    """The mean of each logged term over the steps since the last record (a bare float is ``loss``)."""
    terms = [entry if isinstance(entry, dict) else {"loss": entry} for entry in logged]
    return {name: sum(t[name] for t in terms) / len(terms) for name in terms[0]}


def continued_order(first_step: int, steps_per_epoch: int) -> tuple[int, int]:
    """``(epoch, position)`` of the training order after ``first_step`` steps: the loop takes epoch ``e``'s
    shuffle (``Random(seed + e)``) from batch ``position`` on (``(0, 0)``: a fresh run, epoch 1 from its
    first batch)."""
    full, position = divmod(first_step, steps_per_epoch)
    return (full + 1, position) if position else (full, 0)


def epoch_steps(items: int, global_batch: int, world: int = 1) -> int:
    """Optimizer steps of one pass over ``items`` at ``global_batch`` items a step: every item once on one
    process; under several, only whole global batches (each process takes an equal share of each step)."""
    return max(1, items // global_batch if world > 1 else math.ceil(items / global_batch))


def evaluation_steps(eval_every: int, steps_per_epoch: int, total_steps: int, evaluations: int = 0) -> set[int]:
    """Every ``eval_every`` steps; with 0, ``evaluations`` evenly spaced over ``total_steps`` (a budget in
    passes, whose step count is known only here), else after every pass; always after the last step."""
    every = eval_every or (max(1, total_steps // evaluations) if evaluations else steps_per_epoch)
    return set(range(every, total_steps + 1, every)) | {total_steps}


def require_one_step(description: str, items: int, batch_size: int, processes: int) -> None:
    """Over several processes a step needs ``batch_size`` items in each (one with none would leave a gather
    waiting): refused by name, where the fit is launched (before its processes start) and in them."""
    if processes > 1 and items < batch_size * processes:
        raise ValueError(
            f"{description}: {items} training items, fewer than one step's {batch_size * processes} "
            f"({processes} processes x {batch_size}); lower batch_size or n_devices"
        )


def run_steps(
    model: nn.Module,
    items: Sequence,
    config,
    step_loss: StepLoss,
    *,
    description: str,
    dev_eval: Callable[[nn.Module, int], float] | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
    state: dict[str, Stateful] | None = None,
    optimizer_factory: Callable | None = None,
    accelerator: Accelerator | None = None,
    find_unused_parameters: bool = False,
):
    """Train ``model`` in place on ``items``; on return it holds the weights of the best dev evaluation
    (its last weights without ``dev_eval``). Returns a :class:`TrainResult`.

    ``step_loss(wrapped, local_items, device)`` gives ``(loss to back-propagate, value to log)``, the
    value a float or a dict of named terms with ``loss`` among them (each record then keeps every
    term's mean under ``terms``);
    ``config`` has the fields of :class:`~longdoc.train.loop.TrainConfig` it reads (steps, epochs,
    batch_size, learning_rate, weight_decay, warmup_ratio, max_grad_norm, eval_every, seed);
    ``optimizer_factory(model, total_steps)`` replaces AdamW-with-warm-up (e.g. NCI's two learning
    rates). ``dev_eval`` and every ``state`` object that has ``state_dict`` are saved and restored.
    A config with ``patience`` > 0 stops training when that many dev evaluations in a row do not beat
    the best (early stopping at the dev plateau; ``steps`` is then the cap, and the schedule's).
    ``find_unused_parameters``: under several processes, DDP waits for no gradient of a parameter that a
    step's loss did not reach (it would otherwise stop at the next step).
    """
    if not items:
        raise ValueError(f"{description}: no training item")
    accelerator = accelerator or Accelerator(
        cpu=not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)] if find_unused_parameters else [],
    )
    world, rank = accelerator.num_processes, accelerator.process_index
    global_batch = config.batch_size * world
    require_one_step(description, len(items), config.batch_size, world)
    steps_per_epoch = epoch_steps(len(items), global_batch, world)
    total_steps = config.steps or steps_per_epoch * config.epochs
    evaluate_at = evaluation_steps(config.eval_every, steps_per_epoch, total_steps, getattr(config, "evaluations", 0))
    optimizer, scheduler = (
        optimizer_factory(model, total_steps)
        if optimizer_factory
        else adamw_with_warmup(model, config.learning_rate, config.weight_decay, config.warmup_ratio, total_steps)
    )
    # the scheduler stays outside prepare(): Accelerate would step it once per process and step,
    # ending the warm-up and decay n_devices times too early
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    result = TrainResult(config=asdict(config), steps_per_epoch=steps_per_epoch)
    stateful = dict(state or {})
    if hasattr(dev_eval, "state_dict"):
        stateful["dev_eval"] = dev_eval
    best_state, step, epoch, position, losses = None, 0, 0, 0, []  # position: batches taken in this epoch
    patience, stale = getattr(config, "patience", 0), 0  # stale: evaluations in a row without a new best
    # a continued run (``first_step``: steps its warm start already took) starts where that order stopped
    epoch, position = continued_order(getattr(config, "first_step", 0), steps_per_epoch)
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:
        if saved["config"] != asdict(config) or saved["world"] != world:
            raise ValueError(f"{checkpoint.directory}: a saved state of another run (config or process count differs)")
        accelerator.unwrap_model(wrapped).load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        step, epoch, position, losses, best_state = (
            saved[k] for k in ("step", "epoch", "position", "losses", "best_state")
        )
        stale = saved.get("stale", 0)
        result.stopped_early = bool(patience) and stale >= patience
        result.history, result.best_step, result.best_dev = saved["history"], saved["best_step"], saved["best_dev"]
        result.train_seconds = saved["train_seconds"]
        for name, obj in stateful.items():
            obj.load_state_dict(saved["state"][name])
    bar = tqdm(
        total=total_steps, initial=step, desc=description, disable=not (progress and accelerator.is_main_process)
    )
    while step < total_steps and not result.stopped_early:
        if position == 0:
            epoch += 1
        order = list(items)
        random.Random(config.seed + epoch).shuffle(order)  # the same order on every process
        for start in range(position * global_batch, steps_per_epoch * global_batch, global_batch):
            if step >= total_steps or result.stopped_early:
                break
            local = order[start : start + global_batch][rank * config.batch_size : (rank + 1) * config.batch_size]
            if not local:
                break
            wrapped.train()
            started = time.perf_counter()
            loss, logged = step_loss(wrapped, local, accelerator.device)
            accelerator.backward(loss)
            if config.max_grad_norm:
                accelerator.clip_grad_norm_(wrapped.parameters(), config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(logged)
            result.train_seconds += time.perf_counter() - started
            step += 1
            position += 1
            bar.update(1)
            bar.set_postfix(loss=f"{logged['loss'] if isinstance(logged, dict) else logged:.3f}", epoch=epoch)
            if step in evaluate_at:
                terms = mean_terms(losses)
                record = {
                    "step": step,
                    "epoch": epoch,
                    "train_loss": terms["loss"],
                    "learning_rate": scheduler.get_last_lr()[0],
                }
                if isinstance(logged, dict):
                    record["terms"] = terms
                losses = []
                if dev_eval is not None:
                    record["dev"] = float(dev_eval(accelerator.unwrap_model(wrapped), step))
                    if best_state is None or record["dev"] > result.best_dev:
                        result.best_dev, result.best_step, stale = record["dev"], step, 0
                        best_state = copy.deepcopy(accelerator.unwrap_model(wrapped).state_dict())
                    else:
                        stale += 1
                result.history.append(record)
                result.stopped_early = bool(patience) and stale >= patience
            if checkpoint is not None and checkpoint.due(step):
                checkpoint.save(
                    {
                        "config": asdict(config),
                        "world": world,
                        "model": accelerator.unwrap_model(wrapped).state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(),
                        "step": step,
                        "epoch": epoch,
                        "position": position,
                        "losses": losses,
                        "best_state": best_state,
                        "history": result.history,
                        "best_step": result.best_step,
                        "best_dev": result.best_dev,
                        "train_seconds": result.train_seconds,
                        "stale": stale,
                        "state": {name: obj.state_dict() for name, obj in stateful.items()},
                    }
                )
        position = 0
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    else:
        result.best_step = step
    model.eval()
    return result
