"""The study protocol every notebook follows: data, budget, start rule, dev selection, seeds, recording.

A notebook opens one :class:`Study` from its parameters and its family
(``Study.open(notebook, globals(), RETRIEVAL)``) and runs its paper module's :class:`~longdoc.experiments.systems.Table`
(``study.run_table(paper.MAIN)``: each row, a :class:`~longdoc.experiments.systems.System`, with its seeds
through :meth:`Study.run`).
The same protocol serves the retrieval, matching and generative families (``experiments/families/``):

- **Budget and start rule.** Every trained system of a table gets the same fitting budget (the family's
  steps and items per step) and reads its vector under the study's ``pooling`` rule; new parameters are
  drawn under the run's seed.
- **Settings chosen on dev, in code.** Each system's learning rate is chosen from its family's grid (or
  the system's own) by the family's dev measure with the first seed; each run keeps its dev-best
  checkpoint. Test judgements are never read for any choice. An ablation row may take another
  system's choice (``settings_from``); the record says so.
- **Seeds.** The chosen setting runs once per seed; tables give mean ± standard deviation over seeds,
  comparisons a 95% interval over items (queries; document pairs with their shared documents) and seeds
  (:func:`longdoc.eval.significance.seed_query_bootstrap`).
- **Recording.** ``results/<profile>/<dataset>/<notebook>/metrics.json`` holds the parameters, every
  choice, per-seed metrics, comparisons and findings, with the data checksum, code fingerprint and
  versions; run files sit beside it. Every fit is cached, so notebooks share the runs they have in common.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import resource
import time
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from longdoc.data.registry import REPO_ROOT
from longdoc.eval.significance import seed_query_bootstrap, seed_query_interval
from longdoc.experiments.backbones import backbone_path, is_built
from longdoc.experiments.cache import build_guard, cached_json, code_fingerprint, dataset_key, record_fingerprint
from longdoc.experiments.deadline import ChainGuard
from longdoc.experiments.fitting import CheckpointMissing, FineTuned
from longdoc.experiments.paper import paper_beside
from longdoc.experiments.parameters import PARAMETERS, check_parameters
from longdoc.experiments.preconditions import (
    above_chance,
    compares_pretraining,
    paper_start,
    pretraining_works,
    reached_plateau,
)
from longdoc.experiments.profiles import profile_values
from longdoc.experiments.records import (
    RESULTS_DIR,
    check_record_slot,
    data_folder,
    dataset_slug,
    record_folder,
    write_metrics,
)
from longdoc.experiments.settings import SETTINGS, BudgetSettings, StudySettings, from_parameters, required_fields
from longdoc.experiments.systems import Family, Result, Spec, System, Table, pretraining_key
from longdoc.experiments.tables import P_COLUMN, difference_label, markdown_table, summary_table, use_display_format
from longdoc.experiments.verdicts import MDD, Claim, Findings, Precondition, assess
from longdoc.plots import FIGURES_DIR

T = TypeVar("T")


class Execution:
    """A row's fit plan (:meth:`~longdoc.experiments.systems.Spec.fits`) executed for ``study``: each step
    runs as it is said and the fit the last ``run`` returns is kept (:attr:`fitted`); what a step costs is
    not computed (the GPU-hour planner, :class:`~longdoc.bench.gpu_hours.Planner`, reads the same plan and
    prices it)."""

    def __init__(self, study: Study):
        self.study = study
        self.fitted: FineTuned | None = None
        self.chain = ChainGuard(study.notebook)  # a deadline stops the chain before its first build
        self.pending: tuple | None = None  # the first step another step's run makes within (its price covers both)

    def _run(self, key: tuple, run):
        first, self.pending = self.pending or key, None
        with build_guard(lambda kind: self.chain.check(first)):
            return run(self.study)

    def budget(self) -> BudgetSettings:
        return self.study.settings(BudgetSettings)

    def needs(self, system: System, seed: int) -> float:
        """Another row's fit at its chosen rate with ``seed`` (a warm start), fitted now; that rate."""
        self.study.fit(system, seed)
        return self.study.selection(system)["learning_rate"]

    def pretraining(self, model: str, encoder, pretrain, run) -> None:
        if pretrain is not None:
            self._run(pretraining_key(model, encoder, pretrain), run)

    def fit(self, key: tuple, works: list, run=None) -> None:
        if run is None:  # another step's run makes it within: that run's build starts here
            self.pending = self.pending or key
        else:
            self.fitted = self._run(key, run)

    def work(self, *description, **details) -> None:  # the planner's; nothing to execute
        return None

    encode = work

    def dev_evaluations(self, *description) -> list:
        return []

    def fine_tuning_steps(self, budget) -> int:  # the planner's (a run counts its own examples as it starts)
        return budget.train_steps

    def nci_steps(self, options, queries) -> int:
        return options.nci_train_steps

    def not_priced(self, what: str) -> None:
        pass

    def stage(self, *description, **details) -> None:  # the planner's stages around a fit: each runs where
        return None  # the fit (or the notebook) needs it, not from the plan

    tokenise = bm25_per_notebook = bm25_search = generation = identifiers = decoded = stage

    def decoding(self, *description) -> tuple[list, list]:
        return [], []

    def tokenised_in_processes(self, *description) -> list:
        return []


def changed(filed: dict, ran: dict) -> dict:
    """The parameters a study ran at that differ from those its record is filed under."""
    return {name: value for name, value in ran.items() if filed.get(name) != value}


def chance_of_rho(starts: np.ndarray, finals: np.ndarray, rho: float) -> float:
    """How often the final scores in a random order give |Spearman ρ| ≥ |``rho``| against the starts: exact
    over every order for up to eight rows (with three, ρ = ±1 comes one time in three), else scipy's p."""
    from scipy.stats import rankdata, spearmanr

    if len(finals) > 8:
        return float(spearmanr(starts, finals).pvalue)
    x, y = rankdata(starts), rankdata(finals)  # ρ is Pearson's r of the (average) ranks
    orders = y[np.array(list(itertools.permutations(range(len(y)))))]  # [n!, n]
    x, orders = x - x.mean(), orders - orders.mean(1, keepdims=True)
    rhos = orders @ x / np.sqrt((orders**2).sum(1) * (x**2).sum())
    return float(np.mean(np.abs(rhos) >= abs(rho) - 1e-12))


class Study:
    """One notebook's experiment: its parameters, data, systems and record."""

    def __init__(self, notebook: str, parameters: dict[str, Any], family: Family | None = None, progress: bool = True):
        self.notebook = notebook
        self.params = check_parameters(parameters)
        self.filed_params = self.params  # what the record is filed under (a searched budget: the notebook's own)
        self.family = family
        self.progress = progress
        self.started = time.time()
        self.results: dict[str, Result] = {}
        self.shown: list[dict] = []  # tables the notebook showed, in order (for the record and the report)
        self.figures: list[str] = []
        self.verdicts: Findings | None = None
        self._data = None
        self._selections: dict[str, dict] = {}
        self._settings: dict[type, Any] = {}
        self._probes: dict[str, dict | None] = {}
        self._start_scores: tuple = ((), None)  # (the rows it was computed for, the frame)
        self._preconditions: dict[tuple[str, str], list[Precondition]] = {}
        self.options = self.settings(StudySettings)
        for kind in SETTINGS:  # every settings view the notebook declares is built now: cross-parameter errors
            if all(f.name in self.params for f in required_fields(kind)):  # stop it before any work
                self.settings(kind)
        if family is not None:
            family.check(self)
        if "profile" in self.params and self.options.dataset is None:  # a study without data: checked now
            check_record_slot(*self._slot("none"))

    @classmethod
    def open(
        cls, notebook: str, namespace: dict[str, Any], family: Family | None = None, progress: bool = True
    ) -> Study:
        """The study of ``notebook`` with the parameters found in ``namespace`` (its ``globals()``), its record's
        folder checked before any work (:func:`~longdoc.experiments.records.check_record_slot`); the notebook's
        tables show numbers as the report does (:func:`~longdoc.experiments.tables.format_number`)."""
        use_display_format()
        study = cls(notebook, {name: namespace[name] for name in PARAMETERS if name in namespace}, family, progress)
        if "profile" in study.params:  # a notebook's record folder, before any work (the data checks it again)
            check_record_slot(*study._slot(None))
        return study

    def with_parameters(self, **changes) -> Study:
        """This notebook's study with some parameters changed (a budget searched upward): its own fits, the
        loaded data, and the tables, figures and clock of this one; its record is filed under this one's
        parameters (the profile's slot), with the values it ran at beside them (``ran_with``)."""
        other = Study(self.notebook, {**self.params, **changes}, self.family, self.progress)
        other.started, other.shown, other.figures, other._data = self.started, self.shown, self.figures, self._data
        other.filed_params = self.filed_params
        return other

    def settings(self, kind: type[T]) -> T:
        """The study's parameters as the typed settings ``kind`` (:mod:`longdoc.experiments.settings`)."""
        if kind not in self._settings:
            value = from_parameters(kind, self.params, self.notebook)
            if is_built(getattr(value, "backbone", "")):  # a backbone built here: its folder (built on first use)
                value = dataclasses.replace(value, backbone=backbone_path(value.backbone))
            self._settings[kind] = value
        return self._settings[kind]

    # -- data -----------------------------------------------------------------------------------
    @property
    def data(self):
        """The family's data (every split present: an error before any training)."""
        if self._data is None:
            if self.family is None:
                raise ValueError(f"{self.notebook}: a study without a family has no data")
            data = self.family.load(self)
            check_record_slot(*self._slot(data.checksum))
            self._data = data
        return self._data

    def _slot(self, data_checksum: str | None) -> tuple:
        """The arguments of :func:`check_record_slot` for this study's record."""
        return self.directory, self.options.profile, self.filed_params, data_checksum, self.profile_config

    @functools.cached_property
    def profile_config(self) -> dict | None:
        """The values the file of this study's profile gives its notebook (None: no such file or notebook)."""
        return profile_values(self.options.profile, self.notebook) if "profile" in self.params else None

    def split(self, name: str):
        return self.data.split(name)

    @property
    def seeds(self) -> list[int]:
        return self.options.seed_list

    @property
    def dataset_name(self) -> str:
        return dataset_slug(self.data.name) if self.options.dataset is not None else "random-weights"

    @property
    def directory(self) -> Path:
        """``results/<profile>/<data folder>/<notebook>`` (:func:`~longdoc.experiments.records.data_folder`)."""
        return record_folder(self.options.profile, self.notebook, self.params, RESULTS_DIR)

    def figure_path(self, name: str) -> Path:
        path = FIGURES_DIR / self.options.profile / data_folder(self.params) / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.figures.append(path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path))
        return path

    def show(self, title: str, frame: pd.DataFrame, note: str = "", index: bool = True) -> pd.DataFrame:
        """Keep ``frame`` for the record and the results report, and return it for display."""
        self.shown.append({"title": title, "note": note, "markdown": markdown_table(frame, index=index)})
        return frame

    def findings(self, claims: list[Claim], context: str = "") -> Findings:
        """Verdicts of the paper's claims from our intervals (:mod:`longdoc.experiments.verdicts`), with how
        far the rows' starts predict their final scores (:meth:`start_line`) after the context."""
        table = assess(self, claims)
        self.verdicts = Findings(table, "\n\n".join(t for t in (context, self.start_line()) if t))
        return self.verdicts

    # -- where the rows start ------------------------------------------------------------------------
    def start_scores(self) -> pd.DataFrame:
        """Each trained row's start on the family's dev probe (:meth:`start_probe`, before fine-tuning;
        ``start accuracy``: the probe's accuracy, in-batch for retrieval, at the dev-best threshold for
        matching) beside its final mean test selection measure; empty where the family has no probe."""
        memo = tuple(self.results)
        if self._start_scores[0] != memo:
            self._start_scores = (memo, self._start_frame())
        return self._start_scores[1]

    def _start_frame(self) -> pd.DataFrame:
        measure = self.family.selection_measure if self.family is not None else None
        rows = {}
        for name, result in self.results.items():
            if not result.system.spec.trained:
                continue
            probe = self.start_probe(result.system.spec)
            if probe is None:
                continue
            final = self.table([name], [measure])[measure].iloc[0]
            rows[name] = {"start probe": probe["score"], "start accuracy": probe["accuracy"], f"test {measure}": final}
        return pd.DataFrame(rows).T

    def start_line(self) -> str:
        """What the rows read of their backbone (:meth:`pooling_line`) and Spearman's ρ between the trained
        rows' start probes and their final test scores (with three rows or more): near 1, the fine-tuning
        budget kept the order the starts had."""
        from scipy.stats import spearmanr

        frame = self.start_scores()
        if len(frame) < 3:
            return f"{self.pooling_line()}{self.no_rho_reason(len(frame))}".strip()
        final = frame.columns[-1]
        rho = float(spearmanr(frame["start probe"], frame[final]).statistic)
        said = "Spearman ρ undefined (the starts or the scores tie)"
        if rho == rho:
            chance = chance_of_rho(frame["start probe"].to_numpy(float), frame[final].to_numpy(float), rho)
            said = (
                f"Spearman ρ = {rho:.2f} (rows in a random order reach |ρ| ≥ {abs(rho):.2f} with probability "
                f"{chance:.2g})"
            )
        ranked = ", ".join(f"{n} {frame.loc[n, 'start probe']:.3f}" for n in frame.index)
        return (
            f"{self.pooling_line()}Start probes (dev, before fine-tuning) against the final {final} over "
            f"{len(frame)} trained rows: {said}. Starts: {ranked}."
        )

    def no_rho_reason(self, probed: int) -> str:
        """Why a table gives no start-probe ρ ("" where it has no trained row at all)."""
        trained = sum(bool(r.system.spec.trained) for r in self.results.values())
        if not trained:
            return ""
        if not probed:
            return (
                "No start-probe ρ: this family has no probe of a start before fine-tuning (a generative "
                "retriever decodes identifiers it has not yet learned, so its start retrieves nothing to compare)."
            )
        return f"No start-probe ρ: {probed} of {trained} trained rows have a start probe; ρ needs three."

    def pooling_line(self) -> str:
        """What the rows read of their backbone against how it was trained ("" without a backbone)."""
        from longdoc.experiments.backbones import MLM_TRAINED, backbone_training

        backbone, pooling = self.params.get("backbone"), self.params.get("pooling")
        if not backbone or not pooling:
            return ""
        reading = (
            "a summary token ([CLS], [DOC]) as the papers' models do" if pooling == "cls" else f"{pooling} pooling"
        )
        trained = backbone_training(str(backbone))
        if trained.startswith(MLM_TRAINED):
            return f"The rows read {reading}, from {trained}, as the papers assume. "
        return (
            f"The rows read {reading}, but the backbone is {trained}; the packaged MiniLM was trained with mean "
            "pooling, so every row starts from a reading its backbone was not trained for (the probes measure it). "
        )

    def start_difference(self, claim: Claim) -> float | None:
        """The two compared rows' start accuracy difference on the dev probe (system − against; None: a
        row without a probe, or untrained)."""
        frame = self.start_scores()
        if claim.system not in frame.index or claim.against not in frame.index:
            return None
        return float(frame.loc[claim.system, "start accuracy"] - frame.loc[claim.against, "start accuracy"])

    def claims_figure(self, findings: Findings):
        """The notebook's verdicts as a forest plot (:func:`~longdoc.plots.claim_forest`): each claim's Δ
        with its 95% interval, coloured by verdict, beside the paper's own Δ; None without intervals."""
        from longdoc.analysis.claim_cards import findings_frame, notebook_claims_title
        from longdoc.plots import claim_forest

        frame = findings_frame(findings.table)
        if not len(frame):
            return None
        path = self.figure_path(f"{self.notebook}_claims")
        return claim_forest(frame, path, notebook_claims_title(self.notebook), close=False)

    def note_findings(self, text: str, verdicts: pd.DataFrame | None = None) -> Findings:
        """Findings that are not intervals between two systems (computed by the caller from its
        numbers): a text, and optionally a table with a ``verdict`` column."""
        self.verdicts = Findings(pd.DataFrame() if verdicts is None else verdicts, text)
        return self.verdicts

    # -- systems -------------------------------------------------------------------------------
    def selection(self, system: System) -> dict:
        """The learning rate chosen on dev for ``system`` (its grid with the first seed, by its family's
        selection measure), or the one of ``system.settings_from``."""
        if system.name in self._selections:
            if self._selections[system.name]["system"] != system.describe():
                raise ValueError(f"two different systems are named {system.name!r} in this study")
            return self._selections[system.name]
        if system.settings_from is not None:
            source = self.selection(system.settings_from)
            chosen = {
                "learning_rate": source["learning_rate"],
                "inherited_from": system.settings_from.name,
                "measure": source["measure"],
            }
        else:
            grid = {lr: system.spec.fit(self, lr, self.seeds[0]).best_dev for lr in system.learning_rate_grid(self)}
            best = max(grid.values())
            chosen = {
                "learning_rate": next(lr for lr, score in grid.items() if score == best),
                "dev": {str(lr): score for lr, score in grid.items()},
                "measure": f"dev {system.family.selection_measure}",
                "seed": self.seeds[0],
            }
        chosen["system"] = system.describe()
        self._selections[system.name] = chosen
        return chosen

    def fit(self, system: System, seed: int | None = None) -> FineTuned:
        """The system's fit at its chosen learning rate with ``seed`` (default: the first seed; cached)."""
        if not system.spec.trained:
            raise ValueError(f"{system.name}: not a trained system")
        return system.spec.fit(self, self.selection(system)["learning_rate"], self.seeds[0] if seed is None else seed)

    def execute(self, spec: Spec, learning_rate: float, seed: int) -> FineTuned:
        """``spec``'s fit plan (:meth:`~longdoc.experiments.systems.Spec.fits`) at ``learning_rate`` and
        ``seed`` executed step by step; the fit its last ``run`` returns (cached)."""
        execution = Execution(self)
        spec.fits(execution, learning_rate, seed)
        if execution.fitted is None:
            raise TypeError(f"{type(spec).__name__}: its fit plan runs no fit")
        return execution.fitted

    def _measure(self, spec: Spec, fit: FineTuned) -> None:
        try:
            spec.measure(self, fit)
        except CheckpointMissing:  # imported without its model and its measures: a table reading them says so
            pass

    def run(self, system: System, seeds: list[int] | None = None) -> Result:
        """The system's outcomes on dev and test: one fit per seed (``seeds``, default the study's) at the
        learning rate chosen on dev, or the untrained system's own outcome."""
        seeds = list(seeds or self.seeds)
        spec = system.spec
        if not spec.trained:
            ran, outcomes = spec.evaluate(self, seeds)
            result = Result(system, ran, outcomes)
        else:
            selection = self.selection(system)
            fits, outcomes = [], []
            for seed in seeds:  # each outcome right after its fit: what reads the model runs while it is here
                fits.append(spec.fit(self, selection["learning_rate"], seed))
                outcomes.append(spec.outcome(self, fits[-1]))
                if seed == self.seeds[0]:  # what tables read of the first seed's model (its costs)
                    self._measure(spec, fits[-1])
            summaries = [spec.summary(fit, seed) for seed, fit in zip(seeds, fits)]
            training = [summary for summary in summaries if summary is not None]  # None: another row's training
            result = Result(
                system,
                seeds,
                outcomes,
                selection,
                training,
                spec.pretraining(self),
                fits,
            )
        self.results[system.name] = result
        return result

    def run_all(self, systems: list[System], seeds: list[int] | None = None) -> list[Result]:
        return [self.run(system, seeds) for system in systems]

    def run_table(self, table: Table) -> list[System]:
        """Every row of ``table`` (:class:`~longdoc.experiments.systems.Table`) with its seeds, in order; the
        rows it ran (their results are in :attr:`results`)."""
        if self.family is not None and table.family is not self.family:
            raise ValueError(
                f"{self.notebook}: table {table.notebook} is of the {table.family.name} family, "
                f"this study of the {self.family.name} family"
            )
        runs = table.runs(self)
        for system, seeds in runs:
            self.run(system, seeds)
        return [system for system, _ in runs]

    def table_findings(self, table: Table, rows: list[System]) -> Findings:
        """Verdicts of ``table``'s claims on the ``rows`` it ran (:meth:`findings`)."""
        if table.claims is None:
            raise ValueError(f"table {table.notebook} has no claims")
        return self.findings(table.claims(self, rows))

    # -- what a claim needs ----------------------------------------------------------------------
    def start_probe(self, spec: Spec) -> dict | None:
        """The dev probe of a row's start (:meth:`Spec.start_probe`), once per start in the study."""
        if type(spec).start_probe is Spec.start_probe:
            return None  # the family has no probe
        key = spec.start_key()
        if key not in self._probes:  # cached with what pins the start (a warm start's fit, a pre-training)
            self._probes[key] = cached_json(
                "start_probe",
                lambda: spec.start_probe(self),
                start=key,
                origin=spec.start_origin(self),
                seed=self.seeds[0],
                **dataset_key(self.data),
            )
        return self._probes[key]

    def preconditions(self, name: str, measure: str) -> list[Precondition]:
        """What must hold of system ``name`` for a claim on ``measure`` to be tested
        (:mod:`longdoc.experiments.preconditions`): its pre-training learned (with its start probe as a
        diagnostic), it is above chance, it reached its dev plateau (where its family trains to one)."""
        if (name, measure) not in self._preconditions:
            system = self.results[name].system
            found = [*pretraining_works(self, system), above_chance(self, name, measure), reached_plateau(self, name)]
            self._preconditions[name, measure] = [c for c in found if c is not None]
        return self._preconditions[name, measure]

    def start_conditions(self, claim: Claim) -> list[Precondition]:
        """A pre-training claim's start rule (:func:`~longdoc.experiments.preconditions.paper_start`)."""
        return paper_start(self, claim)

    def compares_pretraining(self, claim: Claim) -> bool:
        """Whether ``claim`` compares pre-training (:func:`~longdoc.experiments.preconditions.compares_pretraining`)."""
        return compares_pretraining(self, claim)

    # -- tables and comparisons ---------------------------------------------------------------
    def table(
        self,
        names: list[str] | None = None,
        measures: list[str] | None = None,
        split: str = "test",
        intervals: bool = False,
    ) -> pd.DataFrame:
        """Mean and standard deviation over seeds of each measure (default: the family's), one row per
        system; with ``intervals``, also each mean's 95% interval over queries and seeds
        (``m 95% low`` / ``m 95% high``, resampled as the verdicts' differences are; NaN for a measure
        without per-item values, such as F1)."""
        measures = list(measures or self.family.measures_on(split))
        rows = {}
        for name in names or list(self.results):
            result = self.results[name]
            per_seed = pd.DataFrame(result.metrics(self.data, split, measures))
            rows[name] = {
                **{m: per_seed[m].mean() for m in measures},
                **{f"{m} sd": per_seed[m].std(ddof=1) if len(per_seed) > 1 else 0.0 for m in measures},
                "seeds": len(per_seed) if result.seeds != [None] else 0,
            }
            if intervals:
                for m in measures:
                    low, high = self._mean_interval(result, m, split)
                    rows[name] |= {f"{m} 95% low": low, f"{m} 95% high": high}
        return pd.DataFrame(rows).T.astype({"seeds": int})

    def _mean_interval(self, result, measure: str, split: str) -> tuple[float, float]:
        values = self._per_item(result, measure, split)
        if values is None:  # no per-item values (F1): no interval
            return float("nan"), float("nan")
        stats = seed_query_interval(values)
        return stats["ci_low"], stats["ci_high"]

    def _per_item(self, result, measure: str, split: str) -> list[dict[str, float]] | None:
        """``result``'s per-item values per seed on ``measure``; None for a measure without them (F1); any
        other error stands."""
        try:
            return result.per_item(self.data, measure, split)
        except ValueError as err:
            if "intervals are defined for" not in str(err):
                raise
            return None

    def compare(self, pairs: list[tuple[str, str]], measure: str | None = None, split: str = "test") -> pd.DataFrame:
        """For each (system, against): Δ of the means, 95% interval over items and seeds with its p-value
        (:func:`~longdoc.eval.significance.seed_query_bootstrap`: a bootstrap over queries, a t interval
        over document pairs with a dyadic-robust SE at Welch–Satterthwaite df), whether the interval excludes
        zero, and the minimum difference detectable at 80% power
        (:func:`~longdoc.eval.significance.minimum_detectable_difference`). ``measure`` defaults to the
        family's selection measure. No correction for multiple comparisons: a table of ten comparisons at 95% expects one
        interval to exclude zero by chance."""
        measure = measure or self.family.selection_measure
        rows = []
        for name, against in pairs:
            stats = seed_query_bootstrap(
                self.results[name].per_item(self.data, measure, split),
                self.results[against].per_item(self.data, measure, split),
            )
            rows.append(
                {
                    "system": name,
                    "against": against,
                    "measure": measure,
                    "Δ": stats["mean_difference"],
                    "95% CI low": stats["ci_low"],
                    "95% CI high": stats["ci_high"],
                    P_COLUMN: stats["p_value"],
                    "difference": difference_label(stats["ci_low"], stats["ci_high"]),
                    MDD: stats["minimum_detectable_difference"],
                }
            )
        return pd.DataFrame(rows)

    def choices(self) -> pd.DataFrame:
        """The learning-rate choices of the trained systems: grid, dev scores, choice."""
        rows = {}
        for name, result in self.results.items():
            if result.selection is None:
                continue
            selection = result.selection
            measure = selection["measure"].removeprefix("dev ")
            row = {f"dev {measure} at lr {lr}": score for lr, score in selection.get("dev", {}).items()}
            row["chosen lr"] = selection["learning_rate"]
            row["chosen by"] = (
                f"taken from {selection['inherited_from']}"
                if "inherited_from" in selection
                else "dev grid, seed " + str(selection["seed"])
            )
            row["dev-best step per seed"] = ", ".join(str(t["best_step"]) for t in result.training)
            rows[name] = row
        return pd.DataFrame(rows).T

    def paper_beside(self, rows: pd.DataFrame, measures: list[str] | None = None) -> pd.DataFrame:
        """The paper's values (``rows`` of ``data/paper_results``) of the systems run so far, by their
        ``paper_name``, indexed by our names (systems the paper does not report are left out)."""
        measures = [m for m in (measures or self.family.measures) if m in rows]
        names = {name: result.system.paper_name for name, result in self.results.items()}
        return paper_beside(names, rows, measures, keep_missing=False)

    @staticmethod
    def paper_columns(beside: pd.DataFrame, datasets: dict[str, str]) -> pd.DataFrame:
        """The paper's values with their collection in the column name (``datasets``: paper column →
        collection). A paper column that names its collection itself ("R@100 (TREC)") is shown under the
        measure it holds: "paper R@100 (TREC DL 19)"."""
        return beside.rename(
            columns={m: f"paper {m.split(' (')[0]} ({datasets[m]})" if m in datasets else f"paper {m}" for m in beside}
        )

    def further_sets(self, paper: pd.DataFrame, datasets: dict[str, dict[str, str]]) -> dict[str, pd.DataFrame]:
        """Each further reported set of the data (``dl19``: :meth:`Family.reported_splits`) as its own table,
        mean ± sd over seeds, with the paper's values on that collection beside it (``datasets``: split →
        {measure → collection}, the measures the paper reports on it; a split not named there gets no paper
        column); empty where the data has none (``manpages``)."""
        tables = {}
        for split in self.family.reported_splits(self)[1:]:
            table = summary_table(self.table(split=split))
            sets = datasets.get(split, {})
            beside = self.paper_columns(self.paper_beside(paper, list(sets)), sets) if sets else pd.DataFrame()
            tables[split] = self.show(
                f"Further reported set: {split} (mean ± sd over seeds)", table.join(beside, how="left")
            )
        return tables

    # -- recording -----------------------------------------------------------------------------
    def record(self, metrics: dict | None = None, overwrite: bool = False) -> Path:
        """Write ``metrics.json`` (parameters, systems, choices, per-seed metrics, ``metrics``) and the
        run files of every system and seed."""
        record_metrics = {
            "systems": self.system_records(),
            "tables": self.shown,
            "figures": self.figures,
            "findings": self.verdicts.as_record() if self.verdicts else None,
            **(metrics or {}),
        }
        peak_kib = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        usage = {"seconds": round(time.time() - self.started, 1), "peak_rss_gib": round(peak_kib / 2**20, 2)}
        checksum = self.data.checksum if self.options.dataset is not None else "none"
        replaced = None if overwrite else check_record_slot(*self._slot(checksum))
        directory = write_metrics(
            self.directory,
            self.notebook,
            self.options.profile,
            config=self.filed_params,
            metrics=record_metrics,
            data_checksum=checksum,
            seeds=self.seeds,
            extra={
                "code_fingerprint": code_fingerprint(),
                "record_fingerprint": record_fingerprint(),
                "usage": usage,
                "dataset": data_folder(self.params),
                **({"ran_with": changed(self.filed_params, self.params)} if self.filed_params != self.params else {}),
            },
            overwrite=overwrite,
            write_files=self.write_runs,
            profile_config=self.profile_config,
        )
        if replaced:  # a rerun of the profile as its file says: what it replaced (git diff shows the change)
            print(f"{self.notebook}: replaced {replaced}")
        return directory

    def system_records(self) -> dict:
        """Each system's description, seeds, per-seed dev and test metrics, choices and training."""
        return {
            name: {
                "system": result.system.describe(),
                "seeds": result.seeds,
                "test": result.metrics(self.data, "test", self.family.measures_on("test")),
                "dev": result.metrics(self.data, "dev", self.family.measures_on("dev")),
                **{
                    split: result.metrics(self.data, split, self.family.measures_on(split))
                    for split in self.family.reported_splits(self)[1:]
                },
                "selection": result.selection,
                "training": result.training,
                "pretraining": result.pretraining,
            }
            for name, result in self.results.items()
        }

    def write_runs(self, folder: Path) -> None:
        """The run files of every system and seed, and every system's per-item test scores
        (:func:`~longdoc.experiments.recompute.write_scores`), beside the record."""
        from longdoc.experiments.recompute import write_scores

        for name, result in self.results.items():
            tag = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
            for seed, outcome in zip(result.seeds, result.outcomes):
                outcome.write(folder, self.data, tag, seed)
        if self.options.dataset is not None and self.results:
            write_scores(folder, self.per_item_scores())

    def per_item_scores(self, split: str = "test") -> dict:
        """Each system's per-item values (query or pair) per seed on ``split``, for every measure that has
        them: ``{system: {"seeds": [...], "measures": {measure: [{item: value} per seed]}}}``."""
        scores = {}
        for name, result in self.results.items():
            per_measure = {m: self._per_item(result, m, split) for m in self.family.measures_on(split)}
            measures = {m: values for m, values in per_measure.items() if values is not None}
            if measures:
                scores[name] = {"seeds": result.seeds, "measures": measures}
        return scores
