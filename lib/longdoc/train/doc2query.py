"""Fine-tuning NCI's query generator (:class:`~longdoc.models.doc2query.Doc2Query`, section 3.2) on
``(document text, query)`` pairs, through the shared step loop. Under several processes each one's
token mean is weighted by its share of the step's target tokens (queries differ in length), so that the
run equals one process holding the whole batch."""

from __future__ import annotations

from collections.abc import Callable

import torch
from accelerate.utils import set_seed

from longdoc.distributed import share_of_total, world_size
from longdoc.models.doc2query import Doc2Query
from longdoc.train.loop import TrainConfig
from longdoc.train.steps import run_steps


def train_doc2query(
    generator: Doc2Query,
    pairs: list[tuple[str, str]],
    dev_pairs: list[tuple[str, str]],
    progress: bool = True,
    checkpoint=None,
):
    """Fine-tune ``generator`` on ``(document text, query)`` pairs through the shared step loop; the
    dev loss (mean over ``dev_pairs``) is recorded at two evaluations and the better weights kept."""
    config = generator.config
    set_seed(config.seed)  # dropout masks: the same run gives the same generator
    train = TrainConfig(
        steps=config.train_steps,
        batch_size=config.batch_size,
        hard_negatives=0,
        learning_rate=config.learning_rate,
        eval_every=max(1, config.train_steps // 2),
        seed=config.seed,
    )

    def step_loss(wrapped, local: list[tuple[str, str]], device) -> tuple[torch.Tensor, float]:
        texts, queries = [text for text, _ in local], [query for _, query in local]
        loss = generator.loss(texts, queries, wrapped)
        if world_size() == 1:
            return loss, loss.item()
        tokens = generator.target_tokens(queries).to(loss.device)  # weighed by its share of all tokens
        return loss * tokens / share_of_total(tokens), loss.item()

    def dev_loss(model, step: int) -> float:
        model.eval()
        with torch.no_grad():
            losses = [
                generator.loss(
                    [t for t, _ in dev_pairs[i : i + config.batch_size]],
                    [q for _, q in dev_pairs[i : i + config.batch_size]],
                ).item()
                for i in range(0, len(dev_pairs), config.batch_size)
            ]
        return -sum(losses) / max(len(losses), 1)

    evaluate: Callable | None = dev_loss if dev_pairs else None
    return run_steps(
        generator.model,
        pairs,
        train,
        step_loss,
        description="training the query generator",
        dev_eval=evaluate,
        progress=progress,
        checkpoint=checkpoint,
        find_unused_parameters=True,  # the encoder's pooler, which the loss never reaches
    )
