"""Retrieval runs: BM25, dense models, fine-tuning with dev selection and cached checkpoints.

Every fine-tuning run (one model, one learning rate, one seed, one protocol) is cached with the runs
of its dev-best checkpoint on the dev and test queries, so notebooks that share a run share its
checkpoint and its runs, and a table never re-encodes the corpus.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from longdoc.data.beir import RetrievalDataset
from longdoc.eval.metrics import Run, evaluate
from longdoc.experiments.cache import cached_directory, portable
from longdoc.index.bm25 import BM25Retriever
from longdoc.index.dense_retriever import DenseRetriever
from longdoc.models.biencoder import BiEncoder, EncoderConfig, FirstP, MaxP
from longdoc.models.hi_transformer import HiTransformer
from longdoc.models.longtriever import Longtriever
from longdoc.models.parade import Parade
from longdoc.models.sedr import SeDR
from longdoc.seeding import seeded
from longdoc.sharding import from_first, rank, world_size
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.checkpoint import SAVE_MINUTES, Checkpointer
from longdoc.train.loop import TrainConfig, train_biencoder
from longdoc.train.negatives import negatives_from_run

MODELS = {"FirstP": FirstP, "MaxP": MaxP, "PARADE": Parade, "Hi-Transformer": HiTransformer, "Longtriever": Longtriever,
          "SeDR": SeDR}
RUN_DEPTH = 100  # documents per query in every run (MRR@100, R@100)
SELECTION_MEASURE = "MRR@100"
EVALUATION_SPLITS = ("dev", "test")
NEGATIVES = ("none", "bm25", "miner")  # "miner": static hard negatives from another fine-tuned model (SeDR's STAR)


def bm25_run(dataset: RetrievalDataset, queries: dict[str, str], k: int = RUN_DEPTH, **params) -> Run:
    retriever = BM25Retriever(**params).index(dataset.doc_ids, dataset.texts)
    return retriever.search(queries, k)


_SEGMENTED: dict[tuple, SegmentedCorpus] = {}  # in-process: a study segments its corpus once per block shape


def segment_corpus(model: BiEncoder, dataset: RetrievalDataset) -> SegmentedCorpus:
    """The dataset's documents cut into the model's blocks (tokenized once per process and shape)."""
    config = model.config
    key = (dataset.name, dataset.checksum, repr(dataset.manifest.get("subsample")), len(dataset.corpus),
           model.tokenizer.name_or_path, len(model.tokenizer), config.segment_length, config.max_segments,
           config.document_tokens, getattr(config, "sentence_filling", False))
    if key not in _SEGMENTED:
        _SEGMENTED[key] = SegmentedCorpus.build(model.tokenizer, dataset.doc_ids, dataset.texts, config.segment_length,
                                                config.max_segments, config.document_tokens,
                                                sentence_filling=getattr(config, "sentence_filling", False))
    return _SEGMENTED[key]


def dense_run(model: BiEncoder, corpus: SegmentedCorpus, queries: dict[str, str], k: int = RUN_DEPTH,
              index_factory: str = "Flat", progress: bool = True, keep: dict | None = None) -> Run:
    """Encode the corpus (one vector per segment), search, max-pool segment hits into documents.
    Under several processes they share the encoding and the first one searches: it returns the run,
    the others an empty one. ``keep``, a dict, receives the corpus ``vectors``, their ``owners`` and
    the ``encode_seconds``."""
    retriever = DenseRetriever(model, corpus, index_factory, progress).build()
    if keep is not None:
        keep.update(vectors=retriever.vectors, owners=retriever.owners, encode_seconds=retriever.encode_seconds)
    return retriever.search(queries, k)


def model_negatives(model: BiEncoder, corpus: SegmentedCorpus, queries: dict[str, str], qrels: dict,
                    depth: int = 100) -> dict[str, list[str]]:
    """Hard negatives mined by the model itself (ANCE/STAR; Longtriever's second and third iterations)."""
    return negatives_from_run(dense_run(model, corpus, queries, depth, progress=False), qrels, depth)


MINING_DEPTH = 200  # a miner's run on the train queries is kept this deep, so every K up to it shares one run


def miner_run(miner: "FineTuned", dataset: RetrievalDataset, depth: int = MINING_DEPTH) -> Run:
    """A fine-tuned model's run on the train queries (cached: the static negatives of every row that
    samples from its top K <= ``depth`` come from this one run)."""

    def build(directory: Path) -> None:
        model = miner.model()
        run = dense_run(model, segment_corpus(model, dataset), dataset.split("train")[0], depth, progress=False)
        (directory / "run.json").write_text(json.dumps(run))

    directory = cached_directory("mining", build, miner=portable(miner.directory), dataset=dataset.name,
                                 data_checksum=dataset.checksum, subsample=dataset.manifest.get("subsample"), depth=depth)
    return json.loads((directory / "run.json").read_text())


def evaluation_queries(dataset: RetrievalDataset) -> dict[str, dict[str, str]]:
    """The queries of the dev and test splits (dev is required: it selects models)."""
    if "dev" not in dataset.qrels:
        raise ValueError(f"{dataset.name} has no dev split (qrels/dev.tsv): model selection needs one")
    return {split: dataset.split(split)[0] for split in EVALUATION_SPLITS if split in dataset.qrels}


class DevEvaluator:
    """The dev evaluation inside fine-tuning: each call encodes the corpus once, searches the dev and
    test queries, and scores dev only (``SELECTION_MEASURE``); the runs of every evaluated step are
    kept, so the dev-best checkpoint's test run needs no second encoding, and so are the corpus
    vectors of the best evaluation so far (its index, kept with the checkpoint). Test judgements are
    never read."""

    def __init__(self, dataset: RetrievalDataset, corpus: SegmentedCorpus):
        self.queries = evaluation_queries(dataset)
        self.dev_qrels = dataset.split("dev")[1]
        self.corpus = corpus
        self.runs: dict[int, dict[str, Run]] = {}
        self.best: dict = {}  # step, score, vectors, owners, encode_seconds of the best evaluation in this process

    def state_dict(self) -> dict:
        """The runs of the evaluated steps (saved with a training state, so a resumed run keeps them)."""
        return {"runs": self.runs}

    def load_state_dict(self, state: dict) -> None:
        self.runs = {int(step): runs for step, runs in state["runs"].items()}

    def __call__(self, model: BiEncoder, step: int) -> float:
        """The dev score (the same on every process: the first one searches and scores)."""
        merged = {q: text for queries in self.queries.values() for q, text in queries.items()}
        kept: dict = {}
        run = dense_run(model, self.corpus, merged, RUN_DEPTH, progress=False, keep=kept)
        if rank() != 0:
            return from_first(None)
        self.runs[step] = {split: {q: run.get(q, {}) for q in queries} for split, queries in self.queries.items()}
        score = evaluate(self.runs[step]["dev"], self.dev_qrels, [SELECTION_MEASURE])[SELECTION_MEASURE]
        if not self.best or score > self.best["score"]:  # the first of equal scores, as the training loop keeps
            self.best = {"step": step, "score": score, **kept}
        return from_first(score)


@dataclass
class FineTuned:
    """A cached fine-tuning: its directory, training history and the runs of its dev-best checkpoint."""

    model_name: str
    directory: Path
    history: dict
    runs: dict[str, Run]

    def model(self) -> BiEncoder:
        return MODELS[self.model_name].load(self.directory / "model")

    @property
    def best_dev(self) -> float:
        return self.history["iterations"][-1]["best_dev"]

    def index(self) -> tuple | None:
        """The dev-best checkpoint's corpus ``(vectors, owners)`` as encoded at its evaluation, or None
        where they were too large to keep."""
        import numpy as np

        path = self.directory / "index.npz"
        if not path.exists():
            return None
        with np.load(path) as stored:
            return stored["vectors"], stored["owners"]

    @property
    def index_info(self) -> dict:
        """Vectors, dimension, bytes and encoding seconds of the dev-best checkpoint's corpus index
        (empty where a multi-process run did not record them)."""
        path = self.directory / "index.json"
        return json.loads(path.read_text()) if path.exists() else {}


def _load(model_name: str, directory: Path) -> FineTuned:
    return FineTuned(model_name, directory, json.loads((directory / "history.json").read_text()),
                     json.loads((directory / "runs.json").read_text()))


def build_model(model_name: str, encoder: EncoderConfig, seed: int, init: str | Path | None = None) -> BiEncoder:
    """A model of ``MODELS`` from the backbone (new parameters drawn under ``seed``) or a checkpoint."""
    if model_name not in MODELS:
        raise KeyError(f"unknown model {model_name!r}; known: {sorted(MODELS)}")
    with seeded(seed):
        return MODELS[model_name].load(init) if init else MODELS[model_name](encoder)


def encoder_key(encoder: EncoderConfig) -> dict:
    """An encoder config as a cache determinant (a backbone inside the cache by its portable path)."""
    fields = asdict(encoder)
    if Path(fields["backbone"]).is_dir():
        fields["backbone"] = portable(fields["backbone"])
    return {"class": type(encoder).__name__, **fields}


def finetune(model_name: str, dataset: RetrievalDataset, encoder: EncoderConfig, train: TrainConfig,
             negatives: str = "none", negative_depth: int = 100, iterations: int = 1,
             init: str | Path | None = None, progress: bool = True, n_devices: int = 1,
             miner: "FineTuned | None" = None) -> FineTuned:
    """Fine-tune a model on the train split with dev selection; cached under a key of everything that
    determines it (dataset checksum, configs, negatives, iterations, starting checkpoint, processes,
    code).

    Iteration 1 uses in-batch negatives plus ``negatives`` ("none"; "bm25": ``train.hard_negatives``
    per query sampled from BM25's top ``negative_depth``; "miner": from the top ``negative_depth`` of
    ``miner``, another fine-tuned model, mined once: SeDR's static negatives from STAR); every
    further iteration continues from the previous one's dev-best checkpoint with hard negatives mined
    by that model (ANCE/STAR; Longtriever section 4.2: one BM25 iteration, then two with the model's
    own negatives). ``init`` is a saved model
    directory to start from (a pre-trained Longtriever), else the backbone. ``n_devices`` > 1 trains
    in that many processes (``torchrun``, one per GPU; ``train.batch_size`` queries each, gathered as
    in-batch negatives) launched from here, so a notebook kernel never holds a process group.
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
    common = dict(model_name=model_name, dataset=dataset, encoder=encoder, train=train, negatives=negatives,
                  negative_depth=negative_depth, init=init, progress=progress, n_devices=n_devices, miner=miner)

    def build(directory: Path, resume: Path) -> None:
        if iterations == 1:
            start, history = init, []
            if negatives == "bm25":
                mined = negatives_from_run(bm25_run(dataset, train_queries, negative_depth), train_qrels, negative_depth)
            elif negatives == "miner":
                mined = negatives_from_run(miner_run(miner, dataset, max(negative_depth, MINING_DEPTH)), train_qrels,
                                           negative_depth)
            else:
                mined = {}
        else:
            previous = finetune(**common, iterations=iterations - 1)
            start, history = previous.directory / "model", previous.history["iterations"]
            model = previous.model()
            mined = model_negatives(model, segment_corpus(model, dataset), train_queries, train_qrels, negative_depth)
        job = FinetuneJob(model_name, asdict(encoder), asdict(train), str(start) if start else None, mined, history,
                          negatives if iterations == 1 else "model", progress)
        if n_devices == 1:
            run_finetune_job(job, dataset, directory, resume)
        else:
            launch_finetune_job(job, dataset, directory, resume, n_devices)

    directory = cached_directory(
        "finetune", build, model=model_name, dataset=dataset.name, data_checksum=dataset.checksum,
        subsample=dataset.manifest.get("subsample"), encoder=encoder_key(encoder),
        train=asdict(train), negatives=negatives, negative_depth=negative_depth, iterations=iterations,
        init=portable(init) if init else None, processes=n_devices,
        **({"miner": portable(miner.directory)} if miner is not None else {}),
    )
    return _load(model_name, directory)


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


def run_finetune_job(job: FinetuneJob, dataset: RetrievalDataset, directory: Path, resume: Path) -> None:
    """Train, keep the dev-best checkpoint, and (the first process) write model, history and runs."""
    train = TrainConfig(**job.train)
    model = build_model(job.model_name, MODELS[job.model_name].config_class(**job.encoder), train.seed, job.start)
    corpus = segment_corpus(model, dataset)
    evaluator = DevEvaluator(dataset, corpus)
    result = train_biencoder(model, dataset.queries, dataset.split("train")[1], corpus, job.mined, train,
                             dev_eval=evaluator, progress=job.progress,
                             checkpoint=Checkpointer(resume, minutes=SAVE_MINUTES))
    if rank() == 0:
        model.save(directory / "model")
        record = {"iterations": job.history + [asdict(result) | {"negatives": job.negatives}]}
        (directory / "history.json").write_text(json.dumps(record, indent=2))
        (directory / "runs.json").write_text(json.dumps(evaluator.runs[result.best_step]))
        save_index(model, corpus, evaluator.best if evaluator.best.get("step") == result.best_step else {}, directory)


INDEX_LIMIT_BYTES = 256 * 2**20  # larger corpus indexes are not kept with a checkpoint (encode again to measure)


def save_index(model: BiEncoder, corpus: SegmentedCorpus, best: dict, directory: Path) -> None:
    """The dev-best checkpoint's corpus vectors (``index.npz``) and the time their encoding took
    (``index.json``), when they fit in ``INDEX_LIMIT_BYTES``; a resumed run whose best evaluation
    came before the restart encodes them again."""
    import numpy as np

    if not best and world_size() > 1:
        return  # only this process is here: encoding needs all of them (costs are then measured by encoding again)
    if not best:
        started = time.perf_counter()
        vectors, owners = model.encode_corpus(corpus, progress=False)
        best = {"vectors": vectors, "owners": owners, "encode_seconds": time.perf_counter() - started}
    info = {"vectors": int(len(best["vectors"])), "dim": int(best["vectors"].shape[1]), "bytes": int(best["vectors"].nbytes),
            "encode_seconds": best["encode_seconds"], "kept": best["vectors"].nbytes <= INDEX_LIMIT_BYTES}
    if info["kept"]:
        np.savez(directory / "index.npz", vectors=best["vectors"], owners=best["owners"])
    (directory / "index.json").write_text(json.dumps(info))


def launch_finetune_job(job: FinetuneJob, dataset: RetrievalDataset, directory: Path, resume: Path, n_devices: int) -> None:
    """``torchrun --standalone --nproc_per_node n_devices -m longdoc.train.worker`` on ``job``; each
    process loads the dataset again (checked against this one's checksum)."""
    import subprocess
    import sys

    from longdoc.io import atomic_write

    spec = {"job": asdict(job), "dataset": dataset_reference(dataset), "directory": str(directory), "resume": str(resume)}
    job_file = resume / "job.json"
    with atomic_write(job_file) as handle:
        json.dump(spec, handle)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n_devices}",
               "-m", "longdoc.train.worker", str(job_file)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as workers:
        for line in workers.stdout:  # into the notebook, not the kernel's terminal
            print(line, end="", flush=True)
    if workers.returncode != 0:
        raise RuntimeError(f"fine-tuning in {n_devices} processes failed (exit {workers.returncode}): {' '.join(command)}")


def dataset_reference(dataset: RetrievalDataset) -> dict:
    """How another process loads the same dataset (:func:`longdoc.data.registry.load_dataset`)."""
    subsample = dataset.manifest.get("subsample") or {}
    if "dataset_parameter" not in dataset.manifest:
        raise ValueError(f"{dataset.name}: not loaded by load_dataset, so other processes cannot load it")
    return {"name": dataset.manifest["dataset_parameter"], "max_docs": subsample.get("max_docs", 0),
            "seed": subsample.get("seed", 0), "checksum": dataset.checksum, "documents": len(dataset.corpus)}


def zero_shot(model_name: str, dataset: RetrievalDataset, encoder: EncoderConfig, seed: int = 0,
              progress: bool = True) -> dict[str, Run]:
    """Runs of a model that is not fine-tuned (the backbone as it is), on the dev and test queries."""

    def build(directory: Path) -> None:
        model = build_model(model_name, encoder, seed)
        merged = {q: t for queries in evaluation_queries(dataset).values() for q, t in queries.items()}
        run = dense_run(model, segment_corpus(model, dataset), merged, RUN_DEPTH, progress=progress)
        runs = {split: {q: run[q] for q in queries} for split, queries in evaluation_queries(dataset).items()}
        (directory / "runs.json").write_text(json.dumps(runs))

    directory = cached_directory("zero_shot", build, model=model_name, dataset=dataset.name,
                                 data_checksum=dataset.checksum, subsample=dataset.manifest.get("subsample"),
                                 encoder=encoder_key(encoder), seed=seed)
    return json.loads((directory / "runs.json").read_text())
