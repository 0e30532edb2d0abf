"""Typed settings: a study's parameters as frozen dataclasses whose fields are the glossary's names.

The glossary (:mod:`longdoc.experiments.parameters`) names, explains and range-checks every parameter;
library code reads them as attributes of a settings class, built by keyword from the checked values
(:meth:`longdoc.experiments.study.Study.settings`), so a parameter can be followed from the profile to
the config it ends in. Each family and paper declares the settings it reads with :func:`settings`; the
shared ones are here. A field without a default must be declared by the notebook that asks for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from longdoc.experiments.parameters import PARAMETERS, check_combinations

T = TypeVar("T")
SETTINGS: list[type] = []  # every settings class (a test checks each against the glossary and the notebooks)


def settings(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen settings dataclass; every field must be a parameter of the glossary."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    unknown = [f.name for f in dataclasses.fields(cls) if f.name not in PARAMETERS]
    if unknown:
        raise TypeError(f"{cls.__qualname__}: fields {unknown} are not parameters of longdoc.experiments.parameters")
    SETTINGS.append(cls)
    return cls


def required_fields(kind: type) -> list[dataclasses.Field]:
    """The fields of a settings class without a default (parameters its notebook must declare)."""
    return [
        f
        for f in dataclasses.fields(kind)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def from_parameters(kind: type[T], values: dict[str, Any], notebook: str) -> T:
    """``kind`` built from checked parameter values; a missing required one is named."""
    fields = dataclasses.fields(kind)
    missing = [f.name for f in required_fields(kind) if f.name not in values]
    if missing:
        raise ValueError(f"{notebook}: {kind.__name__} needs parameter(s) {missing}, which {notebook} does not declare")
    return kind(**{f.name: values[f.name] for f in fields if f.name in values})


EPOCHS_OF = {"train_steps": "train_epochs", "nci_train_steps": "nci_train_epochs", "pretrain_steps": "pretrain_epochs"}


def scaled_budget(params: dict[str, Any], name: str, multiple: int) -> dict[str, Any]:
    """Budget ``name`` (a step count of :data:`EPOCHS_OF`, or another count) times ``multiple``, as the
    changed parameters: its steps, or where it is 0 (a budget in passes) its epochs."""
    if params.get(name) == 0 and name in EPOCHS_OF:
        epochs = EPOCHS_OF[name]
        return {epochs: params.get(epochs, 1) * multiple}
    return {name: params[name] * multiple}


def budget_text(params: dict[str, Any], name: str = "train_steps") -> str:
    """A budget as a table or title states it: ``N steps``, or ``E passes`` where it is given in passes."""
    if params.get(name) == 0 and name in EPOCHS_OF:
        return f"{params.get(EPOCHS_OF[name], 1)} passes"
    return f"{params[name]} steps"


@settings
class StudySettings:
    """What every study reads: where its record goes, its data, its seeds."""

    profile: str = "default"
    dataset: str | None = None  # None: a study without data (the efficiency benchmark on random weights)
    max_docs: int = 0
    seeds: list | None = None  # the fitting seeds (the first one selects the settings)
    seed: int = 0  # the seed of a notebook without fitting runs

    @property
    def seed_list(self) -> list[int]:
        return list(self.seeds) if self.seeds is not None else [self.seed]


@settings
class EncoderSettings:
    """The block shape, start rule and precision every encoder of a table reads."""

    backbone: str
    pooling: str
    precision: str
    block_size: int  # M
    max_blocks: int  # N
    query_length: int

    def encoder(self, model: str, **changes):
        """The config of registry model ``model`` under these settings; FirstP (and MatchBERT) read one
        block (``reads_one_block``); ``changes`` override any field (``segment_length`` for FirstP over N × M tokens,
        ``doc_token=False`` for an ablation row)."""
        from longdoc.models.registry import encoder_class

        fields = dict(
            backbone=self.backbone,
            segment_length=self.block_size,
            max_segments=self.max_blocks,
            max_query_length=self.query_length,
            pooling=self.pooling,
            precision=self.precision,
        )
        model_class = encoder_class(model)
        if model_class.reads_one_block:
            fields["max_segments"] = 1
        return model_class.config_class(**(fields | changes))


@settings
class ProcessSettings:
    """How many processes (one per GPU) a fitting runs in."""

    n_devices: int = 1


@settings
class BudgetSettings:
    """The fitting budget every trained row of a table gets, and the dev grid of its learning rate."""

    train_steps: int  # 0: train_epochs passes, their steps counted by the trainer as it starts
    batch_size: int  # items per step in all processes together
    dev_evals: int
    learning_rates: list
    n_devices: int = 1
    dev_candidates: int = 0  # > 0: dev evaluations rank BM25's top k per dev query and the judged documents
    patience: int = 0  # > 0: each run stops at its dev plateau; train_steps is the ceiling
    train_epochs: int = 1  # the budget in passes over the training examples, where train_steps is 0

    def __post_init__(self) -> None:
        check_combinations(dataclasses.asdict(self))  # dev_evals <= train_steps, batch_size % n_devices

    def train_config(self, learning_rate: float, seed: int, hard_negatives: int = 0, cache_size: int = 0):
        """``batch_size`` items per step in all (``batch_size / n_devices`` per process)."""
        from longdoc.train.loop import TrainConfig

        return TrainConfig(
            steps=self.train_steps,
            epochs=self.train_epochs,
            batch_size=self.batch_size // self.n_devices,
            hard_negatives=hard_negatives,
            learning_rate=learning_rate,
            eval_every=max(1, self.train_steps // self.dev_evals) if self.train_steps else 0,
            evaluations=0 if self.train_steps else self.dev_evals,  # spread over the passes' steps
            seed=seed,
            cache_size=cache_size,
            patience=self.patience,
        )
