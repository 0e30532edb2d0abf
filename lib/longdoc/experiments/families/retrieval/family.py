"""The retrieval family: its data (a judged corpus), measures, learning-rate grid, chance level and outcome
(:class:`RunOutcome`: a dev and a test run per seed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from longdoc.data.beir import RetrievalDataset
from longdoc.data.registry import load_dataset
from longdoc.data.splits import require_splits
from longdoc.eval.chance import random_ranking_value
from longdoc.eval.metrics import Run, evaluate, per_query
from longdoc.eval.run_files import write_run
from longdoc.experiments import cache
from longdoc.experiments.settings import BudgetSettings
from longdoc.experiments.systems import Family

MEASURES = ["MRR@100", "R@10", "R@100", "NDCG@10"]
RUN_DEPTH = 100  # documents per query in every run (MRR@100, R@100)
EVALUATION_SPLITS = ("dev", "test")
FITTING_SPLITS = ("train", "dev", "test")  # any other judged split is a further reported set (MS MARCO's dl19)
PROBE_QUERIES = 128  # dev queries of a start's in-batch probe
NEGATIVES = ("none", "bm25", "miner")  # "miner": static hard negatives from another fine-tuned model (SeDR's STAR)


DATASET_LOADER = f"{__name__}:load_retrieval_dataset"  # how a training process loads the dataset


def load_retrieval_dataset(name: str, max_docs: int = 0, seed: int = 0) -> RetrievalDataset:
    """:func:`~longdoc.data.registry.load_dataset` with the cache's corpus stores: a corpus of 1 GiB or
    more (MS MARCO's 22 GB) is read through a memory map, tokenized once per block shape beside it."""
    return load_dataset(name, max_docs=max_docs, seed=seed, store_dir=cache.CACHE_DIR / "corpus")


class RetrievalFamily(Family):
    name = "retrieval"
    role = "retrieval"
    selection_measure = "MRR@100"
    measures = tuple(MEASURES)

    def load(self, study) -> RetrievalDataset:
        options = study.options
        data = load_retrieval_dataset(options.dataset, max_docs=options.max_docs, seed=study.seeds[0])
        require_splits(options.dataset, data.qrels)  # every table needs all three: fail before any training
        for split in ("train", "dev", "test"):
            data.split(split)
        return data

    def learning_rates(self, study) -> list[float]:
        return study.settings(BudgetSettings).learning_rates

    def reported_splits(self, study) -> list[str]:
        return ["test", *further_reported_splits(study.data)]

    def chance(self, study, measure: str, split: str = "test") -> float | None:
        """A random ranking of the whole corpus (:func:`~longdoc.eval.chance.random_ranking_value`)."""
        qrels = study.data.split(split)[1]
        relevant = [n for n in (sum(1 for r in docs.values() if r > 0) for docs in qrels.values()) if n]
        return random_ranking_value(measure, len(study.data.corpus), relevant)


RETRIEVAL = RetrievalFamily()


@dataclass
class RunOutcome:
    """A system's dev and test runs (one seed)."""

    runs: dict[str, Run]

    def metrics(self, data: RetrievalDataset, split: str, measures: list[str]) -> dict[str, float]:
        return evaluate(self.runs[split], data.split(split)[1], measures)

    def per_item(self, data: RetrievalDataset, split: str, measure: str) -> dict[str, float]:
        return per_query(self.runs[split], data.split(split)[1], [measure])[measure]

    def write(self, folder: Path, data: RetrievalDataset, tag: str, seed: int | None) -> None:
        """The test run as ``runs/<tag>[.seedN].trec``; a further reported set's as ``runs/<tag>.<split>...``."""
        suffix = "" if seed is None else f".seed{seed}"
        write_run(self.runs["test"], folder / "runs" / f"{tag}{suffix}.trec", tag=tag)
        for split in further_reported_splits(data):
            write_run(self.runs[split], folder / "runs" / f"{tag}.{split}{suffix}.trec", tag=tag)


def further_reported_splits(dataset: RetrievalDataset) -> list[str]:
    """Judged splits besides train, dev and test: further reported sets (Longtriever Table 2 and SeDR
    Table 1 report MS MARCO dev and TREC DL 2019 side by side; ``qrels/dl19.tsv``), never used to choose."""
    return sorted(split for split in dataset.qrels if split not in FITTING_SPLITS and _has_queries(dataset, split))


def _has_queries(dataset: RetrievalDataset, split: str) -> bool:
    """Whether ``split`` keeps a judged query (a subsample may keep none of a small set such as dl19)."""
    try:
        return bool(dataset.split(split)[0])
    except ValueError:
        return False


def evaluation_queries(dataset: RetrievalDataset) -> dict[str, dict[str, str]]:
    """The queries of the dev and test splits (dev is required: it selects models) and of every further
    reported set (:func:`further_reported_splits`)."""
    if "dev" not in dataset.qrels:
        raise ValueError(f"{dataset.name} has no dev split (qrels/dev.tsv): model selection needs one")
    splits = [*(s for s in EVALUATION_SPLITS if s in dataset.qrels), *further_reported_splits(dataset)]
    return {split: dataset.split(split)[0] for split in splits}
