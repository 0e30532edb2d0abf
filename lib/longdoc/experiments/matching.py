"""Matching runs: siamese matchers fine-tuned on labelled pairs with dev selection, cached.

Every fine-tuning run (one model, one learning rate, one seed) is cached with the pair scores of its
dev-best checkpoint on the dev and test pairs and its document-to-document ranking run, so notebooks
that share a run share it. Each dev evaluation encodes the whole corpus once: that gives the dev pair
scores (the selection measure: dev accuracy at the threshold that is best on dev), the test pair
scores, and the ranking of every test source page's links through a FAISS index; test labels are
never read for any choice.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from longdoc.data.matching import MatchingDataset
from longdoc.eval.classification import accuracy_threshold, classification_metrics
from longdoc.eval.metrics import Run
from longdoc.experiments.cache import cached_directory, portable
from longdoc.experiments.retrieval import encoder_key
from longdoc.index.dense import DenseIndex
from longdoc.models.biencoder import EncoderConfig, FirstP, MaxP
from longdoc.models.han import HAN
from longdoc.models.longtriever import Longtriever
from longdoc.models.matching import SiameseMatcher, stored_pair_cosines
from longdoc.models.sedr import SeDR
from longdoc.models.smith import Smith
from longdoc.seeding import seeded
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import SAVE_MINUTES, Checkpointer
from longdoc.train.loop import TrainConfig
from longdoc.train.matching import train_matcher

MATCHERS = {"MatchBERT": FirstP, "MaxP": MaxP, "SMITH": Smith, "HAN": HAN, "Longtriever": Longtriever, "SeDR": SeDR}
SELECTION_MEASURE = "Accuracy"  # on dev, at the threshold that is best on dev
RANKING_DEPTH = 100
EVALUATION_SPLITS = ("dev", "test")

_BLOCKED: dict[tuple, SegmentedCorpus] = {}  # in-process: a study cuts its corpus once per block shape


def block_corpus(encoder, dataset: MatchingDataset) -> SegmentedCorpus:
    """Every document of the dataset in the encoder's blocks: greedy-filled sentence blocks (SMITH, HAN)
    or consecutive token windows (the others); cut once per process and shape."""
    config = encoder.config
    filling = getattr(config, "sentence_filling", False)
    key = (dataset.name, dataset.checksum, len(dataset.corpus), encoder.tokenizer.name_or_path, len(encoder.tokenizer),
           config.segment_length, config.max_segments, config.document_tokens, filling)
    if key not in _BLOCKED:
        ids = list(dataset.corpus)
        _BLOCKED[key] = SegmentedCorpus.build(encoder.tokenizer, ids, dataset.texts(ids), config.segment_length,
                                              config.max_segments, config.document_tokens, sentence_filling=filling)
    return _BLOCKED[key]


def document_ranking(vectors: np.ndarray, owners: np.ndarray, doc_ids: list[str], sources: list[str],
                     k: int = RANKING_DEPTH) -> Run:
    """Each source document's top ``k`` other documents by the matcher's similarity (the largest
    cosine over pairs of their vectors), through a flat FAISS inner-product index; the source itself
    is left out of its own list."""
    unit = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)).astype(np.float32)
    index = DenseIndex(unit.shape[1])
    index.add(unit, owners)
    number = {d: i for i, d in enumerate(doc_ids)}
    rows = [np.flatnonzero(owners == number[s]) for s in sources]
    most = int(np.bincount(owners).max())  # a document's vectors may fill the hits: search deep enough for k others
    scores, docs = index.search(unit[np.concatenate(rows)], k + most)
    run: Run = {}
    start = 0
    for source, own in zip(sources, rows):
        best: dict[str, float] = {}
        for row in range(start, start + len(own)):  # several vectors per source: max over them
            for score, doc in zip(scores[row], docs[row]):
                if doc >= 0 and doc_ids[doc] != source and score > best.get(doc_ids[doc], -np.inf):
                    best[doc_ids[doc]] = float(score)
        start += len(own)
        run[source] = dict(sorted(best.items(), key=lambda item: -item[1])[:k])
    return run


class MatchEvaluator:
    """The dev evaluation inside fine-tuning (see the module docstring); keeps every evaluated step's
    pair scores and test ranking run, so the dev-best checkpoint needs no second encoding."""

    def __init__(self, dataset: MatchingDataset, corpus: SegmentedCorpus):
        self.dataset = dataset
        self.corpus = corpus
        number = {d: i for i, d in enumerate(corpus.doc_ids)}
        self.pairs = {split: dataset.split(split) for split in EVALUATION_SPLITS}
        self.numbers = {split: ([number[p.source] for p in pairs], [number[p.target] for p in pairs])
                        for split, pairs in self.pairs.items()}
        self.ranking_sources = sorted(dataset.ranking_qrels("test"))
        self.scores: dict[int, dict] = {}
        self.encode_seconds: dict[int, float] = {}

    def state_dict(self) -> dict:
        return {"scores": self.scores, "encode_seconds": self.encode_seconds}

    def load_state_dict(self, state: dict) -> None:
        self.scores = {int(step): value for step, value in state["scores"].items()}
        self.encode_seconds = {int(step): value for step, value in state["encode_seconds"].items()}

    def __call__(self, matcher: SiameseMatcher, step: int) -> float:
        started = time.perf_counter()
        vectors, owners = matcher.encoder.encode_corpus(self.corpus, progress=False)
        self.encode_seconds[step] = time.perf_counter() - started
        scores = {split: stored_pair_cosines(vectors, owners, *self.numbers[split]).tolist() for split in EVALUATION_SPLITS}
        scores["ranking"] = document_ranking(vectors, owners, self.corpus.doc_ids, self.ranking_sources)
        self.scores[step] = scores
        labels = [p.label for p in self.pairs["dev"]]
        threshold = accuracy_threshold(labels, scores["dev"])
        return classification_metrics(labels, scores["dev"], threshold)[SELECTION_MEASURE]


@dataclass
class FineTunedMatcher:
    """A cached fine-tuning: its directory, training history, and the scores of its dev-best checkpoint
    (``dev``/``test``: one cosine per pair, in the dataset's pair order; ``ranking``: the test run)."""

    model_name: str
    directory: Path
    history: dict
    scores: dict

    def model(self) -> SiameseMatcher:
        return SiameseMatcher(MATCHERS[self.model_name].load(self.directory / "model"))

    @property
    def best_dev(self) -> float:
        return self.history["best_dev"]


def build_matcher(model_name: str, encoder: EncoderConfig, seed: int, init: str | Path | None = None) -> SiameseMatcher:
    """A matcher over a model of ``MATCHERS``: from a saved checkpoint (``init``), else from the backbone
    (new parameters drawn under ``seed``; every weight when the config asks for ``random_init``)."""
    if model_name not in MATCHERS:
        raise KeyError(f"unknown matcher {model_name!r}; known: {sorted(MATCHERS)}")
    with seeded(seed):
        if init:
            return SiameseMatcher(load_into(MATCHERS[model_name], encoder, Path(init)))
        encoder_model = MATCHERS[model_name](encoder)
        if getattr(encoder, "random_init", False):
            encoder_model.reinitialize()
        return SiameseMatcher(encoder_model)


def load_into(model_class, encoder: EncoderConfig, directory: Path):
    """A model of config ``encoder`` holding the weights saved in ``directory`` (a pre-trained SMITH):
    its backbone, and every other saved parameter. The block-position table is cut to this config's
    blocks, or, when this config reads more blocks than were pre-trained, its extra rows keep their
    fresh values; parameters the saved model lacks (a combine mode's attention) keep theirs too."""
    import torch

    model = model_class(replace(encoder, backbone=str(directory / "backbone"), random_init=False)
                        if hasattr(encoder, "random_init") else replace(encoder, backbone=str(directory / "backbone")))
    extra = directory / "extra_parameters.pt"
    if extra.exists():
        own = model.state_dict()
        saved = torch.load(extra)
        table = "block_position_embeddings.weight"
        if table in saved and table in own and saved[table].shape != own[table].shape:
            rows = min(len(saved[table]), len(own[table]))
            saved[table] = torch.cat([saved[table][:rows], own[table][rows:]])
        mismatched = [k for k, v in saved.items() if k not in own or own[k].shape != v.shape]
        if mismatched:
            raise ValueError(f"{directory}: saved parameters {mismatched} do not fit {model_class.__name__}({encoder})")
        model.load_state_dict(saved, strict=False)
    return model


def finetune_matcher(model_name: str, dataset: MatchingDataset, encoder: EncoderConfig, train: TrainConfig,
                     init: str | Path | None = None, progress: bool = True) -> FineTunedMatcher:
    """Fine-tune a matcher on the train pairs with dev selection; cached under a key of everything that
    determines it (dataset checksum, configs, starting checkpoint, code). ``init``: a saved model
    directory to start from (a pre-trained SMITH), else the backbone."""
    if train.hard_negatives or train.cache_size:
        raise ValueError("matching trains on labelled pairs: hard_negatives and cache_size must be 0")

    def build(directory: Path, resume: Path) -> None:
        matcher = build_matcher(model_name, encoder, train.seed, init)
        corpus = block_corpus(matcher.encoder, dataset)
        start = {}
        if isinstance(matcher.encoder, Smith):  # at every start: pre-training moves the first-token states
            number = {d: i for i, d in enumerate(corpus.doc_ids)}
            training = dict.fromkeys(d for p in dataset.split("train") for d in (p.source, p.target))
            start = matcher.encoder.center_block_head([corpus.segments[number[d]] for d in training])
        evaluator = MatchEvaluator(dataset, corpus)
        result = train_matcher(matcher, corpus, dataset.split("train"), train, dev_eval=evaluator, progress=progress,
                               checkpoint=Checkpointer(resume, minutes=SAVE_MINUTES))
        matcher.encoder.save(directory / "model")
        record = asdict(result) | {"encode_seconds": evaluator.encode_seconds.get(result.best_step), "start": start}
        (directory / "history.json").write_text(json.dumps(record, indent=2))
        (directory / "scores.json").write_text(json.dumps(evaluator.scores[result.best_step]))

    directory = cached_directory(
        "finetune_matching", build, model=model_name, dataset=dataset.name, data_checksum=dataset.checksum,
        subsample=dataset.manifest.get("subsample"), encoder=encoder_key(encoder), train=asdict(train),
        init=portable(init) if init else None)
    return FineTunedMatcher(model_name, directory, json.loads((directory / "history.json").read_text()),
                            json.loads((directory / "scores.json").read_text()))
