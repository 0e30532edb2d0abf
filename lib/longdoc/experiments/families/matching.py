"""The matching family: long document to long document, judged by labelled pairs (SMITH's Tables 5-7,
and the retrieval papers' encoders as matchers).

- **Data**: a :class:`~longdoc.data.matching.MatchingDataset` (corpus, labelled pairs per split, links
  for document-to-document ranking).
- **Rows**: :class:`Matcher`, a siamese matcher (:class:`~longdoc.models.matching.SiameseMatcher`)
  over any encoder of the registry, fine-tuned with the pair BCE, optionally pre-trained first
  (SMITH-WP, SMITH-WP+SP: on the documents of no dev or test pair, :func:`pretraining_documents`).
- **Fitting**: :func:`finetune_matcher`; each dev evaluation (:class:`MatchingEvaluation`) encodes the
  whole corpus once: that gives the dev pair scores (the selection measure: dev accuracy at the
  threshold that is best on dev), the test pair scores, and the ranking of every test source page's
  links through a FAISS index; test labels are never read for any choice. Cached with the scores of
  the dev-best checkpoint.
- **Outcome**: :class:`PairOutcome`; per item = per pair (Accuracy) or per ranking source (MRR@100,
  R@10); every run's decision threshold is the one best on dev.
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from longdoc.data.matching import MatchingDataset, load_matching
from longdoc.eval.chance import random_ranking_value
from longdoc.eval.classification import accuracy_threshold, classification_metrics, pair_outcomes
from longdoc.eval.metrics import Run, evaluate, per_query
from longdoc.eval.run_files import write_run
from longdoc.experiments.cache import cached_json, dataset_key, dataset_view, portable
from longdoc.experiments.families.pretraining import Documents, PretrainedStart
from longdoc.experiments.families.retrieval import encoder_key
from longdoc.experiments.families.worker import dataset_reference, launch
from longdoc.experiments.fitting import DevEvaluation, FineTuned, fine_tune, save_fit, train_key
from longdoc.experiments.settings import BudgetSettings
from longdoc.experiments.systems import Family, Spec
from longdoc.index.dense import DenseIndex
from longdoc.models.biencoder import EncoderConfig
from longdoc.models.matching import SiameseMatcher, stored_pair_cosines
from longdoc.models.registry import encoder_class, load_encoder
from longdoc.models.smith import Smith
from longdoc.seeding import seeded
from longdoc.sharding import rank
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import SAVE_MINUTES, Checkpointer
from longdoc.train.loop import TrainConfig
from longdoc.train.matching import train_matcher
from longdoc.train.pretrain import PretrainConfig
from longdoc.train.steps import require_one_step

CLASSIFICATION = ["Accuracy", "Precision", "Recall", "F1"]
RANKING = ["MRR@100", "R@10"]
MATCHING_MEASURES = CLASSIFICATION + RANKING
RANKING_DEPTH = 100
EVALUATION_SPLITS = ("dev", "test")


class MatchingFamily(Family):
    name = "matching"
    role = "matching"
    selection_measure = "Accuracy"  # on dev, at the threshold that is best on dev
    measures = tuple(MATCHING_MEASURES)
    dev_measures = tuple(CLASSIFICATION)

    def load(self, study) -> MatchingDataset:
        options = study.options
        data = load_matching(options.dataset, max_docs=options.max_docs, seed=study.seeds[0])
        for split in ("train", "dev", "test"):
            data.split(split)
        return data

    def learning_rates(self, study) -> list[float]:
        return study.settings(BudgetSettings).learning_rates

    def chance(self, study, measure: str, split: str = "test") -> float | None:
        """A constant label (Accuracy: the majority label's share; F1: every pair called a match), or a
        random ranking of the other documents (the ranking measures)."""
        pairs = study.data.split(split)
        positive = sum(p.label for p in pairs) / len(pairs)
        if measure == "Accuracy":
            return max(positive, 1 - positive)
        if measure == "F1":
            return 2 * positive / (1 + positive)
        relevant = [
            n for n in (sum(1 for r in t.values() if r > 0) for t in study.data.ranking_qrels(split).values()) if n
        ]
        return random_ranking_value(measure, len(study.data.corpus) - 1, relevant) if relevant else None


MATCHING = MatchingFamily()


@dataclass
class PairOutcome:
    """One matcher run's cosines: ``dev``/``test`` one per pair (the dataset's pair order), ``ranking``
    the test ranking run."""

    scores: dict

    def threshold(self, data: MatchingDataset) -> float:
        """The decision threshold that is best on dev."""
        return accuracy_threshold(labels(data, "dev"), self.scores["dev"])

    def metrics(
        self, data: MatchingDataset, split: str, measures: list[str] | None = None, threshold: float | None = None
    ) -> dict[str, float]:
        """The run's classification measures on ``split`` at the dev-chosen threshold (or ``threshold``;
        0 is the paper's σ(6 cos) = 0.5), ranking measures on test, and the threshold."""
        if threshold is None:
            threshold = self.threshold(data)
        metrics = classification_metrics(labels(data, split), self.scores[split], threshold)
        if split == "test":
            metrics.update(evaluate(self.scores["ranking"], data.ranking_qrels("test"), RANKING))
        return metrics | {"threshold": threshold}

    def per_item(self, data: MatchingDataset, split: str, measure: str) -> dict[str, float]:
        """Per-pair correctness (Accuracy) or per-source ranking values, keyed for paired comparisons."""
        if measure == "Accuracy":
            outcomes = pair_outcomes(labels(data, split), self.scores[split], self.threshold(data))
            return {f"{p.source}\t{p.target}": float(v) for p, v in zip(data.split(split), outcomes)}
        if measure in RANKING and split == "test":
            return per_query(self.scores["ranking"], data.ranking_qrels("test"), [measure])[measure]
        raise ValueError(f"measure {measure!r}: intervals are defined for Accuracy (per pair) and {RANKING} (test)")

    def write(self, folder: Path, data: MatchingDataset, tag: str, seed: int | None) -> None:
        """The test ranking (TREC format) and the pair scores (``pairs/<system>.seed<k>.tsv``)."""
        from longdoc.io import atomic_write

        write_run(self.scores["ranking"], folder / "runs" / f"{tag}.seed{seed}.trec", tag=tag)
        with atomic_write(folder / "pairs" / f"{tag}.seed{seed}.tsv") as handle:
            handle.write("split\tsource-id\ttarget-id\tlabel\tcosine\n")
            for split in EVALUATION_SPLITS:
                for pair, score in zip(data.split(split), self.scores[split]):
                    handle.write(f"{split}\t{pair.source}\t{pair.target}\t{pair.label}\t{score:.6f}\n")


def labels(data: MatchingDataset, split: str) -> list[int]:
    return [p.label for p in data.split(split)]


# -- corpus, ranking -------------------------------------------------------------------------------
def block_corpus(encoder, dataset: MatchingDataset) -> SegmentedCorpus:
    """Every document of the dataset in the encoder's blocks: greedy-filled sentence blocks (SMITH, HAN)
    or consecutive token windows (the others); cut once per loaded dataset and shape."""
    config = encoder.config
    filling = getattr(config, "sentence_filling", False)
    shape = (config.segment_length, config.max_segments, config.document_tokens, filling)

    def build() -> SegmentedCorpus:
        ids = list(dataset.corpus)
        return SegmentedCorpus.build(
            encoder.tokenizer,
            ids,
            dataset.texts(ids),
            config.segment_length,
            config.max_segments,
            config.document_tokens,
            sentence_filling=filling,
        )

    return dataset_view(dataset, ("blocks", encoder.tokenizer.name_or_path, len(encoder.tokenizer), *shape), build)


def document_ranking(
    vectors: np.ndarray, owners: np.ndarray, doc_ids: list[str], sources: list[str], k: int = RANKING_DEPTH
) -> Run:
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


def pretraining_documents(data: MatchingDataset) -> Documents:
    """The documents of no dev or test pair and of no dev or test ranking judgement (SMITH pre-trains on
    a separate collection; ours is the rest of the corpus, so that no evaluated document is seen
    unlabelled in pre-training; documents of training pairs may recur in evaluation pairs, as pages
    recur across Wiki65K's splits)."""
    held = set(data.documents("dev")) | set(data.documents("test"))
    for split in ("dev", "test"):
        for source, judged in data.ranking_qrels(split).items():
            held |= {source, *judged}
    ids = [d for d in data.corpus if d not in held]
    return Documents(f"{data.name}:outside-dev-test-pairs", ids, data.texts(ids))


# -- fitting ---------------------------------------------------------------------------------------
class MatchingEvaluation(DevEvaluation):
    """Each evaluation encodes the corpus once and keeps the step's pair scores, test ranking run and
    encoding seconds, so the dev-best checkpoint needs no second encoding."""

    def __init__(self, dataset: MatchingDataset, corpus: SegmentedCorpus):
        super().__init__()
        self.corpus = corpus
        number = {d: i for i, d in enumerate(corpus.doc_ids)}
        self.pairs = {split: dataset.split(split) for split in EVALUATION_SPLITS}
        self.numbers = {
            split: ([number[p.source] for p in pairs], [number[p.target] for p in pairs])
            for split, pairs in self.pairs.items()
        }
        self.ranking_sources = sorted(dataset.ranking_qrels("test"))

    def evaluate(self, matcher: SiameseMatcher, step: int) -> tuple[float, dict]:
        started = time.perf_counter()
        vectors, owners = matcher.encoder.encode_corpus(self.corpus, progress=False)
        seconds = time.perf_counter() - started
        scores = {
            split: stored_pair_cosines(vectors, owners, *self.numbers[split]).tolist() for split in EVALUATION_SPLITS
        }
        scores["ranking"] = document_ranking(vectors, owners, self.corpus.doc_ids, self.ranking_sources)
        dev_labels = [p.label for p in self.pairs["dev"]]
        threshold = accuracy_threshold(dev_labels, scores["dev"])
        score = classification_metrics(dev_labels, scores["dev"], threshold)[MATCHING.selection_measure]
        return score, {"scores": scores, "encode_seconds": seconds}


def build_matcher(model_name: str, encoder: EncoderConfig, seed: int, init: str | Path | None = None) -> SiameseMatcher:
    """A matcher over a registry model: from a saved checkpoint (``init``), else from the backbone (new
    parameters drawn under ``seed``; every weight when the config asks for ``random_init``)."""
    model_class = encoder_class(model_name)
    with seeded(seed):
        if init:
            return SiameseMatcher(load_into(model_class, encoder, Path(init)))
        model = model_class(encoder)
        if getattr(encoder, "random_init", False):
            model.reinitialize()
        return SiameseMatcher(model)


def load_into(model_class, encoder: EncoderConfig, directory: Path):
    """A model of config ``encoder`` holding the weights saved in ``directory`` (a pre-trained SMITH):
    its backbone, and every other saved parameter. The block-position table is cut to this config's
    blocks, or, when this config reads more blocks than were pre-trained, its extra rows keep their
    fresh values; parameters the saved model lacks (a combine mode's attention) keep theirs too."""
    import torch

    model = model_class(
        replace(encoder, backbone=str(directory / "backbone"), random_init=False)
        if hasattr(encoder, "random_init")
        else replace(encoder, backbone=str(directory / "backbone"))
    )
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


def start_rule(matcher: SiameseMatcher, corpus: SegmentedCorpus, dataset: MatchingDataset, pretrained: bool) -> dict:
    """SMITH's block head at the start of fine-tuning (:meth:`~longdoc.models.smith.Smith.center_block_head`):
    centred on the training documents when fine-tuning starts from the backbone; kept as pre-training
    left it when it starts from a pre-trained checkpoint (the document layers were trained on those
    block vectors; re-centring them would move SMITH-WP's and WP+SP's inputs), its block cosine measured
    for the record. Other encoders: nothing."""
    if not isinstance(matcher.encoder, Smith):
        return {}
    number = {d: i for i, d in enumerate(corpus.doc_ids)}
    training = dict.fromkeys(d for p in dataset.split("train") for d in (p.source, p.target))
    return matcher.encoder.center_block_head([corpus.segments[number[d]] for d in training], apply=not pretrained)


@dataclass
class MatchingJob:
    """One matcher fine-tuning, everything decided: what every training process needs (JSON-able)."""

    model_name: str
    encoder: dict
    train: dict
    init: str | None  # a saved model to start from (a pre-trained SMITH), or None for the backbone
    progress: bool = True


RUNNER, DATASET_LOADER = f"{__name__}:run_matching_job", "longdoc.data.matching:load_matching"


def run_matching_job(job: MatchingJob, dataset: MatchingDataset, directory: Path, resume: Path) -> None:
    """Train with dev selection; the first process writes the model, history and the dev-best outputs."""
    train = TrainConfig(**job.train)
    encoder = encoder_class(job.model_name).config_class(**job.encoder)
    matcher = build_matcher(job.model_name, encoder, train.seed, job.init)
    corpus = block_corpus(matcher.encoder, dataset)
    start = start_rule(matcher, corpus, dataset, pretrained=job.init is not None)
    evaluation = MatchingEvaluation(dataset, corpus)
    result = train_matcher(
        matcher,
        corpus,
        dataset.split("train"),
        train,
        dev_eval=evaluation,
        progress=job.progress,
        checkpoint=Checkpointer(resume, minutes=SAVE_MINUTES),
    )
    if rank() == 0:
        matcher.encoder.save(directory / "model")
        best = evaluation.kept[result.best_step]
        history = {"iterations": [asdict(result)], "encode_seconds": best["encode_seconds"], "start": start}
        save_fit(directory, history, best["scores"])


def finetune_matcher(
    model_name: str,
    dataset: MatchingDataset,
    encoder: EncoderConfig,
    train: TrainConfig,
    init: str | Path | None = None,
    progress: bool = True,
    n_devices: int = 1,
) -> FineTuned:
    """Fine-tune a matcher on the train pairs with dev selection; cached under a key of everything that
    determines it (dataset checksum, configs, starting checkpoint, processes, code). ``init``: a saved model
    directory to start from (a pre-trained SMITH), else the backbone. Its outputs are the dev-best
    checkpoint's ``{"dev": cosines, "test": cosines, "ranking": run}``. ``n_devices`` > 1 trains in that many
    processes (``torchrun``, one per GPU; ``train.batch_size`` pairs each) launched from here."""
    if train.hard_negatives or train.cache_size:
        raise ValueError("matching trains on labelled pairs: hard_negatives and cache_size must be 0")
    if n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    require_one_step(f"training {model_name} (pairs)", len(dataset.pairs["train"]), train.batch_size, n_devices)
    job = MatchingJob(model_name, asdict(encoder), asdict(train), str(init) if init else None, progress)

    def run(directory: Path, resume: Path) -> None:
        if n_devices == 1:
            run_matching_job(job, dataset, directory, resume)
        else:
            launch(RUNNER, job, dataset_reference(dataset, DATASET_LOADER), directory, resume, n_devices)

    return fine_tune(
        "finetune_matching",
        run,
        lambda path: SiameseMatcher(load_encoder(model_name, path)),
        model=model_name,
        **dataset_key(dataset),
        encoder=encoder_key(encoder),
        train=train_key(train),
        init=portable(init) if init else None,
        **({"processes": n_devices} if n_devices > 1 else {}),
    )


# -- rows ------------------------------------------------------------------------------------------
def fit_parameters(fit: FineTuned) -> int:
    """The parameters of a fit's model, cached with its small files (counted once where the model is)."""
    return cached_json(
        "parameters", lambda: sum(p.numel() for p in fit.model().parameters()), fit=portable(fit.directory)
    )


@dataclass(frozen=True)
class Matcher(PretrainedStart, Spec):
    """A siamese matcher over registry model ``model``, fine-tuned on the train pairs; pre-trained first
    with ``pretrain`` (on :func:`pretraining_documents`, with ``pretrain_encoder`` when the sweep row
    fine-tunes one pre-trained model under another block count or combine mode)."""

    model: str
    encoder: EncoderConfig
    pretrain: PretrainConfig | None = None
    pretrain_encoder: EncoderConfig | None = None

    family = MATCHING

    PRETRAINING_FIELDS = ("pretrain", "pretrain_encoder")

    def pretraining_input(self, study) -> tuple:
        return pretraining_documents(study.data), self.pretrain_encoder or self.encoder, None

    def measure(self, study, fit: FineTuned) -> None:
        """The fit's parameter count (SMITH's cost table), counted where its model is."""
        fit_parameters(fit)

    def start_probe(self, study) -> dict:
        """The start (as fine-tuning would begin: weights, seed, block-head rule) on the dev pairs,
        without training: ROC AUC of its document cosines, and accuracy at the dev-best threshold."""
        init = self.start(study)
        matcher = build_matcher(self.model, self.encoder, study.seeds[0], init)
        corpus = block_corpus(matcher.encoder, study.data)
        start_rule(matcher, corpus, study.data, pretrained=init is not None)
        pairs = study.data.split("dev")
        ids = sorted({d for p in pairs for d in (p.source, p.target)})
        number, local = {d: i for i, d in enumerate(corpus.doc_ids)}, {d: i for i, d in enumerate(ids)}
        vectors, owners = matcher.encoder.encode_corpus(
            SegmentedCorpus(ids, [corpus.segments[number[d]] for d in ids]), progress=False
        )
        cosines = stored_pair_cosines(
            vectors, owners, [local[p.source] for p in pairs], [local[p.target] for p in pairs]
        ).tolist()
        labels = [p.label for p in pairs]
        accuracy = classification_metrics(labels, cosines, accuracy_threshold(labels, cosines))["Accuracy"]
        return {
            "probe": f"dev pairs ({len(pairs)}, ROC AUC of the start's cosines)",
            "score": float(roc_auc_score(labels, cosines)),
            "accuracy": accuracy,
        }

    def fine_tune(self, study, learning_rate: float, seed: int) -> FineTuned:
        """The fit itself (:func:`finetune_matcher`, from the pre-trained start where it has one)."""
        return finetune_matcher(
            self.model,
            study.data,
            self.encoder,
            study.settings(BudgetSettings).train_config(learning_rate, seed),
            init=self.start(study),
            progress=study.progress,
            n_devices=study.settings(BudgetSettings).n_devices,
        )

    def fits(self, plan, learning_rate: float, seed: int) -> None:
        """Its pre-training, then one cached fit: fine-tuning on pairs, and the dev and test pairs encoded at
        each dev evaluation."""
        plan.pretraining(self.model, self.pretrain_encoder or self.encoder, self.pretrain, self.start)
        budget = plan.budget()
        plan.tokenise(self.encoder)
        plan.fit(
            ("fit", repr(self), repr(budget), learning_rate, seed),
            [
                plan.work(
                    "fine-tuning",
                    f"matching:{self.model}",
                    plan.fine_tuning_steps(budget) * budget.batch_size,
                    self.encoder,
                ),
                plan.encode("dev evaluation", self.model, self.encoder, budget.dev_evals),  # dev and test pairs
                *plan.tokenised_in_processes(budget.n_devices),
            ],
            functools.partial(self.fine_tune, learning_rate=learning_rate, seed=seed),
        )

    def outcome(self, study, fit: FineTuned) -> PairOutcome:
        return PairOutcome(fit.outputs)
