"""The one training loop for dense retrievers (HF Accelerate: one CPU process or N GPUs, same code).

Each step takes B training queries per process, one sampled positive each and ``hard_negatives``
sampled from each query's mined list; queries and documents of all processes are gathered and every
document is a negative for every other query (cross-device in-batch negatives,
:mod:`longdoc.distributed`). AdamW with linear warm-up and decay, gradient clipping, fixed
seeds. The budget is counted in optimizer steps; the model is evaluated on dev every ``eval_every``
steps (and after the last one), and the weights of the best evaluation are kept (model selection on
dev only). ``cache_size`` > 0 adds SeDR's late-cache negatives (:mod:`longdoc.losses.late_cache`;
0 is the plain contrastive loss). With a :class:`~longdoc.train.checkpoint.Checkpointer` the run saves
its whole state and a killed run resumes to the same final weights.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed

from longdoc.distributed import gather_ids, gather_with_grad, world_size
from longdoc.losses.late_cache import LateCacheNegatives
from longdoc.models.biencoder import BiEncoder
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import Checkpointer
from longdoc.train.steps import RandomState, TrainResult, run_steps


@dataclass
class TrainConfig:
    epochs: int = 1  # full passes over the training queries (when ``steps`` is 0)
    steps: int = 0  # > 0: exactly this many optimizer steps, as many passes as that takes
    batch_size: int = 8  # queries per process and step
    hard_negatives: int = 1  # per query (0 = in-batch negatives only)
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    temperature: float = 1.0
    max_grad_norm: float = 1.0
    eval_every: int = 0  # dev evaluation every this many steps (0: after every pass); always after the last
    evaluations: int = 0  # with eval_every 0 and a budget in passes (steps 0): this many, evenly spaced
    seed: int = 0
    cache_size: int = 0  # SeDR's Late-Cache Negative: training instances kept as extra negatives (0: none)
    first_step: int = 0  # steps a warm start or an earlier iteration took over the same training order: this run's
    # batches continue after them (a continued run sees new queries first, not its warm start's again)
    patience: int = 0  # > 0: stop after this many dev evaluations in a row without a new best (``steps``: the cap)

    def __post_init__(self) -> None:
        if (
            self.epochs < 1
            or self.batch_size < 1
            or self.hard_negatives < 0
            or self.steps < 0
            or self.eval_every < 0
            or self.evaluations < 0
            or self.cache_size < 0
            or self.first_step < 0
            or self.patience < 0
        ):
            raise ValueError(
                "epochs >= 1, batch_size >= 1 and hard_negatives, steps, eval_every, evaluations, cache_size, first_step, "
                "patience >= 0 "
                f"are required: {self}"
            )


class _Sampler:
    """Positives and hard negatives per query, drawn with one seeded generator."""

    def __init__(self, qrels: dict, negatives: dict, corpus: SegmentedCorpus, seed: int):
        self.index = {d: i for i, d in enumerate(corpus.doc_ids)}
        self.positives = {
            q: sorted(self.index[d] for d, r in judged.items() if r > 0 and d in self.index)
            for q, judged in qrels.items()
        }
        self.positives = {q: p for q, p in self.positives.items() if p}
        self.negatives = {q: [self.index[d] for d in negatives.get(q, []) if d in self.index] for q in self.positives}
        self.num_docs = len(corpus)
        self.rng = random.Random(seed)

    def positive(self, qid: str) -> int:
        return self.rng.choice(self.positives[qid])

    def hard_negatives(self, qid: str, n: int) -> list[int]:
        pool = self.negatives[qid]
        chosen = self.rng.sample(pool, min(n, len(pool)))
        relevant = set(self.positives[qid])
        while len(chosen) < n:  # too few mined negatives: fill with random non-relevant documents
            candidate = self.rng.randrange(self.num_docs)
            if candidate not in relevant and candidate not in chosen:
                chosen.append(candidate)
        return chosen


def _pad_segments(docs: torch.Tensor, mask: torch.Tensor, max_vectors: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad the vector axis to a fixed size so every process gathers tensors of one shape."""
    extra = max_vectors - docs.shape[1]
    return F.pad(docs, (0, 0, 0, extra)), F.pad(mask, (0, extra), value=False)


def train_biencoder(
    model: BiEncoder,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    corpus: SegmentedCorpus,
    negatives: dict[str, list[str]],
    config: TrainConfig,
    dev_eval: Callable[[BiEncoder, int], float] | None = None,
    progress: bool = True,
    checkpoint: Checkpointer | None = None,
) -> TrainResult:
    """Fine-tune ``model`` in place; on return it holds the weights of the best dev evaluation.

    ``dev_eval(model, step)`` scores the model on dev (higher is better); the first of equal best
    scores wins. Without it the model keeps its last weights. ``checkpoint``: save the run's state
    there, and resume from a state found there (``dev_eval``'s own state too, when it has
    ``state_dict``/``load_state_dict``).
    """
    set_seed(config.seed)
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    world, rank = world_size(), accelerator.process_index
    sampler = _Sampler(qrels, negatives, corpus, config.seed + rank)
    qids = sorted(sampler.positives)
    qid_index = {q: i for i, q in enumerate(qids)}
    if not qids:
        raise ValueError("no training query has a relevant document in the corpus")
    relevant = {q: set(p) for q, p in sampler.positives.items()}
    # the step's loss: contrastive over in-batch + hard negatives, relevant documents masked, plus SeDR's
    # late-cache negatives when cache_size > 0 (cache_size = 0 is exactly the plain contrastive loss)
    late = LateCacheNegatives(config.cache_size, lambda q: relevant.get(q, set()), model.score, config.temperature)

    def step_loss(wrapped, local: list[str], device) -> tuple[torch.Tensor, float]:
        positives = [sampler.positive(q) for q in local]
        negative_numbers = [n for q in local for n in sampler.hard_negatives(q, config.hard_negatives)]
        numbers = torch.tensor(positives + negative_numbers)
        doc_batch = model.doc_inputs([corpus.segments[i] for i in numbers.tolist()]).to(device)
        query_inputs = {k: v.to(device) for k, v in model.query_inputs([queries[q] for q in local]).items()}
        q, docs, mask = wrapped(query_inputs, doc_batch)
        docs, mask = _pad_segments(docs, mask, model.max_vectors)
        all_queries, all_docs, all_mask = gather_with_grad(q), gather_with_grad(docs), gather_ids(mask)
        all_numbers = gather_ids(numbers.to(device)).cpu()
        all_qids = [qids[i] for i in gather_ids(torch.tensor([qid_index[q] for q in local], device=device)).tolist()]
        # process r's documents are [its B positives, its hard negatives]: query j of r -> r * D + j
        labels = torch.cat([torch.arange(len(local)) + r * len(numbers) for r in range(world)])
        # each document's query: its positive's, or the one whose hard negative it is
        mine = torch.cat([torch.arange(len(local)), torch.arange(len(local)).repeat_interleave(config.hard_negatives)])
        owner = torch.cat([mine + r * len(local) for r in range(world)])
        loss = (
            late(all_queries, all_docs, all_mask, labels.to(device), all_qids, all_numbers.to(device), owner.to(device))
            * world
        )
        return loss, loss.item() / world

    return run_steps(
        model,
        qids,
        config,
        step_loss,
        description=f"training {model.name}",
        dev_eval=dev_eval,
        progress=progress,
        checkpoint=checkpoint,
        accelerator=accelerator,
        state={"sampler": RandomState(sampler.rng), "late_cache": late},
    )
