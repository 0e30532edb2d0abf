"""The retrieval family: queries to long documents, judged by qrels (Longtriever, SeDR, the baselines).

- **Data**: a :class:`~longdoc.data.beir.RetrievalDataset` (``manpages`` or a BEIR directory) with
  train, dev and test queries; dev chooses, test reports.
- **Rows** (:class:`~longdoc.experiments.systems.Spec` kinds): :class:`BM25`; :class:`Dense`, any encoder
  of the registry (:mod:`longdoc.models.registry`) fine-tuned under a :class:`Protocol` (or used as it
  is: ``protocol=None``), optionally pre-trained first and warm-started from another row;
  :class:`ExactSearch`, a dense row's fits searched by exact cosine.
- **Fitting**: :func:`finetune` trains with in-batch (and hard) negatives through the shared step loop,
  evaluates on dev ``dev_evals`` times (:class:`RetrievalEvaluation`: one corpus encoding per evaluation
  gives the dev and the test runs) and keeps the dev-best checkpoint; cached with the runs of that
  checkpoint (:func:`longdoc.experiments.fitting.fine_tune`), so notebooks that share a fit share its
  runs and a table never re-encodes the corpus. ``n_devices`` > 1 trains under torchrun
  (:mod:`longdoc.experiments.families.worker`).
- **Outcome**: :class:`RunOutcome`, a dev and a test run; per item = per query; selection: dev MRR@100.

The package by concern: :mod:`.family` (data, measures, grid, outcome), :mod:`.runs` (ranking: BM25,
blocks, dense and exact runs, negatives, zero-shot, dev candidates), :mod:`.fitting` (fine-tuning, its
job and index) and :mod:`.specs` (the rows). Derived views of a dataset (its blocks, its dev candidates)
are kept on the loaded dataset (:func:`~longdoc.experiments.cache.dataset_view`), never in a module.
"""

from longdoc.experiments.families.retrieval.family import (
    DATASET_LOADER,
    EVALUATION_SPLITS,
    FITTING_SPLITS,
    MEASURES,
    NEGATIVES,
    PROBE_QUERIES,
    RETRIEVAL,
    RUN_DEPTH,
    RetrievalFamily,
    RunOutcome,
    evaluation_queries,
    further_reported_splits,
    load_retrieval_dataset,
)
from longdoc.experiments.families.retrieval.fitting import (
    COST_REPEATS,
    RUNNER,
    FinetuneJob,
    RetrievalEvaluation,
    finetune,
    fit_costs,
    fit_index,
    index_info,
    run_finetune_job,
    stored_index,
)
from longdoc.experiments.families.retrieval.runs import (
    MINING_DEPTH,
    bm25_index,
    bm25_run,
    corpus_subset,
    dense_run,
    dev_candidate_ids,
    encoder_key,
    exact_cosine_run,
    miner_run,
    segment_corpus,
    zero_shot,
)
from longdoc.experiments.families.retrieval.specs import BM25, IN_BATCH, Dense, ExactSearch, Protocol

__all__ = [
    "BM25",
    "COST_REPEATS",
    "fit_costs",
    "fit_index",
    "DATASET_LOADER",
    "EVALUATION_SPLITS",
    "FITTING_SPLITS",
    "IN_BATCH",
    "MEASURES",
    "MINING_DEPTH",
    "NEGATIVES",
    "PROBE_QUERIES",
    "RETRIEVAL",
    "RUNNER",
    "RUN_DEPTH",
    "Dense",
    "ExactSearch",
    "FinetuneJob",
    "Protocol",
    "RetrievalEvaluation",
    "RetrievalFamily",
    "RunOutcome",
    "bm25_index",
    "bm25_run",
    "corpus_subset",
    "dense_run",
    "dev_candidate_ids",
    "encoder_key",
    "evaluation_queries",
    "exact_cosine_run",
    "finetune",
    "further_reported_splits",
    "index_info",
    "load_retrieval_dataset",
    "miner_run",
    "run_finetune_job",
    "segment_corpus",
    "stored_index",
    "zero_shot",
]
