"""The study protocol every notebook follows: data, budget, start rule, dev selection, seeds, recording.

A notebook opens one :class:`Study` from its parameters (``Study.open(notebook, globals())``), names
its rows as :class:`System` s, and gets each row's runs from :meth:`Study.run`:

- **Budget and start rule.** Every fine-tuned system of a study gets the same number of optimizer
  steps and queries per step per fine-tuning iteration (Table 1's iterative protocol runs one such
  budget per iteration), and reads its document vector under the study's ``pooling`` rule
  (:meth:`Study.encoder`); new parameters are drawn under the run's seed.
- **Settings chosen on dev, in code.** For each system the learning rate is chosen from
  ``learning_rates`` by dev MRR@100 with the first seed; each run is evaluated on dev ``dev_evals``
  times and its dev-best checkpoint is kept. Test judgements are never read for any choice. An
  ablation row may take another system's choice (``settings_from``), as ablations keep everything
  but one component fixed; the record says so.
- **Seeds.** The chosen setting is run once per seed; tables give mean ± standard deviation over
  seeds, and comparisons a 95% interval over queries and seeds
  (:func:`longdoc.eval.significance.seed_query_bootstrap`).
- **Recording.** ``results/<profile>/<dataset>/<notebook>/metrics.json`` holds the parameters, every
  choice, per-seed metrics, comparisons and findings, with the data checksum, code fingerprint and
  versions; TREC runs sit beside it. Every run is cached, so notebooks share the runs they have in
  common.
"""

from __future__ import annotations

import re
import resource
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from longdoc.data.beir import RetrievalDataset
from longdoc.data.registry import REPO_ROOT, load_dataset
from longdoc.eval.metrics import Run, evaluate, per_query
from longdoc.eval.probes import in_batch_probe
from longdoc.eval.run_files import write_run
from longdoc.eval.significance import seed_query_bootstrap
from longdoc.experiments.cache import code_fingerprint
from longdoc.experiments.findings import Claim, Findings, assess, markdown_table
from longdoc.experiments.pretraining import pretrained, pretraining_summary
from longdoc.experiments.parameters import check_parameters, PARAMETERS
from longdoc.experiments.results import RESULTS_DIR, check_record_slot, write_metrics
from longdoc.experiments.retrieval import (MODELS, SELECTION_MEASURE, bm25_run, build_model, finetune, segment_corpus,
                                           zero_shot)
from longdoc.models.biencoder import BiEncoder, EncoderConfig
from longdoc.plots import FIGURES_DIR
from longdoc.train.loop import TrainConfig
from longdoc.train.pretrain import PretrainConfig

MEASURES = ["MRR@100", "R@10", "R@100", "NDCG@10"]


@dataclass(frozen=True)
class Protocol:
    """How a system is fine-tuned; each of the paper's tables states one."""

    name: str
    negatives: str = "none"  # "none": in-batch only; "bm25": plus BM25 hard negatives in iteration 1;
    # "warm start": plus static hard negatives from the warm-start system's run (SeDR: STAR's top K)
    hard_negatives: int = 0
    iterations: int = 1  # > 1: later iterations mine hard negatives with the model itself
    negative_depth: int = 100  # K: hard negatives are sampled from the top K of the mining run
    cache_size: int = 0  # C: SeDR's late-cache negatives (0: none)


IN_BATCH = Protocol("in-batch negatives, one iteration (Longtriever Tables 2 and 4)")


def table1_protocol(hard_negatives: int, iterations: int) -> Protocol:
    """Longtriever section 4.2 / Table 1: one iteration with BM25 negatives, then iterations with the
    model's own negatives (the paper: three in all, after MS MARCO passage fine-tuning, which we skip)."""
    return Protocol(f"{hard_negatives} BM25 negative(s) per query, then {iterations - 1} iteration(s) with the model's "
                    "own negatives (Longtriever Table 1)", "bm25", hard_negatives, iterations)


def sedr_protocol(depth: int, cache_size: int, hard_negatives: int = 1) -> Protocol:
    """SeDR's Implementation Details: start from STAR (our stand-in: the warm-start system), one static
    hard negative per query sampled from its top K (200 without the cache, 100 with it), and the
    late-cache queue of C instances."""
    cache = f", late cache C = {cache_size}" if cache_size else ", no late cache"
    return Protocol(f"warm start, {hard_negatives} static hard negative(s) from its top {depth}{cache} (SeDR)",
                    "warm start", hard_negatives, 1, depth, cache_size)


@dataclass(frozen=True)
class System:
    """One row of a table."""

    name: str
    model: str  # "BM25" or a key of ``longdoc.experiments.retrieval.MODELS``
    encoder: EncoderConfig | None = None
    protocol: Protocol | None = IN_BATCH  # None: not fine-tuned (the backbone as it is)
    pretrain: PretrainConfig | None = None  # continued pre-training before fine-tuning (Longtriever)
    pretrain_corpus: str = ""
    settings_from: "System | None" = None  # take this system's dev-chosen learning rate (ablation rows)
    paper_name: str = ""  # the ``our_name`` of its row in ``data/paper_results`` (the paper's value beside ours)
    warm_start: "System | None" = None  # start from this fine-tuned system's backbone (its first-seed run at its
    # chosen learning rate; SeDR starts from STAR), and mine "warm start" negatives with it
    pretrain_encoder: EncoderConfig | None = None  # pre-train with this encoder instead of ``encoder`` (sweep rows
    # that fine-tune one pre-trained model under another block count or combine mode)
    learning_rates: tuple = ()  # its own dev grid instead of the study's (rows whose weights start random)
    nci: Any = None  # NCI and DSI rows: their :class:`longdoc.experiments.nci.NciSpec`
    decoding: Any = None  # an NCI row decoded otherwise than the study's decoding (the unconstrained ablation)
    members: tuple = ()  # an ensemble's member systems

    def describe(self) -> dict:
        return {"model": self.model, "encoder": asdict(self.encoder) if self.encoder else None,
                "protocol": asdict(self.protocol) if self.protocol else "not fine-tuned",
                "pretrain": asdict(self.pretrain) if self.pretrain else None, "pretrain_corpus": self.pretrain_corpus,
                "settings_from": self.settings_from.name if self.settings_from else None,
                "warm_start": self.warm_start.name if self.warm_start else None,
                **({"pretrain_encoder": asdict(self.pretrain_encoder)} if self.pretrain_encoder else {}),
                **({"learning_rates": list(self.learning_rates)} if self.learning_rates else {}),
                **({"nci": asdict(self.nci)} if self.nci is not None else {}),
                **({"decoding": asdict(self.decoding)} if self.decoding is not None else {}),
                **({"members": [m.name for m in self.members]} if self.members else {})}


@dataclass
class SystemResult:
    """The runs of one system: one per seed (one in all for a deterministic system)."""

    system: System
    seeds: list  # the fine-tuning seeds; [None] for a system without training
    test_runs: list[Run]
    dev_runs: list[Run]
    selection: dict | None = None
    training: list[dict] = field(default_factory=list)
    pretraining: dict | None = None

    @property
    def name(self) -> str:
        return self.system.name

    def per_query(self, qrels: dict, measure: str) -> list[dict[str, float]]:
        return [per_query(run, qrels, [measure])[measure] for run in self.test_runs]

    def metrics(self, qrels: dict, measures: list[str]) -> list[dict[str, float]]:
        """One dict of measures per seed."""
        return [evaluate(run, qrels, measures) for run in self.test_runs]


def dataset_slug(name: str) -> str:
    """A folder name for a dataset's results: ``manpages``, ``manpages-200`` (subsampled), ``<dir name>``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "dataset"


class Study:
    """One notebook's experiment: its parameters, data, budget, systems and record."""

    selection_measure = SELECTION_MEASURE  # the dev measure that chooses settings and checkpoints

    def __init__(self, notebook: str, parameters: dict[str, Any], progress: bool = True):
        self.notebook = notebook
        self.params = check_parameters(parameters)
        self.progress = progress
        self.started = time.time()
        self.results: dict[str, SystemResult] = {}
        self.shown: list[dict] = []  # tables the notebook showed, in order (for the record and the report)
        self.figures: list[str] = []
        self.verdicts: Findings | None = None
        self._data: RetrievalDataset | None = None
        self._selections: dict[str, dict] = {}
        steps, evals = self.params.get("train_steps"), self.params.get("dev_evals")
        if steps is not None and evals is not None and evals > steps:
            raise ValueError(f"parameter dev_evals={evals}: more dev evaluations than train_steps={steps}")
        if "dataset" not in self.params and "profile" in self.params:
            check_record_slot(self.directory, self.params["profile"], self.params, "none")

    @classmethod
    def open(cls, notebook: str, namespace: dict[str, Any], progress: bool = True) -> "Study":
        """The study of ``notebook`` with the parameters found in ``namespace`` (its ``globals()``)."""
        return cls(notebook, {name: namespace[name] for name in PARAMETERS if name in namespace}, progress)

    # -- data -----------------------------------------------------------------------------------
    @property
    def data(self) -> RetrievalDataset:
        if self._data is None:
            data = load_dataset(self.params["dataset"], max_docs=self.params.get("max_docs", 0), seed=self.seeds[0])
            for split in ("train", "dev", "test"):  # every table needs all three: fail before any training
                data.split(split)
            self._data = data
            check_record_slot(self.directory, self.params["profile"], self.params, data.checksum)
        return self._data

    def split(self, name: str) -> tuple[dict[str, str], dict]:
        return self.data.split(name)

    @property
    def seeds(self) -> list[int]:
        return self.params.get("seeds", [self.params.get("seed", 0)])

    @property
    def dataset_name(self) -> str:
        return dataset_slug(self.data.name) if "dataset" in self.params else "random-weights"

    @property
    def directory(self) -> Path:
        return RESULTS_DIR / self.params["profile"] / self.dataset_name / self.notebook

    def figure_path(self, name: str) -> Path:
        path = FIGURES_DIR / self.params["profile"] / self.dataset_name / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.figures.append(path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path))
        return path

    def show(self, title: str, frame: pd.DataFrame, note: str = "", index: bool = True) -> pd.DataFrame:
        """Keep ``frame`` for the record and the results report, and return it for display."""
        self.shown.append({"title": title, "note": note, "markdown": markdown_table(frame.round(4), index=index)})
        return frame

    def findings(self, claims: list[Claim], context: str = "") -> Findings:
        """Verdicts of the paper's claims from our intervals (:mod:`longdoc.experiments.findings`)."""
        self.verdicts = Findings(assess(self, claims), context)
        return self.verdicts

    def note_findings(self, text: str, verdicts: pd.DataFrame | None = None) -> Findings:
        """Findings that are not intervals between two systems (computed by the caller from its
        numbers): a text, and optionally a table with a ``verdict`` column."""
        self.verdicts = Findings(pd.DataFrame() if verdicts is None else verdicts, text)
        return self.verdicts

    # -- configurations, built by keyword ------------------------------------------------------
    def encoder(self, model: str, **changes) -> EncoderConfig:
        """The encoder config of ``model`` under the study's start rule, block shape and precision.
        FirstP reads one block; ``changes`` override any field (e.g. ``segment_length`` for FirstP
        over N × M tokens, ``doc_token=False`` for an ablation row)."""
        p = self.params
        fields = dict(backbone=p["backbone"], segment_length=p["block_size"], max_segments=p["max_blocks"],
                      max_query_length=p["query_length"], pooling=p["pooling"], precision=p["precision"])
        if model == "FirstP":
            fields["max_segments"] = 1
        return MODELS[model].config_class(**(fields | changes))

    def train_config(self, learning_rate: float, seed: int, hard_negatives: int = 0) -> TrainConfig:
        """The budget every fine-tuned system of the study gets (``batch_size`` queries per step in all,
        ``batch_size / n_devices`` per process)."""
        p = self.params
        devices = p.get("n_devices", 1)
        if p["batch_size"] % devices:
            raise ValueError(f"parameter batch_size={p['batch_size']}: not divisible by n_devices={devices}")
        return TrainConfig(steps=p["train_steps"], batch_size=p["batch_size"] // devices, hard_negatives=hard_negatives,
                           learning_rate=learning_rate, eval_every=max(1, p["train_steps"] // p["dev_evals"]), seed=seed)

    def pretrain_config(self, **changes) -> PretrainConfig:
        """Longtriever's pre-training under the study's budget (seeded with the first seed: pre-trained
        once, fine-tuned once per seed, as the paper pre-trains once and fine-tunes five times)."""
        p = self.params
        fields = dict(steps=p["pretrain_steps"], batch_size=p["pretrain_batch_size"], learning_rate=p["pretrain_learning_rate"],
                      mlm_ratio=p["mlm_ratio"], lmae_ratio=p["lmae_ratio"], decoder_init=p["decoder_init"],
                      head_warmup_steps=p["head_warmup_steps"], seed=self.seeds[0])
        return PretrainConfig(**(fields | changes))

    # -- systems -------------------------------------------------------------------------------
    def starting_checkpoint(self, system: System) -> Path | None:
        """The pre-trained checkpoint that fine-tuning starts from (None: the backbone itself)."""
        if system.pretrain is None:
            return None
        source = system.pretrain_corpus or self.data
        return pretrained(source, system.encoder, system.pretrain, dataset=self.data, progress=self.progress)

    def starting_model(self, system: System, seed: int | None = None) -> BiEncoder:
        """The model before fine-tuning (for the in-batch probe)."""
        return build_model(system.model, self.starting_encoder(system), self.seeds[0] if seed is None else seed,
                           self.starting_checkpoint(system))

    def start_probe(self, system: System, size: int = 128) -> dict:
        """The in-batch probe (:mod:`longdoc.eval.probes`) of the system's start point on dev queries."""
        model = self.starting_model(system)
        dev_queries, dev_qrels = self.split("dev")
        return in_batch_probe(model, segment_corpus(model, self.data), dev_queries, dev_qrels, size=size)

    def warm_start_run(self, system: System):
        """The fine-tuned run a system starts from (its ``warm_start`` at that system's chosen learning
        rate, first seed), or None."""
        if system.warm_start is None:
            return None
        if system.warm_start.protocol is None or system.warm_start.model == "BM25":
            raise ValueError(f"{system.name}: the warm start {system.warm_start.name!r} is not a fine-tuned system")
        chosen = self.selection(system.warm_start)["learning_rate"]
        return self._finetune(system.warm_start, chosen, self.seeds[0])

    def starting_encoder(self, system: System) -> EncoderConfig:
        """The system's encoder, reading the warm-start run's backbone where it has one."""
        start = self.warm_start_run(system)
        return system.encoder if start is None else replace(system.encoder, backbone=str(start.directory / "model" / "backbone"))

    def _finetune(self, system: System, learning_rate: float, seed: int):
        protocol = system.protocol
        train = replace(self.train_config(learning_rate, seed, protocol.hard_negatives), cache_size=protocol.cache_size)
        miner = self.warm_start_run(system) if protocol.negatives == "warm start" else None
        if protocol.negatives == "warm start" and miner is None:
            raise ValueError(f"{system.name}: 'warm start' negatives need a warm_start system")
        return finetune(system.model, self.data, self.starting_encoder(system), train,
                        negatives="miner" if miner is not None else protocol.negatives,
                        negative_depth=protocol.negative_depth, iterations=protocol.iterations,
                        init=self.starting_checkpoint(system), progress=self.progress,
                        n_devices=self.params.get("n_devices", 1), miner=miner)

    def selection(self, system: System) -> dict:
        """The learning rate chosen on dev for ``system`` (grid with the first seed), or the one
        of ``system.settings_from``."""
        if system.name in self._selections:
            if self._selections[system.name]["system"] != system.describe():
                raise ValueError(f"two different systems are named {system.name!r} in this study")
            return self._selections[system.name]
        if system.settings_from is not None:
            source = self.selection(system.settings_from)
            chosen = {"learning_rate": source["learning_rate"], "inherited_from": system.settings_from.name,
                      "measure": source["measure"]}
        else:
            grid = {lr: self._finetune(system, lr, self.seeds[0]).best_dev
                    for lr in (system.learning_rates or self.params["learning_rates"])}
            best = max(grid.values())
            chosen = {"learning_rate": next(lr for lr, score in grid.items() if score == best),
                      "dev": {str(lr): score for lr, score in grid.items()}, "measure": f"dev {self.selection_measure}",
                      "seed": self.seeds[0]}
        chosen["system"] = system.describe()
        self._selections[system.name] = chosen
        return chosen

    def run(self, system: System, seeds: list[int] | None = None) -> SystemResult:
        """The system's runs on dev and test: BM25, the backbone as it is, or one fine-tuning per seed
        (``seeds``, default the study's) at the learning rate chosen on dev."""
        seeds = list(seeds or self.seeds)
        if system.model == "BM25":
            runs = {split: bm25_run(self.data, self.split(split)[0]) for split in ("dev", "test")}
            result = SystemResult(system, [None], [runs["test"]], [runs["dev"]])
        elif system.protocol is None:
            runs = zero_shot(system.model, self.data, system.encoder, self.seeds[0], progress=self.progress)
            result = SystemResult(system, [None], [runs["test"]], [runs["dev"]])
        else:
            selection = self.selection(system)
            fits = [self._finetune(system, selection["learning_rate"], seed) for seed in seeds]
            init = self.starting_checkpoint(system)
            result = SystemResult(system, seeds, [f.runs["test"] for f in fits], [f.runs["dev"] for f in fits],
                                  selection, [_training_summary(seed, f.history) for seed, f in zip(seeds, fits)],
                                  pretraining_summary(init) if init else None)
        self.results[system.name] = result
        return result

    # -- tables and comparisons ---------------------------------------------------------------
    def run_all(self, systems: list[System], seeds: list[int] | None = None) -> list[SystemResult]:
        return [self.run(system, seeds) for system in systems]

    def paper_beside(self, paper: pd.DataFrame, measures: list[str] = MEASURES) -> pd.DataFrame:
        """The paper's values of the systems run so far (by ``System.paper_name``), indexed by our names."""
        reported = paper.dropna(subset=["our_name"]).drop_duplicates("our_name").set_index("our_name")
        rows = {name: reported.loc[r.system.paper_name, [m for m in measures if m in reported]]
                for name, r in self.results.items() if r.system.paper_name in reported.index}
        return pd.DataFrame(rows).T.astype(float)

    @staticmethod
    def paper_columns(beside: pd.DataFrame, datasets: dict[str, str]) -> pd.DataFrame:
        """The paper's values with their collection in the column name (``datasets``: measure → collection)."""
        return beside.rename(columns={m: f"paper {m} ({datasets[m]})" if m in datasets else f"paper {m}" for m in beside})

    def table(self, names: list[str] | None = None, measures: list[str] = MEASURES, split: str = "test") -> pd.DataFrame:
        """Mean and standard deviation over seeds of each measure, one row per system."""
        qrels = self.split(split)[1]
        rows = {}
        for name in names or list(self.results):
            result = self.results[name]
            runs = result.test_runs if split == "test" else result.dev_runs
            per_seed = pd.DataFrame([evaluate(run, qrels, measures) for run in runs])
            rows[name] = {**{m: per_seed[m].mean() for m in measures},
                          **{f"{m} sd": per_seed[m].std(ddof=1) if len(per_seed) > 1 else 0.0 for m in measures},
                          "seeds": len(per_seed) if result.seeds != [None] else 0}
        return pd.DataFrame(rows).T.astype({"seeds": int})

    def compare(self, pairs: list[tuple[str, str]], measure: str = "MRR@100") -> pd.DataFrame:
        """For each (system, against): Δ of the means, 95% interval over queries and seeds, paired t-test
        p-value, and whether the interval excludes zero. No correction for multiple comparisons: a
        table of ten comparisons at 95% expects one interval to exclude zero by chance."""
        qrels = self.split("test")[1]
        rows = []
        for name, against in pairs:
            stats = seed_query_bootstrap(self.results[name].per_query(qrels, measure),
                                         self.results[against].per_query(qrels, measure))
            rows.append({"system": name, "against": against, "measure": measure, "Δ": stats["mean_difference"],
                         "95% CI low": stats["ci_low"], "95% CI high": stats["ci_high"], "p (paired t)": stats["p_value"],
                         "difference": difference_label(stats["ci_low"], stats["ci_high"])})
        return pd.DataFrame(rows)

    def choices(self) -> pd.DataFrame:
        """The learning-rate choices of the fine-tuned systems: grid, dev scores, choice."""
        rows = {}
        for name, result in self.results.items():
            if result.selection is None:
                continue
            selection = result.selection
            row = {f"dev {self.selection_measure} at lr {lr}": score for lr, score in selection.get("dev", {}).items()}
            row["chosen lr"] = selection["learning_rate"]
            row["chosen by"] = f"taken from {selection['inherited_from']}" if "inherited_from" in selection else "dev grid, seed " + str(selection["seed"])
            row["dev-best step per seed"] = ", ".join(str(t["best_step"]) for t in result.training)
            rows[name] = row
        return pd.DataFrame(rows).T

    # -- recording -----------------------------------------------------------------------------
    def record(self, metrics: dict | None = None, overwrite: bool = False) -> Path:
        """Write ``metrics.json`` (parameters, systems, choices, per-seed metrics, ``metrics``) and the
        TREC runs of every system and seed."""
        systems = self.system_records()
        record_metrics = {"systems": systems, "tables": self.shown, "figures": self.figures,
                          "findings": self.verdicts.as_record() if self.verdicts else None, **(metrics or {})}
        peak_kib = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        usage = {"seconds": round(time.time() - self.started, 1), "peak_rss_gib": round(peak_kib / 2**20, 2)}
        directory = write_metrics(self.directory, self.notebook, self.params["profile"], config=self.params,
                                  metrics=record_metrics, data_checksum=self.data.checksum if "dataset" in self.params else "none",
                                  seeds=self.seeds, extra={"code_fingerprint": code_fingerprint(), "usage": usage,
                                                           "dataset": self.dataset_name},
                                  overwrite=overwrite, write_files=self.write_runs)
        return directory

    def system_records(self) -> dict:
        """Each system's description, seeds, per-seed test metrics, choices and training, for the record."""
        systems = {}
        if self.results:
            qrels = self.split("test")[1]
            for name, result in self.results.items():
                systems[name] = {"system": result.system.describe(), "seeds": result.seeds,
                                 "test": result.metrics(qrels, MEASURES), "selection": result.selection,
                                 "training": result.training, "pretraining": result.pretraining}
        return systems

    def write_runs(self, folder: Path) -> None:
        """The TREC runs of every system and seed, beside the record."""
        for name, result in self.results.items():
            for seed, run in zip(result.seeds, result.test_runs):
                tag = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
                write_run(run, folder / "runs" / f"{tag}{'' if seed is None else f'.seed{seed}'}.trec", tag=tag)


def difference_label(low: float, high: float) -> str:
    if low > 0:
        return "higher"
    if high < 0:
        return "lower"
    return "no difference (interval includes 0)"


def _training_summary(seed: int, history: dict) -> dict:
    last = history["iterations"][-1]
    return {"seed": seed, "best_step": last["best_step"], "best_dev": last["best_dev"],
            "dev_curve": [[h["step"], round(h["dev"], 4)] for h in last["history"] if "dev" in h],
            "iterations": len(history["iterations"])}


def summary_table(table: pd.DataFrame, measures: list[str] = MEASURES, digits: int = 3) -> pd.DataFrame:
    """``mean ± sd`` strings per measure (a seed count of 0 marks a deterministic system)."""
    out = pd.DataFrame(index=table.index)
    for m in measures:
        out[m] = [f"{row[m]:.{digits}f}" + (f" ± {row[f'{m} sd']:.{digits}f}" if row["seeds"] > 1 else "")
                  for _, row in table.iterrows()]
    out["seeds"] = table["seeds"].map(lambda n: str(n) if n else "—")
    return out
