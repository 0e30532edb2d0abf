"""NCI's training (section 3.4): (query, document identifier) examples, teacher forcing, the loss of
eq. 6 (:func:`longdoc.losses.consistency.nci_loss`), through the shared step loop
(:func:`longdoc.train.steps.run_steps`: seeded shuffles, dev selection, resumable checkpoints).

With α > 0 the batch's queries are encoded and decoded twice in one forward pass (the batch stacked
on itself): dropout draws its masks independently per row, so the two halves are the paper's two
passes with independent dropout. AdamW with the paper's two learning rates (encoder 2e-4, decoder
and adaptor 1e-4), linear warm-up and decay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from accelerate.utils import set_seed
from transformers import get_linear_schedule_with_warmup

from longdoc.distributed import gather_ids, gather_with_grad, pad_to_longest, share_of_total, world_size
from longdoc.index.semantic_ids import IdTokenizer
from longdoc.losses.consistency import IGNORE, consistency_loss, nci_loss
from longdoc.models.nci import NciModel
from longdoc.train.checkpoint import Checkpointer
from longdoc.train.steps import TrainResult, run_steps


@dataclass
class NciTrainConfig:
    epochs: int = 1  # passes over the examples (when ``steps`` is 0)
    steps: int = 0  # > 0: exactly this many optimizer steps
    batch_size: int = 32  # examples per process and step (the paper: 16 per GPU, 128 in all)
    encoder_learning_rate: float = 2e-4  # the paper's
    decoder_learning_rate: float = 1e-4  # the paper's (decoder and PAWA adaptor)
    alpha: float = 0.15  # α of eq. 6 (0: no consistency regularisation, one pass)
    temperature: float = 1.0  # τ of eq. 5
    normalized_states: bool = False  # eq. 5 over unit-length states (cosine): not the paper's, for measuring
    per_position: bool = True  # each step's cross-entropy over its position's tokens and EOS, as released
    warmup_ratio: float = 0.1
    weight_decay: float = 1e-4  # the released code's
    max_grad_norm: float = 1.0
    eval_every: int = 0  # dev evaluation every this many steps (0: after every pass); always after the last
    evaluations: int = 0  # with eval_every 0 and a budget in passes (steps 0): this many, evenly spaced
    patience: int = 0  # > 0: stop after this many dev evaluations in a row without a new best (the dev plateau)
    seed: int = 0
    precision: str = "fp32"  # "bf16": each step's forward pass under bf16 autocast (fp32 weights; losses in fp32)

    def __post_init__(self) -> None:
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"NciTrainConfig: precision must be 'fp32' or 'bf16', got {self.precision!r}")
        if (
            self.epochs < 1
            or self.batch_size < 1
            or min(self.steps, self.eval_every, self.evaluations, self.alpha, self.patience) < 0
        ):
            raise ValueError(
                f"epochs >= 1, batch_size >= 1 and steps, eval_every, evaluations, alpha, patience >= 0 are required: {self}"
            )
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


def identifier_batch(tokens: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(decoder inputs, labels)``: the identifiers shifted right after the start token, and the
    identifiers padded with ``IGNORE``."""
    length = max(map(len, tokens))
    labels = torch.full((len(tokens), length), IGNORE, dtype=torch.long)
    inputs = torch.full((len(tokens), length), IdTokenizer.PAD, dtype=torch.long)
    for row, sequence in enumerate(tokens):
        labels[row, : len(sequence)] = torch.tensor(sequence)
        inputs[row, 1 : len(sequence)] = torch.tensor(sequence[:-1])
    return inputs, labels


def diagnostics(plain: torch.Tensor, adapted: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Over the identifier's real steps: the PAWA adaptor's relative change ``|h A − h| / |h|`` and the
    classifier input's norm ``|h A|`` (what eq. 5's dot products grow with)."""
    real = labels != IGNORE
    with torch.no_grad():
        change = (adapted - plain).norm(dim=-1) / plain.norm(dim=-1).clamp(min=1e-12)
        return {"adaptor_change": float(change[real].mean()), "state_norm": float(adapted.norm(dim=-1)[real].mean())}


def global_batch_loss(
    logits: torch.Tensor, states: torch.Tensor, labels: torch.Tensor, alpha: float, temperature: float
) -> dict[str, torch.Tensor]:
    """Eq. 6 of the global batch when several processes each hold a share (one process: :func:`nci_loss`).
    The cross-entropy's token mean is weighted by this process's share of all processes' tokens, and eq. 5
    contrasts every process's states (gathered, this process's keeping their gradient; identifiers padded
    to the longest) times the world size, so that DDP's average of the gradients is the global batch's
    (tested against one process holding the whole batch). The cross-entropy returned is this process's
    weighted part, the consistency the global batch's."""
    if world_size() == 1:
        return nci_loss(logits, states, labels, alpha, temperature)
    views = 2 if alpha > 0 else 1
    targets = labels.repeat(views, 1)
    tokens = (targets != IGNORE).sum()
    cross_entropy = nci_loss(logits, states, targets, 0.0)["cross_entropy"] * tokens / share_of_total(tokens)
    losses = {"cross_entropy": cross_entropy, "loss": cross_entropy}
    if alpha > 0:
        first, second = (pad_to_longest(part, 1, 0.0) for part in states.chunk(2))
        padded = pad_to_longest(labels, 1, IGNORE)
        consistency = consistency_loss(
            gather_with_grad(first), gather_with_grad(second), gather_ids(padded), temperature
        )
        losses["consistency"] = consistency  # the global batch's eq. 5 (logged as it is)
        losses["loss"] = cross_entropy + alpha * consistency * world_size()
    return losses


NO_DECAY = ("bias", "LayerNorm", "norm")  # BERT's LayerNorm and the decoder's own *_norm layers


def two_learning_rates(config: NciTrainConfig) -> Callable:
    def build(model: NciModel, total_steps: int):
        groups = []
        for part, learning_rate in ((True, config.encoder_learning_rate), (False, config.decoder_learning_rate)):
            named = [(n, p) for n, p in model.named_parameters() if n.startswith("encoder.") == part]
            groups += [
                {
                    "params": [p for n, p in named if not any(k in n for k in NO_DECAY)],
                    "lr": learning_rate,
                    "weight_decay": config.weight_decay,
                },
                {
                    "params": [p for n, p in named if any(k in n for k in NO_DECAY)],
                    "lr": learning_rate,
                    "weight_decay": 0.0,
                },
            ]
        optimizer = torch.optim.AdamW([g for g in groups if g["params"]])
        return optimizer, get_linear_schedule_with_warmup(
            optimizer, int(config.warmup_ratio * total_steps), total_steps
        )

    return build


def train_nci(
    model: NciModel,
    examples: list[tuple[str, int]],
    identifiers: list[list[int]],
    config: NciTrainConfig,
    dev_eval: Callable[[NciModel, int], float] | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
    step_mask: np.ndarray | None = None,
) -> TrainResult:
    """Train ``model`` in place on ``examples`` (query text, document number), the document numbers
    indexing ``identifiers`` (token sequences ending in EOS); on return it holds the weights of the
    best dev evaluation. ``step_mask`` (:meth:`IdTokenizer.step_mask`) with ``config.per_position``:
    each step's logits outside its position's tokens and EOS are masked before the cross-entropy, as
    the released code does (without it, every step's softmax runs over the whole identifier vocabulary). Each history record carries the mean of every loss term, the adaptor's relative
    change and the states' norm (:func:`diagnostics`) since the previous record."""
    if any(not 0 <= number < len(identifiers) for _, number in examples):
        raise ValueError(f"an example names a document number outside 0..{len(identifiers) - 1}")
    set_seed(config.seed)
    mask = torch.from_numpy(step_mask) if step_mask is not None and config.per_position else None

    def step_loss(wrapped, local: list[tuple[str, int]], device) -> tuple[torch.Tensor, float]:
        queries = [query for query, _ in local]
        inputs = model.query_inputs(queries)
        decoder_inputs, labels = identifier_batch([identifiers[number] for _, number in local])
        views = 2 if config.alpha > 0 else 1
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.precision == "bf16"):
            out = wrapped(
                input_ids=inputs["input_ids"].repeat(views, 1).to(device),
                attention_mask=inputs["attention_mask"].repeat(views, 1).to(device),
                decoder_input_ids=decoder_inputs.repeat(views, 1).to(device),
            )
        # the losses in fp32: eq. 5's state products at tau = 1 reach the hundreds, where bf16 rounds by units
        plain, states = out.decoder_hidden_states
        plain, states, logits = plain.float(), states.float(), out.logits.float()
        labels = labels.to(device)
        if mask is not None:
            logits = logits.masked_fill(~mask[: logits.shape[1]].to(device), torch.finfo(logits.dtype).min)
        losses = global_batch_loss(
            logits,
            F.normalize(states, dim=-1) if config.normalized_states else states,
            labels,
            config.alpha,
            config.temperature,
        )
        logged = {name: value.item() for name, value in losses.items()}
        return losses["loss"], logged | diagnostics(plain, states, labels.repeat(views, 1))

    return run_steps(
        model,
        examples,
        config,
        step_loss,
        description=f"training {model.name}",
        dev_eval=dev_eval,
        progress=progress,
        checkpoint=checkpoint,
        optimizer_factory=two_learning_rates(config),
        find_unused_parameters=True,  # a batch's identifiers may not reach every step's parameters
    )
