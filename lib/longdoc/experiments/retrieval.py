"""Retrieval experiments: runs of BM25 and dense models, fine-tuning with cached checkpoints, tables.

The notebooks are thin: everything they compute goes through these functions.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from longdoc.data.beir import RetrievalDataset
from longdoc.eval.metrics import Run, evaluate, per_query
from longdoc.eval.significance import paired_t_test
from longdoc.experiments.cache import cached_directory, portable
from longdoc.index.bm25 import BM25Retriever
from longdoc.index.dense import DenseIndex
from longdoc.models.biencoder import BiEncoder, EncoderConfig, FirstP, MaxP
from longdoc.models.hi_transformer import HiTransformer
from longdoc.models.longtriever import Longtriever
from longdoc.models.parade import Parade
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.loop import TrainConfig, train_biencoder
from longdoc.train.negatives import negatives_from_run

MODELS = {"FirstP": FirstP, "MaxP": MaxP, "PARADE": Parade, "Hi-Transformer": HiTransformer, "Longtriever": Longtriever}


def bm25_run(dataset: RetrievalDataset, queries: dict[str, str], k: int = 100, **params) -> Run:
    retriever = BM25Retriever(**params).index(dataset.doc_ids, dataset.texts)
    return retriever.search(queries, k)


def segment_corpus(model: BiEncoder, dataset: RetrievalDataset) -> SegmentedCorpus:
    return SegmentedCorpus.build(model.tokenizer, dataset.doc_ids, dataset.texts,
                                 model.config.segment_length, model.config.max_segments)


def dense_run(model: BiEncoder, corpus: SegmentedCorpus, queries: dict[str, str], k: int = 100,
              index_factory: str = "Flat", progress: bool = True) -> Run:
    """Encode the corpus (one vector per segment), search, max-pool segment hits into documents."""
    vectors, owners = model.encode_corpus(corpus, progress=progress)
    index = DenseIndex(vectors.shape[1], factory=index_factory)
    index.add(vectors, owners)
    qids = list(queries)
    scores, docs = index.search(model.encode_queries([queries[q] for q in qids]), k)
    return {
        qid: {corpus.doc_ids[d]: float(s) for s, d in zip(scores[row], docs[row]) if d >= 0}
        for row, qid in enumerate(qids)
    }


def model_negatives(model: BiEncoder, corpus: SegmentedCorpus, queries: dict[str, str], qrels: dict,
                    depth: int = 100) -> dict[str, list[str]]:
    """Hard negatives mined by the model itself (ANCE/STAR; Longtriever's second and third iterations)."""
    return negatives_from_run(dense_run(model, corpus, queries, depth, progress=False), qrels, depth)


def dev_mrr(dataset: RetrievalDataset, corpus: SegmentedCorpus, measure: str = "MRR@100"):
    """A dev-set scorer for the training loop's model selection (never the test split)."""
    queries, qrels = dataset.split("dev")

    def score(model: BiEncoder) -> float:
        return evaluate(dense_run(model, corpus, queries, progress=False), qrels, [measure])[measure]

    return score


def finetune(model_name: str, dataset: RetrievalDataset, encoder: EncoderConfig, train: TrainConfig,
             negatives: str = "bm25", negative_depth: int = 100, iterations: int = 1,
             init: str | Path | None = None, progress: bool = True) -> tuple[BiEncoder, dict]:
    """Fine-tune a model on the train split; the checkpoint is cached under a key of everything that
    determines it (dataset checksum, configs, negatives, iterations, starting checkpoint).

    Iteration 1 uses in-batch negatives plus ``negatives`` ("bm25" or "none"); every further
    iteration continues from the previous one with hard negatives mined by that model (ANCE/STAR;
    Longtriever section 4.2: one BM25 iteration, then two with the model's own negatives).
    ``init`` is a saved model directory to start from (a pre-trained Longtriever), else the backbone.
    Model selection on dev runs only when an iteration has several epochs.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    if negatives not in ("bm25", "none"):
        raise ValueError(f"negatives must be 'bm25' or 'none', got {negatives!r}")
    model_class = MODELS[model_name]
    train_queries, train_qrels = dataset.split("train")
    common = dict(model_name=model_name, dataset=dataset, encoder=encoder, train=train, negatives=negatives,
                  negative_depth=negative_depth, init=init, progress=progress)

    def build(directory: Path) -> None:
        if iterations == 1:
            model = model_class.load(init) if init else model_class(encoder)
            corpus = segment_corpus(model, dataset)
            if negatives == "bm25":
                mined = negatives_from_run(bm25_run(dataset, train_queries, negative_depth), train_qrels, negative_depth)
            else:
                mined = {}
            history = []
        else:
            model, previous = finetune(**common, iterations=iterations - 1)
            corpus = segment_corpus(model, dataset)
            mined = model_negatives(model, corpus, train_queries, train_qrels, negative_depth)
            history = previous["iterations"]
        dev_eval = dev_mrr(dataset, corpus) if train.epochs > 1 else None
        result = train_biencoder(model, dataset.queries, train_qrels, corpus, mined, train, dev_eval=dev_eval, progress=progress)
        model.save(directory / "model")
        record = {"iterations": history + [asdict(result) | {"negatives": negatives if iterations == 1 else "model"}]}
        (directory / "history.json").write_text(json.dumps(record, indent=2))

    directory = cached_directory(
        "finetune", build, model=model_name, dataset=dataset.name, data_checksum=dataset.checksum,
        subsample=dataset.manifest.get("subsample"), encoder={"class": type(encoder).__name__, **asdict(encoder)},
        train=asdict(train), negatives=negatives, negative_depth=negative_depth, iterations=iterations,
        init=portable(init) if init else None,
    )
    history = json.loads((directory / "history.json").read_text())
    return model_class.load(directory / "model"), history


def metrics_table(runs: dict[str, Run], qrels: dict, measures: list[str]) -> pd.DataFrame:
    return pd.DataFrame({name: evaluate(run, qrels, measures) for name, run in runs.items()}).T[measures]


def significance_against(runs: dict[str, Run], qrels: dict, baseline: str, measure: str) -> pd.DataFrame:
    """Paired t-test of every system against ``baseline`` on per-query ``measure``."""
    values = {name: per_query(run, qrels, [measure])[measure] for name, run in runs.items()}
    rows = {name: paired_t_test(values[name], values[baseline]) for name in runs if name != baseline}
    return pd.DataFrame(rows).T.rename(columns={"mean_difference": f"Δ{measure} vs {baseline}"})
