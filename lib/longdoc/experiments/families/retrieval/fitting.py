"""Fine-tuning a dense row: the dev evaluation (:class:`RetrievalEvaluation`), :func:`finetune` (cached, in
process or under torchrun), the job a training process runs, and the corpus index kept with a fit."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from longdoc.data.beir import RetrievalDataset
from longdoc.eval.metrics import evaluate
from longdoc.experiments.cache import cached_json, dataset_key, portable
from longdoc.experiments.families.retrieval.family import (
    DATASET_LOADER,
    NEGATIVES,
    RETRIEVAL,
    RUN_DEPTH,
    evaluation_queries,
)
from longdoc.experiments.families.retrieval.runs import (
    MINING_DEPTH,
    bm25_run,
    corpus_subset,
    dense_run,
    dev_candidate_ids,
    encoder_key,
    miner_run,
    model_negatives,
    segment_corpus,
)
from longdoc.experiments.families.worker import dataset_reference, launch
from longdoc.experiments.fitting import DevEvaluation, FineTuned, fine_tune, save_fit, train_key
from longdoc.index.dense import DenseIndex
from longdoc.models.biencoder import BiEncoder, EncoderConfig
from longdoc.models.registry import build_encoder, encoder_class, load_encoder
from longdoc.sharding import from_first, rank, world_size
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import SAVE_MINUTES, Checkpointer
from longdoc.train.loop import TrainConfig, train_biencoder
from longdoc.train.negatives import negatives_from_run
from longdoc.train.steps import require_one_step


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
    require_one_step(f"training {model_name}", len(train_queries), train.batch_size, n_devices)  # before mining
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


RUNNER = f"{__name__}:run_finetune_job"


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


# -- what a cost table reads of a fit's model, measured where the model is -------------------------------
COST_REPEATS = 3  # timed searches per fit (their median)


def fit_costs(study, fit: FineTuned, repeats: int = COST_REPEATS) -> dict:
    """A fit's parameters, training seconds per epoch, index size, indexing seconds and search latency
    (SeDR's Tables 1-2 columns), cached with its small files: measured once where its model is (at fit
    time: :meth:`~longdoc.experiments.families.retrieval.specs.Dense.measure`), so it travels."""
    return cached_json(
        "costs", lambda: measured_costs(study, fit, repeats), fit=portable(fit.directory), repeats=repeats,
        **dataset_key(study.data),
    )  # fmt: skip


def measured_costs(study, fit: FineTuned, repeats: int) -> dict:
    """:func:`fit_costs`, measured on this machine (the model loaded)."""
    model = fit.model()
    vectors, owners, indexing = fit_index(study, fit, model)
    queries = model.encode_queries(list(study.split("test")[0].values()))
    latencies = []
    if queries.ndim == 2:  # one vector a query (a late-interaction model's several are not timed here)
        index = DenseIndex(vectors.shape[1])
        index.add(vectors, owners)
        for _ in range(repeats):
            started = time.perf_counter()
            index.search(queries, RUN_DEPTH)
            latencies.append((time.perf_counter() - started) / len(queries))
    last = fit.last
    return {
        "parameters (M)": sum(p.numel() for p in model.parameters()) / 1e6,
        "training s / epoch": last["train_seconds"] / max(1, last["history"][-1]["step"]) * last["steps_per_epoch"],
        "vectors": int(len(vectors)),
        "index MB": vectors.nbytes / 2**20,
        "indexing s": indexing,
        "latency ms / query": 1000 * float(np.median(latencies)) if latencies else None,
    }


def fit_index(study, fit: FineTuned, model) -> tuple:
    """A run's corpus vectors, owners and encoding seconds: those kept at its dev-best evaluation, or
    encoded again (and timed) where they were not kept."""
    kept = stored_index(fit)
    if kept is not None:
        return *kept, index_info(fit)["encode_seconds"]
    started = time.perf_counter()
    vectors, owners = model.encode_corpus(segment_corpus(model, study.data), progress=False)
    return vectors, owners, time.perf_counter() - started
