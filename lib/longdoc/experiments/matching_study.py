"""The study protocol for the matching family (SMITH's notebooks 30–33): the same budget, start rule,
dev selection, seeds and recording as :class:`~longdoc.experiments.study.Study`, on document pairs.

- Every fine-tuned matcher gets ``train_steps`` steps of ``batch_size`` labelled pairs.
- The learning rate is chosen from ``learning_rates`` by dev accuracy (first seed); within a run the
  dev-best of ``dev_evals`` evaluations is kept; the decision threshold of every run is the one that
  is best on dev (:func:`longdoc.eval.classification.accuracy_threshold`). Test labels are never read
  for a choice.
- Tables give mean ± sd over seeds of Accuracy / Precision / Recall / F1 (SMITH Table 5) and, as a use
  the paper does not cover, MRR@100 and R@10 of document-to-document ranking (each test source page
  retrieves the pages it links to).
- Comparisons: a 95% interval over pairs (or ranking sources) and seeds
  (:func:`longdoc.eval.significance.seed_query_bootstrap`) with the paired t-test's p-value, the
  paper's test.
- Pre-trained rows (SMITH-WP, SMITH-WP+SP) pre-train on the documents outside every dev and test pair
  (:meth:`MatchingStudy.pretraining_documents`), once, with the first seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from longdoc.data.matching import MatchingDataset, load_matching
from longdoc.eval.classification import accuracy_threshold, classification_metrics, pair_outcomes
from longdoc.eval.metrics import evaluate, per_query
from longdoc.eval.run_files import write_run
from longdoc.eval.significance import seed_query_bootstrap
from longdoc.experiments.matching import SELECTION_MEASURE, FineTunedMatcher, finetune_matcher
from longdoc.experiments.pretraining import Documents, pretrained, pretraining_summary
from longdoc.experiments.results import check_record_slot
from longdoc.experiments.study import Study, System, difference_label

CLASSIFICATION = ["Accuracy", "Precision", "Recall", "F1"]
RANKING = ["MRR@100", "R@10"]
MATCHING_MEASURES = CLASSIFICATION + RANKING


@dataclass
class MatchResult:
    """The runs of one matching system, one per seed."""

    system: System
    seeds: list
    fits: list[FineTunedMatcher]
    selection: dict
    training: list[dict] = field(default_factory=list)
    pretraining: dict | None = None

    @property
    def name(self) -> str:
        return self.system.name


class MatchingStudy(Study):
    selection_measure = SELECTION_MEASURE

    def __init__(self, notebook: str, parameters: dict, progress: bool = True):
        super().__init__(notebook, parameters, progress)
        if self.params.get("n_devices", 1) != 1:
            raise ValueError(f"parameter n_devices={self.params['n_devices']}: the matching notebooks train in one "
                             "process (one GPU) so far; set n_devices=1")

    @property
    def data(self) -> MatchingDataset:
        if self._data is None:
            data = load_matching(self.params["dataset"], max_docs=self.params.get("max_docs", 0), seed=self.seeds[0])
            for split in ("train", "dev", "test"):
                data.split(split)
            self._data = data
            check_record_slot(self.directory, self.params["profile"], self.params, data.checksum)
        return self._data

    def labels(self, split: str) -> list[int]:
        return [p.label for p in self.data.split(split)]

    # -- systems -----------------------------------------------------------------------------
    def pretraining_documents(self) -> Documents:
        """The documents of no dev or test pair and of no dev or test ranking judgement (SMITH
        pre-trains on a separate collection; ours is the rest of the corpus, so that no evaluated
        document is seen unlabelled in pre-training; documents of training pairs may recur in
        evaluation pairs, as pages recur across Wiki65K's splits)."""
        held = set(self.data.documents("dev")) | set(self.data.documents("test"))
        for split in ("dev", "test"):
            for source, judged in self.data.ranking_qrels(split).items():
                held |= {source, *judged}
        ids = [d for d in self.data.corpus if d not in held]
        return Documents(f"{self.data.name}:outside-dev-test-pairs", ids, self.data.texts(ids))

    def starting_checkpoint(self, system: System) -> Path | None:
        if system.pretrain is None:
            return None
        return pretrained(self.pretraining_documents(), system.pretrain_encoder or system.encoder, system.pretrain,
                          progress=self.progress)

    def _finetune(self, system: System, learning_rate: float, seed: int) -> FineTunedMatcher:
        return finetune_matcher(system.model, self.data, system.encoder, self.train_config(learning_rate, seed),
                                init=self.starting_checkpoint(system), progress=self.progress)

    def run(self, system: System, seeds: list[int] | None = None) -> MatchResult:
        seeds = list(seeds or self.seeds)
        selection = self.selection(system)
        fits = [self._finetune(system, selection["learning_rate"], seed) for seed in seeds]
        init = self.starting_checkpoint(system)
        training = [{"seed": seed, "best_step": f.history["best_step"], "best_dev": f.best_dev,
                     "dev_curve": [[h["step"], round(h["dev"], 4)] for h in f.history["history"] if "dev" in h],
                     "train_seconds": round(f.history["train_seconds"], 1)} for seed, f in zip(seeds, fits)]
        result = MatchResult(system, seeds, fits, selection, training, pretraining_summary(init) if init else None)
        self.results[system.name] = result
        return result

    # -- numbers -----------------------------------------------------------------------------
    def seed_metrics(self, fit: FineTunedMatcher, split: str = "test", threshold: float | None = None) -> dict[str, float]:
        """One run's measures on ``split`` at the cosine threshold chosen on dev (or ``threshold``;
        0 is the paper's σ(6 cos) = 0.5); ranking on test only."""
        if threshold is None:
            threshold = accuracy_threshold(self.labels("dev"), fit.scores["dev"])
        metrics = classification_metrics(self.labels(split), fit.scores[split], threshold)
        if split == "test":
            metrics.update(evaluate(fit.scores["ranking"], self.data.ranking_qrels("test"), RANKING))
        return metrics | {"threshold": threshold}

    def per_item(self, fit: FineTunedMatcher, measure: str, split: str = "test") -> dict[str, float]:
        """Per-pair correctness (Accuracy) or per-source ranking values, keyed for paired comparisons."""
        if measure == "Accuracy":
            threshold = accuracy_threshold(self.labels("dev"), fit.scores["dev"])
            outcomes = pair_outcomes(self.labels(split), fit.scores[split], threshold)
            return {f"{p.source}\t{p.target}": float(v) for p, v in zip(self.data.split(split), outcomes)}
        if measure in RANKING and split == "test":
            return per_query(fit.scores["ranking"], self.data.ranking_qrels("test"), [measure])[measure]
        raise ValueError(f"measure {measure!r}: intervals are defined for Accuracy (per pair) and {RANKING} (test)")

    def table(self, names: list[str] | None = None, measures: list[str] | None = None, split: str = "test") -> pd.DataFrame:
        measures = measures or (MATCHING_MEASURES if split == "test" else CLASSIFICATION)
        rows = {}
        for name in names or list(self.results):
            per_seed = pd.DataFrame([self.seed_metrics(f, split) for f in self.results[name].fits])
            rows[name] = {**{m: per_seed[m].mean() for m in measures},
                          **{f"{m} sd": per_seed[m].std(ddof=1) if len(per_seed) > 1 else 0.0 for m in measures},
                          "seeds": len(per_seed)}
        return pd.DataFrame(rows).T.astype({"seeds": int})

    def compare(self, pairs: list[tuple[str, str]], measure: str = "Accuracy", split: str = "test") -> pd.DataFrame:
        rows = []
        for name, against in pairs:
            a = [self.per_item(f, measure, split) for f in self.results[name].fits]
            b = [self.per_item(f, measure, split) for f in self.results[against].fits]
            stats = seed_query_bootstrap(a, b)
            rows.append({"system": name, "against": against, "measure": measure, "Δ": stats["mean_difference"],
                         "95% CI low": stats["ci_low"], "95% CI high": stats["ci_high"], "p (paired t)": stats["p_value"],
                         "difference": difference_label(stats["ci_low"], stats["ci_high"])})
        return pd.DataFrame(rows)

    def costs(self) -> pd.DataFrame:
        """Parameters, training seconds per step and corpus encoding seconds of each system's first run."""
        rows = {}
        for name, result in self.results.items():
            fit = result.fits[0]
            steps = max(1, fit.history["config"]["steps"])
            rows[name] = {"parameters (M)": sum(p.numel() for p in fit.model().parameters()) / 1e6,
                          "training s/step": fit.history["train_seconds"] / steps,
                          "corpus encoding s": fit.history.get("encode_seconds")}
        return pd.DataFrame(rows).T

    # -- recording ---------------------------------------------------------------------------
    def system_records(self) -> dict:
        return {name: {"system": r.system.describe(), "seeds": r.seeds,
                       "test": [self.seed_metrics(f, "test") for f in r.fits],
                       "dev": [self.seed_metrics(f, "dev") for f in r.fits],
                       "selection": r.selection, "training": r.training, "pretraining": r.pretraining}
                for name, r in self.results.items()}

    def write_runs(self, folder: Path) -> None:
        """Each run's test ranking (TREC format) and pair scores (``pairs/<system>.seed<k>.tsv``)."""
        import re

        from longdoc.io import atomic_write

        for name, result in self.results.items():
            tag = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
            for seed, fit in zip(result.seeds, result.fits):
                write_run(fit.scores["ranking"], folder / "runs" / f"{tag}.seed{seed}.trec", tag=tag)
                with atomic_write(folder / "pairs" / f"{tag}.seed{seed}.tsv") as handle:
                    handle.write("split\tsource-id\ttarget-id\tlabel\tcosine\n")
                    for split in ("dev", "test"):
                        for pair, score in zip(self.data.split(split), fit.scores[split]):
                            handle.write(f"{split}\t{pair.source}\t{pair.target}\t{pair.label}\t{score:.6f}\n")
