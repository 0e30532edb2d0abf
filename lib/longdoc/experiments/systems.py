"""What a table's row is, and what a family of rows gives the study.

- :class:`System`: one row. Its name, its :class:`Spec` (what the system is), where its settings come
  from (its own dev grid, the family's, or another system's choice: ``settings_from``), and its row
  name in the paper's numbers (``paper_name``).
- :class:`Spec`: a frozen dataclass per kind of row, written by its family (``families/``) or by a
  paper (``papers/``): the plan of cached fits one learning rate and seed needs (``fits``: each fit's
  cache determinants, its work and what runs it; the study executes the plan, the GPU-hour planner
  prices it), how a fit is evaluated (``outcome``), or, for a row
  that is not trained (BM25, a zero-shot encoder, an ensemble), its outcome directly (``evaluate``).
  The study dispatches on these methods, never on a model name.
- :class:`Family`: what the rows of one family share: their data, the dev measure that chooses
  settings and checkpoints, the measures of tables and records, and the learning-rate grid.
- :class:`Outcome`: one run of a system evaluated: its measures per split and its values per item
  (a query, or a pair), the unit of every interval; it writes its run files beside the record.
- :class:`Result`: the outcomes of one system, one per seed, with the choices and training behind them.
- :class:`Table`: what one notebook runs: its family, its rows, which seeds each row runs, the claims it
  tests and (for a paper's headline comparison) how the budget ladder reruns it. Each paper module
  exports its tables; the notebook (:meth:`Study.run_table`), the GPU-hour planner, the explorer's
  catalogue and the ladder all read them (``papers/catalogue.py`` lists every one).

Every ``study`` argument is the :class:`~longdoc.experiments.study.Study` that runs the row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

from longdoc.experiments.cache import portable
from longdoc.experiments.fitting import FineTuned


def pretraining_key(model: str, encoder, pretrain) -> tuple:
    """A pre-training's step key in a fit plan: the study (a deadline's prices) and the GPU-hour planner
    name it alike, so that rows starting from the same pre-training share it."""
    return ("pretraining", model, repr(encoder), repr(pretrain))


class Outcome(Protocol):
    """One run of a system (one seed), evaluated on the study's data."""

    def metrics(self, data, split: str, measures: list[str]) -> dict[str, float]: ...

    def per_item(self, data, split: str, measure: str) -> dict[str, float]: ...

    def write(self, folder: Path, data, tag: str, seed: int | None) -> None: ...


class Family:
    """What the systems of one family share (subclassed once per family, in ``families/``)."""

    name: str = ""
    role: str = ""  # the kind of dataset its notebooks read (``run_all.sh --data ROLE=DIR``)
    selection_measure: str = ""  # the dev measure that chooses learning rates and checkpoints
    measures: tuple[str, ...] = ()  # the test measures of tables and records
    dev_measures: tuple[str, ...] = ()  # the dev measures of tables and records (default: ``measures``)
    trains_to_plateau: bool = False  # its rows train to their dev plateau: a claim needs every run to reach it

    def load(self, study) -> Any:
        """The study's data, every split it needs present (an error before any training)."""
        raise NotImplementedError

    def learning_rates(self, study) -> list[float]:
        """The dev grid of the family's trained systems under the study's parameters."""
        raise NotImplementedError

    def check(self, study) -> None:
        """Refuse, before any work, parameters the family cannot run (e.g. a process count)."""

    def chance(self, study, measure: str, split: str = "test") -> float | None:
        """The value of ``measure`` on ``split`` that a system without skill gets (a random ranking, a
        constant label); None: not known for this measure, and no verdict is gated on it."""
        return None

    def reported_splits(self, study) -> list[str]:
        """The splits a table reports: ``test``, and any further reported set of the study's data (never
        used to choose a setting)."""
        return ["test"]

    def measures_on(self, split: str) -> list[str]:
        return list(self.dev_measures or self.measures) if split == "dev" else list(self.measures)

    def __repr__(self) -> str:
        return f"<{self.name} family>"


class Spec:
    """What a system is, apart from its name and its settings (frozen dataclasses subclass this)."""

    family: ClassVar[Family]

    @property
    def trained(self) -> bool:
        """Whether the system is fitted per learning rate and seed (its rate then chosen on dev)."""
        return True

    def fit(self, study, learning_rate: float, seed: int) -> FineTuned:
        """The system fitted with ``learning_rate`` and ``seed`` (cached): its plan (:meth:`fits`) executed by
        the study (:meth:`~longdoc.experiments.study.Study.execute`)."""
        return study.execute(self, learning_rate, seed)

    def fits(self, plan, learning_rate: float, seed: int) -> None:
        """The fits this row needs at ``learning_rate`` and ``seed``, said to ``plan`` step by step, each
        step after those it depends on: a pre-training (``plan.pretraining(model, encoder, pretrain, run)``),
        another row's chosen fit (``plan.needs(system, seed)``: a warm start), each cached fit by its cache
        determinants with its work and what runs it (``plan.fit(key, works, run)``: works from
        ``plan.work``, ``plan.encode``, ``plan.dev_evaluations``; ``run(study)`` returns the fit, or None
        for a fit that another step's run makes within: an earlier iteration, a miner's negatives), and
        what is not priced (``plan.not_priced``). The row's fit is the one the last ``run`` returns. One
        plan, two readers: the study executes it (:class:`~longdoc.experiments.study.Execution`, which
        computes no work) and the GPU-hour planner prices it (:class:`~longdoc.bench.gpu_hours.Planner`,
        which runs nothing)."""
        raise TypeError(f"{type(self).__name__}: no fit plan (give it a fits method)")

    def outcome(self, study, fit: FineTuned) -> Outcome:
        """A fit evaluated on the dev and test splits."""
        raise NotImplementedError(f"{type(self).__name__} is not trained")

    def evaluate(self, study, seeds: list[int]) -> tuple[list, list[Outcome]]:
        """An untrained system's ``(seeds, outcomes)``: ``[None]`` and one outcome for a deterministic one."""
        raise NotImplementedError(f"{type(self).__name__} is trained: the study fits it")

    def untrained_cost(self, planner, seeds: list[int]) -> None:
        """The cost of an untrained row's outcome (:meth:`evaluate`), said to ``planner``; nothing by default
        (BM25 runs on CPUs)."""

    def summary(self, fit: FineTuned, seed: int) -> dict | None:
        """The training summary of one fit for the record (:meth:`FineTuned.summary`; None: the fit is another
        row's, whose summary stands there)."""
        return fit.summary(seed)

    def start(self, study) -> Path | None:
        """The pre-trained checkpoint that fitting starts from (None: the backbone itself)."""
        return None

    def pretraining(self, study) -> dict | None:
        """A summary of the pre-training behind the start, for the record (None: none)."""
        return None

    def pretraining_steps(self, study) -> list[dict]:
        """One record per pre-training step (its phase and losses) behind the start; [] when none."""
        return []

    def without_pretraining(self) -> Spec | None:
        """The same row started without its pre-training: the start a pre-trained row must beat
        (None: the row is not pre-trained)."""
        return None

    def start_key(self) -> str:
        """What determines the model before fine-tuning (rows that differ only in how they are
        fine-tuned share a start and its probe)."""
        return repr(self)

    def start_probe(self, study) -> dict | None:
        """The model before fine-tuning, probed on dev: ``{"score": higher is better, "loss": lower is
        better (optional), "probe": what was measured, ...}``; None: the family has no probe."""
        return None

    def measure(self, study, fit: FineTuned) -> None:
        """What a table reads of ``fit``'s model (a cost, a parameter count), measured right after the
        row's first-seed fit at its chosen rate (the fit a cost table reads), while the model is on this
        machine, into small cached files that travel with it (:func:`longdoc.experiments.cache.cached_json`);
        nothing by default."""

    def start_origin(self, study) -> dict:
        """What pins the start beyond :meth:`start_key` (the cached probe's key): the pre-trained
        checkpoint it loads (its cache path)."""
        start = self.start(study)
        return {"pretrained": portable(start) if start is not None else None}

    def describe(self) -> dict:
        """Every field, for the record; systems by their names, configs as dicts."""
        return {
            "kind": type(self).__name__,
            **{f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)},
        }


def _plain(value):
    if isinstance(value, System):
        return value.name
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


@dataclass(frozen=True)
class System:
    """One row of a table."""

    name: str
    spec: Spec
    settings_from: System | None = None  # take this system's dev-chosen learning rate (ablation rows, sweep points)
    learning_rates: tuple = ()  # its own dev grid instead of its family's (rows whose weights start random)
    paper_name: str = ""  # its row in ``data/paper_results`` (the paper's value beside ours)

    @property
    def family(self) -> Family:
        return self.spec.family

    def learning_rate_grid(self, study) -> list[float]:
        """The learning rates searched on dev for this row: its own grid, else its family's under the study."""
        return list(self.learning_rates or self.family.learning_rates(study))

    def describe(self) -> dict:
        return {
            **self.spec.describe(),
            "family": self.family.name,
            "settings_from": self.settings_from.name if self.settings_from else None,
            **({"learning_rates": list(self.learning_rates)} if self.learning_rates else {}),
        }


@dataclass
class Result:
    """The runs of one system: one outcome per seed (one in all for a deterministic system)."""

    system: System
    seeds: list  # the fitting seeds; [None] for a system without training
    outcomes: list
    selection: dict | None = None
    training: list[dict] = field(default_factory=list)
    pretraining: dict | None = None
    fits: list = field(default_factory=list)  # the cached fits behind the outcomes (trained systems)

    @property
    def name(self) -> str:
        return self.system.name

    @property
    def test_runs(self) -> list:
        """The test runs of a system whose outcomes are runs (retrieval and generative families)."""
        return [o.runs["test"] for o in self.outcomes]

    @property
    def dev_runs(self) -> list:
        return [o.runs["dev"] for o in self.outcomes]

    def metrics(self, data, split: str, measures: list[str]) -> list[dict[str, float]]:
        """One dict of measures per seed."""
        return [o.metrics(data, split, measures) for o in self.outcomes]

    def per_item(self, data, measure: str, split: str = "test") -> list[dict[str, float]]:
        """Per-item values (query or pair) per seed, for intervals over items and seeds."""
        return [o.per_item(data, split, measure) for o in self.outcomes]


SEED_POLICIES = ("all", "first", "claimed")


@dataclass(frozen=True)
class Headline:
    """A table's headline comparison as the budget ladder (notebook 90) reruns it at growing budgets:
    ``rows`` (the rows its claims need) and ``claims`` from the table's own; ``notebook`` and ``family``
    are its table's (set by :class:`Table`)."""

    key: str  # its multipliers are the parameter ladder_<key>
    paper: str
    budget: tuple[str, ...]  # the parameters a rung multiplies
    items_per_step: str  # the parameter giving training items (queries, pairs, examples) per step
    rows: Callable[[Any], list[System]]
    claims: Callable[[Any, list[System]], list]
    notebook: str = ""
    family: Family | None = None


@dataclass(frozen=True)
class Table:
    """What one notebook runs: its rows (built by the paper module from the study), the seeds of each
    row (``seeds``: ``"all"`` the study's, ``"first"`` only the first: a sweep; ``"claimed"``: the study's
    for every row a claim compares, so each claim has two runs a side, and only the first for the other
    points of a sweep; ``single_seed`` picks rows of an all-seeds table that run once), the claims it tests (on the rows it ran, by their objects), and
    its headline for the ladder; ``beside``: rows it measures without fitting and without claims beside
    the table (a backbone's zero-shot), which the GPU-hour planner prices too."""

    notebook: str
    family: Family
    rows: Callable[[Any], list[System]]
    claims: Callable[[Any, list[System]], list] | None = None
    seeds: str = "all"
    single_seed: Callable[[list[System]], list[System]] | None = None
    headline: Headline | None = None
    beside: Callable[[Any], list[System]] | None = None

    def __post_init__(self) -> None:
        if self.seeds not in SEED_POLICIES:
            raise ValueError(f"{self.notebook}: seeds={self.seeds!r}; expected one of {SEED_POLICIES}")
        if self.seeds == "claimed" and self.claims is None:
            raise ValueError(f"{self.notebook}: seeds='claimed' needs the table's claims")
        if self.headline is not None:  # the headline reruns this table's notebook in its family
            object.__setattr__(self, "headline", replace(self.headline, notebook=self.notebook, family=self.family))

    def runs(self, study) -> list[tuple[System, list]]:
        """Each row with the seeds it runs under ``study`` (what :meth:`Study.run_table` fits and the GPU-hour
        planner prices)."""
        rows = self.rows(study)
        single = self.single_seed(rows) if self.single_seed else []
        first = self.seeds == "first"
        if self.seeds == "claimed":  # a claimed table's claims name its rows without running anything
            compared = {name for claim in self.claims(study, rows) for name in (claim.system, claim.against)}
            single = [row for row in rows if row.name not in compared]
        return [(row, list(study.seeds[:1] if first or row in single else study.seeds)) for row in rows]
