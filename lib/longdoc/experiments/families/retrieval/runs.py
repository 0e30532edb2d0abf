"""How the retrieval family ranks: BM25 runs, the corpus cut into a model's blocks (once per loaded dataset), dense
and exact-cosine runs, a miner's negatives, zero-shot runs and the candidates of a dev evaluation."""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from longdoc.data.beir import RetrievalDataset
from longdoc.eval.metrics import Run
from longdoc.experiments.cache import (
    MODULE_KEYED_KINDS,
    cached_directory,
    dataset_key,
    dataset_view,
    portable,
    portable_backbone,
)
from longdoc.experiments.families.retrieval.family import RUN_DEPTH, evaluation_queries
from longdoc.experiments.fitting import FineTuned
from longdoc.index.bm25 import BM25Retriever
from longdoc.index.dense_retriever import DenseRetriever
from longdoc.models.biencoder import BiEncoder, EncoderConfig
from longdoc.models.registry import build_encoder
from longdoc.text.segments import SegmentedCorpus, token_store_path
from longdoc.train.negatives import negatives_from_run


def bm25_index(dataset: RetrievalDataset, **params) -> BM25Retriever:
    """BM25 over the dataset's documents: built once per corpus and parameters into the cache (tokenized on
    every core), loaded (memory-mapped) once per loaded dataset; the key covers only the BM25 module's code."""

    def build(directory: Path) -> None:
        BM25Retriever(**params).index(dataset.doc_ids, dataset.texts).save(directory)

    def load() -> BM25Retriever:
        libraries = {name: importlib.metadata.version(name) for name in ("bm25s", "PyStemmer")}  # tokens and scores
        folder = cached_directory(
            "bm25", build, BM25_MODULES, **dataset_key(dataset), params=params, libraries=libraries
        )
        return BM25Retriever.load(folder)

    return dataset_view(dataset, ("bm25", tuple(sorted(params.items()))), load)


BM25_MODULES = MODULE_KEYED_KINDS["bm25"]  # the code a BM25 index's key covers (an import checks the same)


def bm25_run(dataset: RetrievalDataset, queries: dict[str, str], k: int = RUN_DEPTH, **params) -> Run:
    return bm25_index(dataset, **params).search(queries, k)


def dev_candidate_ids(dataset: RetrievalDataset, k: int) -> list[str]:
    """The documents a dev evaluation ranks when ``k`` > 0: each dev query's BM25 top ``k`` and every
    judged dev document, in corpus order (computed once per loaded dataset). Differs from the papers, which rank
    the whole corpus at every dev evaluation: a selection at 3.2M documents costs ten corpus encodings per
    fit; the dev-best checkpoint's dev and test runs still rank the whole corpus. The dev scores that choose
    (learning rate, checkpoint, plateau) are then MRR@100 over the candidates, higher than over the corpus."""

    def build() -> list[str]:
        queries, qrels = dataset.split("dev")
        wanted = {d for run in bm25_run(dataset, queries, k).values() for d in run}
        wanted |= {d for judged in qrels.values() for d in judged}
        return [d for d in dataset.doc_ids if d in wanted]

    return dataset_view(dataset, ("dev candidates", k), build)


def corpus_subset(corpus: SegmentedCorpus, doc_ids: list[str]) -> SegmentedCorpus:
    """The segmented documents of ``doc_ids`` (no tokenization again)."""
    number = {d: i for i, d in enumerate(corpus.doc_ids)}
    return SegmentedCorpus(list(doc_ids), [corpus.segments[number[d]] for d in doc_ids])


def segment_corpus(model: BiEncoder, dataset: RetrievalDataset) -> SegmentedCorpus:
    """The dataset's documents cut into the model's blocks (tokenized once per loaded dataset and shape)."""
    config = model.config
    filling = getattr(config, "sentence_filling", False)
    shape = (config.segment_length, config.max_segments, config.document_tokens, filling)
    store = getattr(dataset.corpus, "directory", None)  # a memory-mapped corpus: its tokens are stored beside it

    def build() -> SegmentedCorpus:
        return SegmentedCorpus.build(
            model.tokenizer,
            dataset.doc_ids,
            dataset.texts,
            config.segment_length,
            config.max_segments,
            config.document_tokens,
            sentence_filling=filling,
            directory=None if store is None else token_store_path(Path(store) / "segments", model.tokenizer, *shape),
        )

    return dataset_view(dataset, ("segments", model.tokenizer.name_or_path, len(model.tokenizer), *shape), build)


def dense_run(
    model: BiEncoder,
    corpus: SegmentedCorpus,
    queries: dict[str, str],
    k: int = RUN_DEPTH,
    index_factory: str = "Flat",
    progress: bool = True,
    keep: dict | None = None,
) -> Run:
    """Encode the corpus, search (:class:`~longdoc.index.dense_retriever.DenseRetriever`, the model's
    score). Under several processes they share the encoding and the first one searches: it returns the
    run, the others an empty one. ``keep``, a dict, receives the corpus ``vectors``, their ``owners`` and
    the ``encode_seconds``."""
    retriever = DenseRetriever(model, corpus, index_factory, progress).build()
    if keep is not None:
        keep.update(vectors=retriever.vectors, owners=retriever.owners, encode_seconds=retriever.encode_seconds)
    return retriever.search(queries, k)


def model_negatives(
    model: BiEncoder, corpus: SegmentedCorpus, queries: dict[str, str], qrels: dict, depth: int = 100
) -> dict[str, list[str]]:
    """Hard negatives mined by the model itself (ANCE/STAR; Longtriever's second and third iterations)."""
    return negatives_from_run(dense_run(model, corpus, queries, depth, progress=False), qrels, depth)


MINING_DEPTH = 200  # a miner's run on the train queries is kept this deep, so every K up to it shares one run


def miner_run(miner: FineTuned, dataset: RetrievalDataset, depth: int = MINING_DEPTH) -> Run:
    """A fine-tuned model's run on the train queries (cached: the static negatives of every row that
    samples from its top K <= ``depth`` come from this one run)."""

    def build(directory: Path) -> None:
        model = miner.model()
        run = dense_run(model, segment_corpus(model, dataset), dataset.split("train")[0], depth, progress=False)
        (directory / "run.json").write_text(json.dumps(run))

    directory = cached_directory(
        "mining",
        build,
        miner=portable(miner.directory),
        **dataset_key(dataset),
        depth=depth,
    )
    return json.loads((directory / "run.json").read_text())


def encoder_key(encoder: EncoderConfig) -> dict:
    """An encoder config as a cache determinant (a backbone inside the cache by its portable path)."""
    fields = asdict(encoder)
    fields["backbone"] = portable_backbone(fields["backbone"])
    return {"class": type(encoder).__name__, **fields}


def zero_shot(
    model_name: str, dataset: RetrievalDataset, encoder: EncoderConfig, seed: int = 0, progress: bool = True
) -> dict[str, Run]:
    """Runs of a model that is not fine-tuned (the backbone as it is), on the dev and test queries."""

    def build(directory: Path) -> None:
        model = build_encoder(model_name, encoder, seed)
        merged = {q: t for queries in evaluation_queries(dataset).values() for q, t in queries.items()}
        run = dense_run(model, segment_corpus(model, dataset), merged, RUN_DEPTH, progress=progress)
        runs = {split: {q: run[q] for q in queries} for split, queries in evaluation_queries(dataset).items()}
        (directory / "runs.json").write_text(json.dumps(runs))

    directory = cached_directory(
        "zero_shot",
        build,
        model=model_name,
        **dataset_key(dataset),
        encoder=encoder_key(encoder),
        seed=seed,
    )
    return json.loads((directory / "runs.json").read_text())


def exact_cosine_run(
    query_vectors: np.ndarray, doc_vectors: np.ndarray, doc_ids: list[str], qids: list[str], k: int = RUN_DEPTH
) -> Run:
    """Exact cosine similarity between every query and every document (one vector each)."""
    import torch

    queries = torch.nn.functional.normalize(torch.from_numpy(np.asarray(query_vectors, dtype=np.float32)), dim=1)
    docs = torch.nn.functional.normalize(torch.from_numpy(np.asarray(doc_vectors, dtype=np.float32)), dim=1)
    scores, best = (queries @ docs.T).topk(min(k, len(doc_ids)), dim=1)
    return {
        qid: {doc_ids[d]: float(s) for s, d in zip(scores[row].tolist(), best[row].tolist())}
        for row, qid in enumerate(qids)
    }
