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

from collections.abc import Callable

import torch
from accelerate.utils import set_seed

from longdoc.data.pairs import DocumentPair
from longdoc.losses.pair_bce import pair_bce_loss
from longdoc.models.matching import SiameseMatcher
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import Checkpointer
from longdoc.train.loop import TrainConfig
from longdoc.train.steps import TrainResult, run_steps


def pair_batch(matcher: SiameseMatcher, corpus: SegmentedCorpus, index: dict[str, int], pairs: list[DocumentPair]):
    """The encoder's inputs for the distinct documents of ``pairs``, with each pair's two positions."""
    documents = list(dict.fromkeys(d for p in pairs for d in (p.source, p.target)))
    position = {d: i for i, d in enumerate(documents)}
    batch = matcher.encoder.doc_inputs([corpus.segments[index[d]] for d in documents])
    sources = torch.tensor([position[p.source] for p in pairs])
    targets = torch.tensor([position[p.target] for p in pairs])
    return batch, sources, targets


def train_matcher(
    matcher: SiameseMatcher,
    corpus: SegmentedCorpus,
    pairs: list[DocumentPair],
    config: TrainConfig,
    dev_eval: Callable[[SiameseMatcher, int], float] | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
) -> TrainResult:
    """Fine-tune ``matcher`` in place on labelled ``pairs`` (documents of ``corpus``); on return it holds
    the weights of the best dev evaluation (the first of equal scores)."""
    if not pairs:
        raise ValueError("no training pair")
    set_seed(config.seed)
    index = {d: i for i, d in enumerate(corpus.doc_ids)}
    missing = sorted({d for p in pairs for d in (p.source, p.target)} - set(index))
    if missing:
        raise ValueError(f"training pairs name {len(missing)} document(s) outside the corpus, e.g. {missing[0]!r}")

    def step_loss(wrapped, local: list[DocumentPair], device) -> tuple[torch.Tensor, float]:
        batch, sources, targets = pair_batch(matcher, corpus, index, local)
        cosines = wrapped(batch.to(device), sources.to(device), targets.to(device))
        loss = pair_bce_loss(cosines, torch.tensor([p.label for p in local], device=device))
        return loss, loss.item()

    return run_steps(
        matcher,
        pairs,
        config,
        step_loss,
        description=f"training {matcher.name} (pairs)",
        dev_eval=dev_eval,
        progress=progress,
        checkpoint=checkpoint,
    )
