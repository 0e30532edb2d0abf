import pytest
import torch

from longdoc.losses import contrastive_loss
from longdoc.models import EncoderConfig, MaxP
from longdoc.models.biencoder import maxp_scores
from longdoc.text import SegmentedCorpus
from longdoc.train import TrainConfig, negatives_from_run, train_biencoder

WORDS = ["kernel", "socket", "thread", "signal", "memory", "file", "clock", "locale"]


def toy_data(tokenizer):
    doc_ids = [f"d{i}" for i in range(8)]
    texts = [f"{w} " * 12 + "page about " + w for w in WORDS]
    queries = {f"q{i}": f"{w}" for i, w in enumerate(WORDS)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(8)}
    return SegmentedCorpus.build(tokenizer, doc_ids, texts, 16, 2), queries, qrels


@torch.no_grad()
def full_batch_loss(model, corpus, queries):
    """On the model's device (a trainer on a GPU machine leaves the model there)."""
    model.eval()
    device = next(model.parameters()).device
    query_inputs = {k: v.to(device) for k, v in model.query_inputs(list(queries.values())).items()}
    q, docs, mask = model(query_inputs, model.doc_inputs(corpus.segments).to(device))
    return contrastive_loss(maxp_scores(q, docs, mask).cpu(), torch.arange(len(queries))).item()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("name", ["MaxP", "Longtriever", "PARADE", "Hi-Transformer"])
def test_training_lowers_the_loss(name, precision, tiny_bert_with, tokenizer):
    """Dropout off: a random 32-d model gives every document nearly the same single vector (cosine
    > 0.98 between documents), and dropout noise (~30 % per unit) then swamps the 2 % that differ,
    so 16 steps test the noise, not the gradient path. Larger random weights (std 0.2) start the
    single-vector models away from that collapse, as pretrained weights do."""
    from longdoc.models.registry import ENCODERS as MODELS

    corpus, queries, qrels = toy_data(tokenizer)
    model_class = MODELS[name]
    config = model_class.config_class(
        segment_length=16, max_segments=2, max_query_length=8, pooling="mean", precision=precision
    )
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    tiny_bert = tiny_bert_with(**no_dropout, **({} if name == "MaxP" else {"initializer_range": 0.2}))
    model = model_class(config, tiny_bert, tokenizer)
    before = full_batch_loss(model, corpus, queries)
    negatives = {q: [d for d in corpus.doc_ids if d not in qrels[q]] for q in qrels}
    config = TrainConfig(steps=16, batch_size=4, hard_negatives=1, learning_rate=2e-3, warmup_ratio=0.0, seed=0)
    train_biencoder(model, queries, qrels, corpus, negatives, config, progress=False)
    after = full_batch_loss(model, corpus, queries)
    assert after < 0.5 * before, (before, after)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # mixed precision keeps fp32 weights


def test_selection_keeps_the_dev_best_checkpoint(tiny_bert, tokenizer):
    """Evaluated every 2 steps (and after the last); the model returns holding the weights it had at
    the best evaluation (the first of equal scores), not the last ones."""
    corpus, queries, qrels = toy_data(tokenizer)
    model = MaxP(EncoderConfig(segment_length=16, max_segments=2, max_query_length=8), tiny_bert, tokenizer)
    dev_values = iter([0.1, 0.9, 0.9, 0.3, 0.2])
    snapshots, steps = [], []

    def dev_eval(m, step):
        snapshots.append({k: v.clone() for k, v in m.state_dict().items()})
        steps.append(step)
        return next(dev_values)

    config = TrainConfig(
        steps=9, batch_size=4, hard_negatives=0, learning_rate=1e-3, warmup_ratio=0.0, eval_every=2, seed=0
    )
    result = train_biencoder(model, queries, qrels, corpus, {}, config, dev_eval=dev_eval, progress=False)
    assert steps == [2, 4, 6, 8, 9] and [h["step"] for h in result.history] == steps
    assert result.best_step == 4 and result.best_dev == 0.9
    assert [h["epoch"] for h in result.history] == [1, 2, 3, 4, 5]  # 8 queries, 4 per step: 2 steps a pass
    for key, value in model.state_dict().items():  # the model holds the best evaluation's weights
        assert torch.equal(value, snapshots[1][key]), key
    assert any(not torch.equal(snapshots[1][k], snapshots[-1][k]) for k in snapshots[1])


def test_without_dev_the_model_keeps_its_last_weights(tiny_bert, tokenizer):
    corpus, queries, qrels = toy_data(tokenizer)
    model = MaxP(EncoderConfig(segment_length=16, max_segments=2, max_query_length=8), tiny_bert, tokenizer)
    result = train_biencoder(
        model, queries, qrels, corpus, {}, TrainConfig(epochs=2, batch_size=4, hard_negatives=0), progress=False
    )
    assert result.best_step == 4 and [h["step"] for h in result.history] == [2, 4]  # one record per pass


def test_negatives_from_run_skips_relevant_and_respects_depth():
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.5}}
    assert negatives_from_run(run, {"q": {"b": 1}}, depth=3) == {"q": ["a", "c"]}


def test_bad_train_config():
    with pytest.raises(ValueError, match="hard_negatives"):
        TrainConfig(hard_negatives=-1)
    with pytest.raises(ValueError, match="eval_every"):
        TrainConfig(eval_every=-1)


def test_late_cache_negatives_train_and_join_the_loss_from_the_second_step(tiny_bert_with, tokenizer):
    """cache_size > 0: the first step's loss is the plain one (empty cache), later steps differ from a
    run without the cache, and the model still learns."""
    corpus, queries, qrels = toy_data(tokenizer)
    negatives = {q: [d for d in corpus.doc_ids if d not in qrels[q]] for q in qrels}
    histories = {}
    for cache in (0, 6):
        model = MaxP(
            EncoderConfig(segment_length=16, max_segments=2, max_query_length=8, pooling="mean"),
            tiny_bert_with(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
            tokenizer,
        )
        before = full_batch_loss(model, corpus, queries)
        config = TrainConfig(
            steps=12,
            batch_size=2,
            hard_negatives=1,
            learning_rate=2e-3,
            warmup_ratio=0.0,
            seed=0,
            eval_every=1,
            cache_size=cache,
        )
        histories[cache] = [
            h["train_loss"]
            for h in train_biencoder(model, queries, qrels, corpus, negatives, config, progress=False).history
        ]
        assert full_batch_loss(model, corpus, queries) < before
    assert histories[0][0] == pytest.approx(histories[6][0], rel=1e-6)
    assert histories[0][1] != pytest.approx(histories[6][1], rel=1e-3)


def test_a_continued_run_takes_the_batches_after_its_warm_starts():
    """``first_step``: a run that continues from another (a warm start, an earlier iteration) starts its
    training order where that run stopped, so its first batches are new queries, not the same ones again."""
    from torch import nn

    from longdoc.train.steps import continued_order, run_steps

    items = [f"q{i}" for i in range(10)]  # 3 steps per epoch of 4 (the last batch holds 2)

    def batches(steps: int, first_step: int = 0) -> list[list[str]]:
        seen = []
        model = nn.Linear(1, 1)

        def step_loss(wrapped, local, device):
            seen.append(list(local))
            loss = wrapped.weight.sum() * 0 + 1.0
            return loss, 1.0

        config = TrainConfig(steps=steps, batch_size=4, hard_negatives=0, seed=3, first_step=first_step)
        run_steps(model, items, config, step_loss, description="order", progress=False)
        return seen

    fresh = batches(8)
    for first in (0, 2, 3, 5):
        assert batches(8 - first, first) == fresh[first:]
    assert continued_order(0, 3) == (0, 0) and continued_order(3, 3) == (1, 0) and continued_order(4, 3) == (2, 1)
    assert batches(3, 3)[0] != fresh[0]  # a run continued after one epoch starts on the next shuffle


def test_early_stopping_ends_at_the_dev_plateau_and_keeps_the_best_weights():
    """``patience``: training stops once that many dev evaluations in a row fail to beat the best, and
    the model holds the best evaluation's weights; without patience every step runs."""
    from dataclasses import dataclass

    from torch import nn

    from longdoc.train.steps import run_steps

    @dataclass
    class Config:
        steps: int = 10
        batch_size: int = 1
        learning_rate: float = 0.1
        weight_decay: float = 0.0
        warmup_ratio: float = 0.0
        max_grad_norm: float = 0.0
        eval_every: int = 1
        seed: int = 0
        patience: int = 0

    scores = [0.1, 0.5, 0.4, 0.45, 0.3, 0.9, 0.2, 0.1, 0.1, 0.1]  # peaks at step 2 (then at 6, too late for patience 3)

    def train(patience):
        model = nn.Linear(1, 1, bias=False)
        weights = {}

        def dev_eval(m, step):
            weights[step] = m.weight.item()
            return scores[step - 1]

        def step_loss(wrapped, local, device):
            return (wrapped.weight - 5.0).pow(2).sum(), 0.0

        result = run_steps(
            model, ["x"], Config(patience=patience), step_loss, description="plateau", dev_eval=dev_eval, progress=False
        )
        return result, model.weight.item(), weights

    stopped, weight, seen = train(3)
    assert stopped.stopped_early and [h["step"] for h in stopped.history] == [1, 2, 3, 4, 5]
    assert stopped.best_step == 2 and weight == pytest.approx(seen[2])
    full, _, _ = train(0)
    assert not full.stopped_early and len(full.history) == 10 and full.best_step == 6


def test_a_budget_in_epochs_counts_its_steps_at_run_time_as_the_settings_and_the_planner_do():
    """``steps`` 0: ``epochs`` passes over the items, their steps counted as the run starts (the papers give
    epochs; a corpus's size is known once it is read), ``evaluations`` dev evaluations spread over them; the
    study's settings (``train_steps`` 0, ``train_epochs``) hand the trainer the passes, not a step count."""
    from torch import nn

    from longdoc.experiments.settings import BudgetSettings
    from longdoc.train.steps import epoch_steps, run_steps

    items = [f"q{i}" for i in range(10)]  # 3 steps per pass at 4 a step (the last batch holds 2)
    evaluated = []

    def step_loss(wrapped, local, device):
        return wrapped.weight.sum() * 0 + 1.0, 1.0

    def dev_eval(model, step):
        evaluated.append(step)
        return float(step)

    config = TrainConfig(steps=0, epochs=4, batch_size=4, hard_negatives=0, evaluations=3)
    result = run_steps(
        nn.Linear(1, 1), items, config, step_loss, description="epochs", dev_eval=dev_eval, progress=False
    )
    assert evaluated == [4, 8, 12] and result.best_step == 12  # 4 x 3 steps, every 12 // 3
    budget = BudgetSettings(train_steps=0, train_epochs=4, batch_size=4, dev_evals=3, learning_rates=[1e-3])
    train = budget.train_config(1e-3, seed=0)
    assert (train.steps, train.epochs, train.eval_every, train.evaluations) == (0, 4, 0, 3)
    assert epoch_steps(10, 4, world=2) == 2  # two processes take only whole global batches, as run_steps does
