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
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from longdoc.data.beir import RetrievalDataset
from longdoc.data.registry import load_dataset
from longdoc.data.splits import require_splits
from longdoc.eval.chance import random_ranking_value
from longdoc.eval.metrics import Run, evaluate, per_query
from longdoc.eval.probes import in_batch_probe
from longdoc.eval.run_files import write_run
from longdoc.experiments import cache
from longdoc.experiments.cache import cached_directory, dataset_key, dataset_memo, portable
from longdoc.experiments.families.pretraining import PretrainedStart
from longdoc.experiments.families.worker import dataset_reference, launch
from longdoc.experiments.fitting import DevEvaluation, FineTuned, fine_tune, save_fit, train_key
from longdoc.experiments.settings import BudgetSettings
from longdoc.experiments.systems import Family, Spec, System
from longdoc.index.bm25 import BM25Retriever
from longdoc.index.dense_retriever import DenseRetriever
from longdoc.models.biencoder import BiEncoder, EncoderConfig
from longdoc.models.registry import build_encoder, encoder_class, load_encoder
from longdoc.sharding import from_first, rank, world_size
from longdoc.text.segments import SegmentedCorpus, token_store_path
from longdoc.train.checkpoint import SAVE_MINUTES, Checkpointer
from longdoc.train.loop import TrainConfig, train_biencoder
from longdoc.train.negatives import negatives_from_run
from longdoc.train.pretrain import PretrainConfig

MEASURES = ["MRR@100", "R@10", "R@100", "NDCG@10"]
RUN_DEPTH = 100  # documents per query in every run (MRR@100, R@100)
EVALUATION_SPLITS = ("dev", "test")
FITTING_SPLITS = ("train", "dev", "test")  # any other judged split is a further reported set (MS MARCO's dl19)
PROBE_QUERIES = 128  # dev queries of a start's in-batch probe
NEGATIVES = ("none", "bm25", "miner")  # "miner": static hard negatives from another fine-tuned model (SeDR's STAR)


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


# -- runs ------------------------------------------------------------------------------------------
def bm25_run(dataset: RetrievalDataset, queries: dict[str, str], k: int = RUN_DEPTH, **params) -> Run:
    retriever = BM25Retriever(**params).index(dataset.doc_ids, dataset.texts)
    return retriever.search(queries, k)


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


_CANDIDATES: dict[tuple, list[str]] = {}


def dev_candidate_ids(dataset: RetrievalDataset, k: int) -> list[str]:
    """The documents a dev evaluation ranks when ``k`` > 0: each dev query's BM25 top ``k`` and every
    judged dev document, in corpus order (computed once per process). Differs from the papers, which rank
    the whole corpus at every dev evaluation: a selection at 3.2M documents costs ten corpus encodings per
    fit; the dev-best checkpoint's dev and test runs still rank the whole corpus. The dev scores that choose
    (learning rate, checkpoint, plateau) are then MRR@100 over the candidates, higher than over the corpus."""
    key = (*dataset_memo(dataset), k)
    if key not in _CANDIDATES:
        queries, qrels = dataset.split("dev")
        wanted = {d for run in bm25_run(dataset, queries, k).values() for d in run}
        wanted |= {d for judged in qrels.values() for d in judged}
        _CANDIDATES[key] = [d for d in dataset.doc_ids if d in wanted]
    return _CANDIDATES[key]


def corpus_subset(corpus: SegmentedCorpus, doc_ids: list[str]) -> SegmentedCorpus:
    """The segmented documents of ``doc_ids`` (no tokenization again)."""
    number = {d: i for i, d in enumerate(corpus.doc_ids)}
    return SegmentedCorpus(list(doc_ids), [corpus.segments[number[d]] for d in doc_ids])


_SEGMENTED: dict[tuple, SegmentedCorpus] = {}  # in-process: a study segments its corpus once per block shape


def segment_corpus(model: BiEncoder, dataset: RetrievalDataset) -> SegmentedCorpus:
    """The dataset's documents cut into the model's blocks (tokenized once per process and shape)."""
    config = model.config
    key = (
        *dataset_memo(dataset),
        model.tokenizer.name_or_path,
        len(model.tokenizer),
        config.segment_length,
        config.max_segments,
        config.document_tokens,
        getattr(config, "sentence_filling", False),
    )
    if key not in _SEGMENTED:
        store = getattr(dataset.corpus, "directory", None)  # a memory-mapped corpus: its tokens are stored beside it
        shape = (config.segment_length, config.max_segments, config.document_tokens, key[-1])
        _SEGMENTED[key] = SegmentedCorpus.build(
            model.tokenizer,
            dataset.doc_ids,
            dataset.texts,
            config.segment_length,
            config.max_segments,
            config.document_tokens,
            sentence_filling=getattr(config, "sentence_filling", False),
            directory=None if store is None else token_store_path(Path(store) / "segments", model.tokenizer, *shape),
        )
    return _SEGMENTED[key]


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


# -- fitting ---------------------------------------------------------------------------------------
class RetrievalEvaluation(DevEvaluation):
    """Each evaluation encodes the corpus once, searches the dev and test queries and scores dev only
    (MRR@100); it keeps the runs of every evaluated step (the dev-best checkpoint's test run needs no
    second encoding) and the corpus vectors of the best evaluation so far (its index, kept with the
    checkpoint). Test judgements are never read.

    With ``candidates`` (:func:`dev_candidate_ids`: BM25's top k of each dev query and the judged documents),
    an evaluation encodes and ranks only those for the dev queries, and :meth:`final` ranks the whole
    corpus once for the dev-best checkpoint's dev and test runs."""

    def __init__(self, dataset: RetrievalDataset, corpus: SegmentedCorpus, candidates: list[str] | None = None):
        super().__init__()
        self.queries = evaluation_queries(dataset)
        self.dev_qrels = dataset.split("dev")[1]
        self.corpus = corpus
        self.searched = corpus if candidates is None else corpus_subset(corpus, candidates)
        self.best: dict = {}  # step, score, vectors, owners, encode_seconds of the best evaluation in this process

    @property
    def ranks_candidates(self) -> bool:
        return self.searched is not self.corpus

    def evaluate(self, model: BiEncoder, step: int) -> tuple[float, dict | None]:
        """The dev score (the same on every process: the first one searches and scores)."""
        searched = {"dev": self.queries["dev"]} if self.ranks_candidates else self.queries
        merged = {q: text for queries in searched.values() for q, text in queries.items()}
        kept: dict = {}
        run = dense_run(model, self.searched, merged, RUN_DEPTH, progress=False, keep=kept)
        if rank() != 0:
            return from_first(None), None
        runs = {split: {q: run.get(q, {}) for q in queries} for split, queries in searched.items()}
        measure = RETRIEVAL.selection_measure
        score = evaluate(runs["dev"], self.dev_qrels, [measure])[measure]
        if not self.best or score > self.best["score"]:  # the first of equal scores, as the training loop keeps
            self.best = {"step": step, "score": score, **({} if self.ranks_candidates else kept)}
        return from_first(score), runs

    def final(self, model: BiEncoder, best_step: int) -> tuple[dict | None, dict]:
        """The dev-best checkpoint's ``{"dev": run, "test": run}`` over the whole corpus (``model`` holds
        its weights) and its corpus vectors (empty where this process did not encode them); every process
        calls it, the first one gets the runs."""
        if not self.ranks_candidates:
            return self.kept[best_step], (self.best if self.best.get("step") == best_step else {})
        merged = {q: text for queries in self.queries.values() for q, text in queries.items()}
        kept: dict = {}
        run = dense_run(model, self.corpus, merged, RUN_DEPTH, progress=False, keep=kept)
        runs = {split: {q: run.get(q, {}) for q in queries} for split, queries in self.queries.items()}
        return (runs if rank() == 0 else None), {"step": best_step, **kept}


def encoder_key(encoder: EncoderConfig) -> dict:
    """An encoder config as a cache determinant (a backbone inside the cache by its portable path)."""
    fields = asdict(encoder)
    if Path(fields["backbone"]).is_dir():
        fields["backbone"] = portable(fields["backbone"])
    return {"class": type(encoder).__name__, **fields}


def finetune(
    model_name: str,
    dataset: RetrievalDataset,
    encoder: EncoderConfig,
    train: TrainConfig,
    negatives: str = "none",
    negative_depth: int = 100,
    iterations: int = 1,
    init: str | Path | None = None,
    progress: bool = True,
    n_devices: int = 1,
    miner: FineTuned | None = None,
    dev_candidates: int = 0,
) -> FineTuned:
    """Fine-tune a model on the train split with dev selection; cached under a key of everything that
    determines it (dataset checksum, configs, negatives, iterations, starting checkpoint, processes,
    code). Its outputs are the dev-best checkpoint's ``{"dev": run, "test": run}``.

    Iteration 1 uses in-batch negatives plus ``negatives`` ("none"; "bm25": ``train.hard_negatives``
    per query sampled from BM25's top ``negative_depth``; "miner": from the top ``negative_depth`` of
    ``miner``, another fine-tuned model, mined once: SeDR's static negatives from STAR); every
    further iteration continues from the previous one's dev-best checkpoint with hard negatives mined
    by that model (ANCE/STAR; Longtriever section 4.2: one BM25 iteration, then two with the model's
    own negatives). ``init`` is a saved model directory to start from (a pre-trained Longtriever),
    else the backbone. ``n_devices`` > 1 trains in that many processes (``torchrun``, one per GPU;
    ``train.batch_size`` queries each, gathered as in-batch negatives) launched from here, so a
    notebook kernel never holds a process group. ``dev_candidates`` > 0 ranks only each dev query's BM25
    top k and the judged documents at every dev evaluation (:func:`dev_candidate_ids`).
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    if negatives not in NEGATIVES:
        raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")
    if negatives == "none" and iterations == 1 and train.hard_negatives:
        raise ValueError("negatives='none' (in-batch only) needs train.hard_negatives=0")
    if (negatives == "miner") != (miner is not None):
        raise ValueError("negatives='miner' and a miner (a fine-tuned model) go together")
    if n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    evaluation_queries(dataset)  # fail early without a dev split
    train_queries, train_qrels = dataset.split("train")
    common = dict(
        model_name=model_name,
        dataset=dataset,
        encoder=encoder,
        train=train,
        negatives=negatives,
        negative_depth=negative_depth,
        init=init,
        progress=progress,
        n_devices=n_devices,
        miner=miner,
        dev_candidates=dev_candidates,
    )

    def run(directory: Path, resume: Path) -> None:
        if iterations == 1:
            start, history, job_train = init, [], train
            if negatives == "bm25":
                mined = negatives_from_run(
                    bm25_run(dataset, train_queries, negative_depth), train_qrels, negative_depth
                )
            elif negatives == "miner":
                mined = negatives_from_run(
                    miner_run(miner, dataset, max(negative_depth, MINING_DEPTH)), train_qrels, negative_depth
                )
            else:
                mined = {}
        else:
            previous = finetune(**common, iterations=iterations - 1)
            start, history = previous.directory / "model", previous.history["iterations"]
            job_train = replace(train, first_step=order_end(previous))  # new queries first, not the last iteration's
            model = previous.model()
            mined = model_negatives(model, segment_corpus(model, dataset), train_queries, train_qrels, negative_depth)
        job = FinetuneJob(
            model_name,
            asdict(encoder),
            asdict(job_train),
            str(start) if start else None,
            mined,
            history,
            negatives if iterations == 1 else "model",
            progress,
            dev_candidates,
            dev_candidate_ids(dataset, dev_candidates) if dev_candidates else None,  # BM25 once, here
        )
        if n_devices == 1:
            run_finetune_job(job, dataset, directory, resume)
        else:
            launch(RUNNER, job, dataset_reference(dataset, DATASET_LOADER), directory, resume, n_devices)

    return fine_tune(
        "finetune",
        run,
        lambda path: load_encoder(model_name, path),
        model=model_name,
        **dataset_key(dataset),
        encoder=encoder_key(encoder),
        train=train_key(train),
        negatives=negatives,
        negative_depth=negative_depth,
        iterations=iterations,
        init=portable(init) if init else None,
        processes=n_devices,
        **({"miner": portable(miner.directory)} if miner is not None else {}),
        **({"dev_candidates": dev_candidates} if dev_candidates else {}),
    )


@dataclass
class FinetuneJob:
    """One fine-tuning iteration, everything decided: what every training process needs (JSON-able)."""

    model_name: str
    encoder: dict
    train: dict
    start: str | None  # a saved model to start from, or None for the backbone (new parameters under train.seed)
    mined: dict[str, list[str]]  # hard negatives per training query
    history: list[dict]  # the earlier iterations' records
    negatives: str  # how ``mined`` was made ("none", "bm25", "model"), for the record
    progress: bool = True
    dev_candidates: int = 0  # > 0: dev evaluations rank each dev query's BM25 top k and the judged documents
    candidates: list[str] | None = None  # those documents (found in the kernel: no process builds BM25 again)


RUNNER, DATASET_LOADER = f"{__name__}:run_finetune_job", f"{__name__}:load_retrieval_dataset"


def run_finetune_job(job: FinetuneJob, dataset: RetrievalDataset, directory: Path, resume: Path) -> None:
    """Train, keep the dev-best checkpoint, and (the first process) write model, history and runs."""
    train = TrainConfig(**job.train)
    model = build_encoder(
        job.model_name, encoder_class(job.model_name).config_class(**job.encoder), train.seed, job.start
    )
    corpus = segment_corpus(model, dataset)
    candidates = job.candidates
    evaluation = RetrievalEvaluation(dataset, corpus, candidates)
    result = train_biencoder(
        model,
        dataset.queries,
        dataset.split("train")[1],
        corpus,
        job.mined,
        train,
        dev_eval=evaluation,
        progress=job.progress,
        checkpoint=Checkpointer(resume, minutes=SAVE_MINUTES),
    )
    runs, best = evaluation.final(model, result.best_step)
    if rank() == 0:
        model.save(directory / "model")
        selection = {"dev_candidates": job.dev_candidates, "dev_documents": len(candidates)} if candidates else {}
        history = {"iterations": job.history + [asdict(result) | {"negatives": job.negatives} | selection]}
        save_fit(directory, history, runs)
        save_index(model, corpus, best, directory)


INDEX_LIMIT_BYTES = 256 * 2**20  # larger corpus indexes are not kept with a checkpoint (encode again to measure)


def save_index(model: BiEncoder, corpus: SegmentedCorpus, best: dict, directory: Path) -> None:
    """The dev-best checkpoint's corpus vectors (``index.npz``) and the time their encoding took
    (``index.json``), when they fit in ``INDEX_LIMIT_BYTES``; a resumed run whose best evaluation
    came before the restart encodes them again."""
    if not best and world_size() > 1:
        return  # only this process is here: encoding needs all of them (costs are then measured by encoding again)
    if not best:
        started = time.perf_counter()
        vectors, owners = model.encode_corpus(corpus, progress=False)
        best = {"vectors": vectors, "owners": owners, "encode_seconds": time.perf_counter() - started}
    info = {
        "vectors": int(len(best["vectors"])),
        "dim": int(best["vectors"].shape[1]),
        "bytes": int(best["vectors"].nbytes),
        "encode_seconds": best["encode_seconds"],
        "kept": best["vectors"].nbytes <= INDEX_LIMIT_BYTES,
    }
    if info["kept"]:
        np.savez(directory / "index.npz", vectors=best["vectors"], owners=best["owners"])
    (directory / "index.json").write_text(json.dumps(info))


def order_end(fit: FineTuned) -> int:
    """Where a fit's training order stopped (its first step plus the steps it took): a run that continues
    from it (a later iteration, a warm-started row) starts its batches there."""
    last = fit.last
    config = last["config"]
    return config.get("first_step", 0) + (config["steps"] or last["steps_per_epoch"] * config["epochs"])


def stored_index(fit: FineTuned) -> tuple | None:
    """A fit's dev-best corpus ``(vectors, owners)`` as encoded at its evaluation, or None where they were
    too large to keep."""
    path = fit.directory / "index.npz"
    if not path.exists():
        return None
    with np.load(path) as stored:
        return stored["vectors"], stored["owners"]


def index_info(fit: FineTuned) -> dict:
    """Vectors, dimension, bytes and encoding seconds of a fit's dev-best corpus index (empty where a
    multi-process run did not record them)."""
    path = fit.directory / "index.json"
    return json.loads(path.read_text()) if path.exists() else {}


# -- rows ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Protocol:
    """How a dense system is fine-tuned; each of the papers' tables states one (``papers/``)."""

    name: str
    negatives: str = "none"  # "none": in-batch only; "bm25": plus BM25 hard negatives in iteration 1;
    # "warm start": plus static hard negatives from the warm-start system's run (SeDR: STAR's top K)
    hard_negatives: int = 0
    iterations: int = 1  # > 1: later iterations mine hard negatives with the model itself
    negative_depth: int = 100  # K: hard negatives are sampled from the top K of the mining run
    cache_size: int = 0  # C: SeDR's late-cache negatives (0: none)


IN_BATCH = Protocol("in-batch negatives, one iteration (Longtriever Tables 2 and 4)")


@dataclass(frozen=True)
class BM25(Spec):
    """BM25 over the documents (:class:`~longdoc.index.bm25.BM25Retriever`)."""

    family = RETRIEVAL
    trained = False

    def evaluate(self, study, seeds: list[int]) -> tuple[list, list[RunOutcome]]:
        runs = {split: bm25_run(study.data, queries) for split, queries in evaluation_queries(study.data).items()}
        return [None], [RunOutcome(runs)]


@dataclass(frozen=True)
class Dense(PretrainedStart, Spec):
    """A dense encoder of the registry: fine-tuned under ``protocol`` (``None``: the backbone as it is),
    from ``pretrain`` (continued pre-training on ``pretrain_corpus``, Longtriever) and/or from the
    fine-tuned ``warm_start`` row (its first-seed fit at its chosen learning rate; SeDR starts from
    STAR), which also mines "warm start" negatives."""

    model: str  # a name of :data:`longdoc.models.registry.ENCODERS`
    encoder: EncoderConfig
    protocol: Protocol | None = IN_BATCH
    pretrain: PretrainConfig | None = None
    pretrain_corpus: str = ""  # "": the dataset's own documents; see :mod:`~longdoc.experiments.families.pretraining`
    warm_start: System | None = None

    family = RETRIEVAL

    @property
    def trained(self) -> bool:
        return self.protocol is not None

    def evaluate(self, study, seeds: list[int]) -> tuple[list, list[RunOutcome]]:
        return [None], [
            RunOutcome(zero_shot(self.model, study.data, self.encoder, study.seeds[0], progress=study.progress))
        ]

    def pretraining_input(self, study) -> tuple:
        return self.pretrain_corpus or study.data, self.encoder, study.data

    def start_key(self) -> str:
        warm = self.warm_start.spec.start_key() if self.warm_start is not None else None
        return repr((self.model, self.encoder, self.pretrain, self.pretrain_corpus, warm))

    def start_probe(self, study) -> dict:
        """The in-batch probe of the start on dev queries (:func:`~longdoc.eval.probes.in_batch_probe`):
        score = accuracy of the relevant document among the batch's, loss its cross-entropy."""
        model = self.starting_model(study)
        queries, qrels = study.split("dev")
        probe = in_batch_probe(model, segment_corpus(model, study.data), queries, qrels, size=PROBE_QUERIES)
        return {
            "probe": f"dev in-batch probe ({probe['queries']} queries, accuracy)",
            "score": probe["accuracy"],
            **probe,
        }

    def warm_start_fit(self, study, seed: int | None = None) -> FineTuned | None:
        """The fit this row starts from: its ``warm_start`` at that row's chosen rate with the same ``seed``
        (default: the first), so each seed's chain is its own replicate and continues its own order; or None."""
        if self.warm_start is None:
            return None
        if not (isinstance(self.warm_start.spec, Dense) and self.warm_start.spec.trained):
            raise ValueError(f"the warm start {self.warm_start.name!r} is not a fine-tuned dense system")
        return study.fit(self.warm_start, seed)

    def starting_encoder(self, study, seed: int | None = None) -> EncoderConfig:
        """The row's encoder, reading the warm start's backbone (of the same seed) where it has one."""
        start = self.warm_start_fit(study, seed)
        return (
            self.encoder
            if start is None
            else replace(self.encoder, backbone=str(start.directory / "model" / "backbone"))
        )

    def starting_model(self, study, seed: int | None = None) -> BiEncoder:
        """The model before fine-tuning (for the in-batch probe)."""
        seed = study.seeds[0] if seed is None else seed
        return build_encoder(self.model, self.starting_encoder(study, seed), seed, self.start(study))

    def fit(self, study, learning_rate: float, seed: int) -> FineTuned:
        protocol = self.protocol
        budget = study.settings(BudgetSettings)
        train = budget.train_config(learning_rate, seed, protocol.hard_negatives, protocol.cache_size)
        warm = self.warm_start_fit(study, seed)
        if warm is not None:  # the same seed's shuffle, continued after the warm start's steps: new queries first
            train = replace(train, first_step=order_end(warm))
        miner = warm if protocol.negatives == "warm start" else None
        if protocol.negatives == "warm start" and miner is None:
            raise ValueError(f"{self.model}: 'warm start' negatives need a warm_start system")
        return finetune(
            self.model,
            study.data,
            self.starting_encoder(study, seed),
            train,
            negatives="miner" if miner is not None else protocol.negatives,
            negative_depth=protocol.negative_depth,
            iterations=protocol.iterations,
            init=self.start(study),
            progress=study.progress,
            n_devices=budget.n_devices,
            miner=miner,
            dev_candidates=budget.dev_candidates,
        )

    def outcome(self, study, fit: FineTuned) -> RunOutcome:
        return RunOutcome(fit.outputs)


@dataclass(frozen=True)
class ExactSearch(Spec):
    """A dense row's fits, searched by exact cosine between every query and every document over the
    vectors kept at the dev-best evaluation (NCI Table 1's "BERT + BruteForce"; one vector per document);
    where the fit kept none (larger than ``INDEX_LIMIT_BYTES``: NQ320k at 768 dimensions, a candidate
    dev evaluation), the dev-best model encodes the corpus again."""

    dense: Dense

    family = RETRIEVAL

    def fit(self, study, learning_rate: float, seed: int) -> FineTuned:
        return self.dense.fit(study, learning_rate, seed)

    def summary(self, fit: FineTuned, seed: int) -> None:
        return None  # its training is the dense row's

    def outcome(self, study, fit: FineTuned) -> RunOutcome:
        model = fit.model()
        stored = stored_index(fit)
        vectors, owners = stored or model.encode_corpus(segment_corpus(model, study.data), progress=study.progress)
        documents = np.empty_like(vectors)
        documents[owners] = vectors  # one vector per document
        return RunOutcome(
            {
                split: exact_cosine_run(
                    model.encode_queries(list(queries.values())), documents, study.data.doc_ids, list(queries)
                )
                for split, queries in evaluation_queries(study.data).items()
            }
        )


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
