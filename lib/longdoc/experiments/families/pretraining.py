"""Continued pre-training of Longtriever (MLM + LMAE) and SMITH (masked words + sentence blocks), cached:
the stage before fitting that the retrieval and matching families share.

``pretrained`` returns the directory of a Longtriever checkpoint pre-trained with MLM (+ LMAE) on a
document collection; notebooks 10–13 share it through the cache, so the full model is pre-trained
once per (documents, block size, masking ratios, budget, seed, code).

Which documents: the paper pre-trains on BookCorpus and English Wikipedia, which no machine here can
fetch. By default we pre-train on the target corpus itself (transductive, as coCondenser does on
MS MARCO; no query or judgement is read). ``pretrain_corpus="unjudged"`` keeps only the documents
that no dev or test query judges relevant; ``"installed-manpages"`` reads the man pages of every other
installed package (:mod:`longdoc.data.installed_pages`: unjudged text many times the benchmark's size);
a ``.txt`` file or a BEIR directory names other documents.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from longdoc.data.beir import RetrievalDataset
from longdoc.data.corpus_store import CorpusStore, Subset
from longdoc.data.errors import DataFormatError
from longdoc.data.installed_pages import INSTALLED_PAGES, installed_page_corpus
from longdoc.data.registry import DATA_DIR, load_dataset
from longdoc.experiments.cache import cache_key, cached_directory
from longdoc.experiments.families.worker import launch, named
from longdoc.experiments.parameters import UNJUDGED
from longdoc.experiments.settings import BudgetSettings, settings
from longdoc.models.backbone import load_tokenizer
from longdoc.models.lmae import LongtrieverPretraining
from longdoc.models.longtriever import Longtriever, LongtrieverConfig
from longdoc.models.smith import Smith, SmithConfig, SmithPretraining
from longdoc.seeding import seeded
from longdoc.sharding import rank, world_size
from longdoc.text.segments import MappedSegments, SegmentedCorpus, token_store_path
from longdoc.train.checkpoint import SAVE_MINUTES, Checkpointer
from longdoc.train.pretrain import PretrainConfig, pretrain_encoder


@settings
class PretrainingSettings:
    """The pre-training budget of a study (Longtriever's and SMITH's pre-trained rows)."""

    pretrain_steps: int
    pretrain_batch_size: int
    pretrain_learning_rate: float
    head_warmup_steps: int
    pretrain_epochs: int = 1  # passes over the documents where pretrain_steps is 0 (Longtriever: 8, SMITH: 68)

    def config(self, seed: int, **objective) -> PretrainConfig:
        """A pre-training under this budget, seeded with ``seed`` (the study's first: pre-trained once,
        fitted once per seed), with the objective's fields (masking ratios, masked blocks, ...)."""
        return PretrainConfig(
            steps=self.pretrain_steps,
            epochs=self.pretrain_epochs,
            batch_size=self.pretrain_batch_size,
            learning_rate=self.pretrain_learning_rate,
            head_warmup_steps=self.head_warmup_steps,
            seed=seed,
            **objective,
        )


def unjudged_documents(dataset: RetrievalDataset) -> tuple[list[str], list[str]]:
    """The documents that no dev, test or further reported query (dl19) judges relevant (ids, texts)."""
    judged = {
        d
        for split in [s for s in dataset.qrels if s != "train"]
        for docs in dataset.qrels.get(split, {}).values()
        for d, r in docs.items()
        if r > 0
    }
    ids = dataset.doc_ids
    kept = np.fromiter((i for i, d in enumerate(ids) if d not in judged), dtype=np.int64)
    if not len(kept):
        raise ValueError(
            f"pretrain_corpus='{UNJUDGED}': every document of {dataset.name} is judged by a dev or test query"
        )
    if isinstance(dataset.corpus, CorpusStore):  # MS MARCO: ids and texts stay on disk
        return Subset(ids, kept), Subset(dataset.texts, kept)
    texts = dataset.texts
    return [ids[i] for i in kept], [texts[i] for i in kept]


@dataclass(frozen=True)
class Documents:
    """A named list of documents to pre-train on (e.g. SMITH's: those outside the dev and test pairs)."""

    name: str
    ids: list
    texts: list


def pretraining_texts(
    source: str | Path | RetrievalDataset | Documents, dataset: RetrievalDataset | None = None
) -> tuple[list[str], list[str]]:
    """Documents to pre-train on: a dataset (loaded, ``manpages`` or a BEIR directory; its corpus only,
    never its queries), ``"unjudged"`` (``dataset``'s documents that no dev/test query judges),
    ``"installed-manpages"`` (this machine's other man pages) or a ``.txt`` file whose documents are
    separated by blank lines."""
    if isinstance(source, RetrievalDataset):
        return source.doc_ids, source.texts
    if isinstance(source, Documents):
        if not source.texts:
            raise ValueError(f"pre-training documents {source.name!r}: none")
        return list(source.ids), list(source.texts)
    if source == INSTALLED_PAGES:
        return installed_page_corpus(DATA_DIR)
    if source == UNJUDGED:
        if dataset is None:
            raise ValueError(f"pretrain_corpus='{UNJUDGED}' needs the dataset whose judgements it avoids")
        return unjudged_documents(dataset)
    path = Path(source)
    if path.suffix == ".txt":
        if not path.is_file():
            raise FileNotFoundError(f"pretrain corpus {path} does not exist")
        texts = [t.strip() for t in path.read_text(encoding="utf-8").split("\n\n") if t.strip()]
        if not texts:
            raise DataFormatError(path, "no document (documents are separated by blank lines)")
        return [f"{path.stem}-{i}" for i in range(len(texts))], texts
    return pretraining_texts(load_dataset(str(source)))


def pretraining_task(encoder: LongtrieverConfig | SmithConfig, pretrain: PretrainConfig):
    """The model and its pre-training task: SMITH's (masked words, plus masked sentence blocks unless
    ``pretrain.block_prediction`` is off) for a SMITH config, else Longtriever's (MLM + LMAE)."""
    if isinstance(encoder, SmithConfig):
        model = Smith(encoder)
        return model, SmithPretraining(model, pretrain.mlm_ratio, pretrain.masked_blocks, pretrain.block_prediction)
    model = Longtriever(encoder)
    return model, LongtrieverPretraining(
        model, pretrain.mlm_ratio, pretrain.lmae_ratio, pretrain.lmae, pretrain.decoder_init
    )


def pretrained(
    source: str | Path | RetrievalDataset | Documents,
    encoder: LongtrieverConfig | SmithConfig,
    pretrain: PretrainConfig,
    dataset: RetrievalDataset | None = None,
    progress: bool = True,
    n_devices: int = 1,
) -> Path:
    """The directory of a Longtriever or SMITH pre-trained on ``source``'s documents (built once, cached).
    New parameters are drawn under ``pretrain.seed``: the same seed gives the same weights whatever
    ran before in the process. ``n_devices`` > 1 pre-trains in that many processes (``torchrun``, one
    per GPU), ``pretrain.batch_size`` documents per step split across them, and the result equals one
    process's (tests/train/test_multiprocess_equivalence.py)."""
    if n_devices < 1 or pretrain.batch_size % n_devices:
        raise ValueError(f"parameter pretrain_batch_size={pretrain.batch_size}: not divisible by n_devices={n_devices}")
    ids, texts = pretraining_texts(source, dataset)
    subsample = source.manifest.get("subsample") if isinstance(source, RetrievalDataset) else None
    if isinstance(source, RetrievalDataset):
        name, checksum, store = source.name, source.checksum, getattr(source.corpus, "directory", None)
    elif isinstance(source, Documents):
        name, checksum, store = source.name, cache_key(ids=ids, texts=texts), None
    elif source == UNJUDGED:  # the documents follow from the dataset and its judgements
        name, checksum, store = (
            f"{UNJUDGED} of {dataset.name}",
            dataset.checksum,
            getattr(dataset.corpus, "directory", None),
        )
        subsample = dataset.manifest.get("subsample")
    else:
        name, checksum, store = str(source), cache_key(ids=ids, texts=texts), None

    def build(directory: Path, resume: Path) -> None:
        tokenizer = load_tokenizer(encoder.backbone)
        shape = (encoder.segment_length, encoder.max_segments, encoder.document_tokens)
        filling = getattr(encoder, "sentence_filling", False)
        if store is not None:  # a memory-mapped corpus: its tokens are stored beside it, once per shape
            documents = "all" if isinstance(source, RetrievalDataset) else f"unjudged-{checksum[:16]}"
            tokens = token_store_path(Path(store) / "segments", tokenizer, *shape, filling, documents=documents)
        else:  # several processes read the documents' tokens from the run's resume folder
            tokens = resume / "tokens" if n_devices > 1 else None
        corpus = SegmentedCorpus.build(
            tokenizer,
            ids,
            texts,
            encoder.segment_length,
            encoder.max_segments,
            encoder.document_tokens,
            sentence_filling=filling,
            directory=tokens,
        )
        job = PretrainJob(
            f"{type(encoder).__module__}:{type(encoder).__name__}",
            asdict(encoder),
            asdict(replace(pretrain, batch_size=pretrain.batch_size // n_devices)),
            str(tokens) if tokens else None,
            progress,
        )
        if n_devices == 1:
            pretrain_and_save(job, corpus, directory, resume)
        else:
            launch(RUNNER, job, None, directory, resume, n_devices)

    directory = cached_directory(
        "pretrain",
        build,
        corpus=name,
        corpus_checksum=checksum,
        subsample=subsample,
        documents=len(ids),
        encoder={"class": type(encoder).__name__, **asdict(encoder)},
        pretrain=asdict(pretrain),
        **({"processes": n_devices} if n_devices > 1 else {}),
    )
    return directory / "model"


@dataclass
class PretrainJob:
    """One pre-training as the kernel hands it to its processes (JSON-able: torchrun's workers read it)."""

    encoder_class: str  # "module:name" of the encoder's config class
    encoder: dict
    pretrain: dict  # the PretrainConfig, batch_size per process
    tokens: str | None  # the token store of the documents (several processes)
    progress: bool = True


def pretrain_and_save(job: PretrainJob, corpus: SegmentedCorpus, directory: Path, resume: Path) -> None:
    """Pre-train a new model on ``corpus`` (SMITH's block head centred first) and, in the first
    process, save it and its history into ``directory``."""
    encoder, pretrain = named(job.encoder_class)(**job.encoder), PretrainConfig(**job.pretrain)
    with seeded(pretrain.seed):
        model, task = pretraining_task(encoder, pretrain)
    start = model.center_block_head(corpus.segments) if isinstance(model, Smith) else {}
    result = pretrain_encoder(
        task, corpus, pretrain, progress=job.progress, checkpoint=Checkpointer(resume, minutes=SAVE_MINUTES)
    )
    if rank() == 0:
        model.save(directory / "model")
        record = asdict(result) | {"start": start, "processes": world_size()}  # config.batch_size is per process
        (directory / "history.json").write_text(json.dumps(record, indent=2))


def run_pretraining_job(job: PretrainJob, dataset, directory: Path, resume: Path) -> None:
    """One of torchrun's processes (:mod:`~longdoc.experiments.families.worker`): the documents come from
    the job's token store, not from a dataset."""
    segments = MappedSegments(job.tokens)
    pretrain_and_save(job, SegmentedCorpus([str(i) for i in range(len(segments))], segments), directory, resume)


RUNNER = f"{__name__}:run_pretraining_job"


def pretraining_history(model_directory: Path) -> dict:
    return json.loads((Path(model_directory).parent / "history.json").read_text())


def pretraining_summary(model_directory: Path) -> dict:
    """Steps and losses of a cached pre-training: per phase ("head": ψ and decoder only, "full"), the
    mean loss of its first and last tenth of steps (one step's loss is noisy)."""
    saved = pretraining_history(model_directory)
    per_step = saved["config"]["batch_size"] * saved.get("processes", 1)
    summary = {"MLM head pre-trained": saved["head_pretrained"], "documents per step": per_step}
    if saved.get("start"):
        summary["block cosine at start (centred)"] = (
            f"{saved['start']['block cosine before centring']:.4f} → {saved['start']['after']:.4f}"
        )
    for phase in ("head", "full"):
        rows = [r for r in saved["history"] if r["phase"] == phase]
        if not rows:
            continue
        window = max(1, len(rows) // 10)
        summary[f"{phase} steps"] = len(rows)
        for loss in ("mlm", "lmae", "sp"):
            if loss in rows[0]:
                first = sum(r[loss] for r in rows[:window]) / window
                last = sum(r[loss] for r in rows[-window:]) / window
                summary[f"{phase} {loss.upper()} loss"] = f"{first:.2f} → {last:.2f}"
    return summary


class PretrainedStart:
    """What a row that may start from its own pre-training (``pretrain``) does, in the retrieval and
    matching families alike: the cached pre-training is its start, summarised for the record, and the
    same row without it is the start it must beat. A row says what it pre-trains on and with which
    encoder (:meth:`pretraining_input`), and which fields belong to its pre-training
    (``PRETRAINING_FIELDS``)."""

    PRETRAINING_FIELDS: ClassVar[tuple[str, ...]] = ("pretrain",)

    def pretraining_input(self, study) -> tuple:
        """``(source, encoder, dataset)`` of :func:`pretrained`."""
        raise NotImplementedError

    def start(self, study) -> Path | None:
        if self.pretrain is None:
            return None
        source, encoder, dataset = self.pretraining_input(study)
        return pretrained(
            source,
            encoder,
            self.pretrain,
            dataset=dataset,
            progress=study.progress,
            n_devices=study.settings(BudgetSettings).n_devices,
        )

    def pretraining(self, study) -> dict | None:
        init = self.start(study)
        return pretraining_summary(init) if init else None

    def pretraining_steps(self, study) -> list[dict]:
        init = self.start(study)
        return pretraining_history(init)["history"] if init else []

    def without_pretraining(self):
        return None if self.pretrain is None else replace(self, **dict.fromkeys(self.PRETRAINING_FIELDS))
