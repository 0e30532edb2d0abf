"""Longtriever experiments: cached pre-training, and the configurations of the paper's studies.

``pretrained`` returns the directory of a Longtriever checkpoint pre-trained with MLM (+ LMAE) on a
document collection; notebooks 10–13 share it through the cache, so the full model is pre-trained
once per (data, block size, masking ratios, budget).
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from longdoc.data.beir import RetrievalDataset
from longdoc.data.errors import DataFormatError
from longdoc.data.registry import load_dataset
from longdoc.experiments.cache import cache_key, cached_directory
from longdoc.models.lmae import LongtrieverPretraining
from longdoc.models.longtriever import Longtriever, LongtrieverConfig
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.pretrain import PretrainConfig, pretrain_longtriever

# Table 4's rows: (pre-training or None, encoder switches)
ABLATIONS = {
    "I. Longtriever": ("lmae+mlm", {}),
    "II. I w/o LMAE": ("mlm", {}),
    "III. II w/o MLM": (None, {}),
    "IV. III w/o [DOC]": (None, {"doc_token": False}),
    "V. IV w/o inter-block": (None, {"doc_token": False, "inter_block": False}),
}


def pretraining_texts(source: str | Path | RetrievalDataset) -> tuple[list[str], list[str]]:
    """Documents to pre-train on: a dataset (loaded, ``manpages`` or a BEIR directory; its corpus only,
    never its queries) or a ``.txt`` file whose documents are separated by blank lines."""
    if isinstance(source, RetrievalDataset):
        return source.doc_ids, source.texts
    path = Path(source)
    if path.suffix == ".txt":
        if not path.is_file():
            raise FileNotFoundError(f"pretrain corpus {path} does not exist")
        texts = [t.strip() for t in path.read_text(encoding="utf-8").split("\n\n") if t.strip()]
        if not texts:
            raise DataFormatError(path, "no document (documents are separated by blank lines)")
        return [f"{path.stem}-{i}" for i in range(len(texts))], texts
    return pretraining_texts(load_dataset(str(source)))


def pretrained(source: str | Path | RetrievalDataset, encoder: LongtrieverConfig, pretrain: PretrainConfig,
               progress: bool = True) -> Path:
    """The directory of a Longtriever pre-trained on ``source``'s documents (built once, cached)."""
    ids, texts = pretraining_texts(source)
    if isinstance(source, RetrievalDataset):
        name, checksum = source.name, source.checksum
    else:
        name, checksum = str(source), cache_key(ids=ids, texts=texts)

    def build(directory: Path) -> None:
        model = Longtriever(encoder)
        corpus = SegmentedCorpus.build(model.tokenizer, ids, texts, encoder.segment_length, encoder.max_segments)
        task = LongtrieverPretraining(model, pretrain.mlm_ratio, pretrain.lmae_ratio, pretrain.lmae)
        result = pretrain_longtriever(task, corpus, pretrain, progress=progress)
        model.save(directory / "model")
        (directory / "history.json").write_text(json.dumps(asdict(result), indent=2))

    directory = cached_directory("pretrain", build, corpus=name, corpus_checksum=checksum,
                                 encoder=asdict(encoder), pretrain=asdict(pretrain))
    return directory / "model"


def pretraining_history(model_directory: Path) -> dict:
    return json.loads((Path(model_directory).parent / "history.json").read_text())


def ablation_setup(row: str, encoder: LongtrieverConfig, pretrain: PretrainConfig):
    """(encoder config, pre-training config or None) of a Table 4 row."""
    objective, switches = ABLATIONS[row]
    config = replace(encoder, **switches)
    if objective is None:
        return config, None
    return config, replace(pretrain, lmae=objective == "lmae+mlm")


def starting_checkpoint(dataset: RetrievalDataset, encoder: LongtrieverConfig, pretrain: PretrainConfig | None,
                        pretrain_corpus: str = "", progress: bool = True) -> Path | None:
    """The pre-trained checkpoint that fine-tuning starts from (None: the backbone itself)."""
    if pretrain is None:
        return None
    return pretrained(pretrain_corpus or dataset, encoder, pretrain, progress=progress)


def starting_model(dataset: RetrievalDataset, encoder: LongtrieverConfig, pretrain: PretrainConfig | None,
                   pretrain_corpus: str = "", progress: bool = True) -> Longtriever:
    """The model before fine-tuning (for :func:`longdoc.eval.probes.in_batch_probe`)."""
    init = starting_checkpoint(dataset, encoder, pretrain, pretrain_corpus, progress)
    return Longtriever(encoder) if init is None else Longtriever.load(init)


def longtriever_run(dataset: RetrievalDataset, queries: dict[str, str], encoder: LongtrieverConfig,
                    pretrain: PretrainConfig | None, train, iterations: int = 1, pretrain_corpus: str = "",
                    k: int = 100, progress: bool = True):
    """Pre-train (unless ``pretrain`` is None), fine-tune and search: ``(run, record)``.

    ``pretrain_corpus`` names the documents to pre-train on (empty: ``dataset``'s own corpus).
    """
    from longdoc.experiments.retrieval import dense_run, finetune, segment_corpus

    init = starting_checkpoint(dataset, encoder, pretrain, pretrain_corpus, progress)
    record = {"pretrain": None}
    if init is not None:
        saved = pretraining_history(init)
        history = saved["history"]
        record["pretrain"] = {"steps": len(history), "first_loss": history[0]["loss"], "last_loss": history[-1]["loss"],
                              "head_pretrained": saved["head_pretrained"]}
    model, finetuned = finetune("Longtriever", dataset, encoder, train, iterations=iterations, init=init, progress=progress)
    record["finetune"] = finetuned
    return dense_run(model, segment_corpus(model, dataset), queries, k, progress=progress), record
