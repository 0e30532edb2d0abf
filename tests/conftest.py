import os
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def share_the_cores_between_workers() -> None:
    """Under pytest-xdist each worker takes its share of the cores for torch (and for the processes its tests
    start, through OMP_NUM_THREADS): two workers of two threads each on two cores ran the suite's torch
    tests up to three times slower than one thread each."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        threads = max(1, cores // workers)
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


share_the_cores_between_workers()
FIXTURES = Path(__file__).parent / "fixtures"
TINY_BERT = dict(
    vocab_size=30522,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=128,
)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def tokenizer():
    """The real bert-base-uncased WordPiece vocabulary (from the packaged default backbone)."""
    from longdoc.models import resolve_backbone

    return AutoTokenizer.from_pretrained(resolve_backbone("minilm"))


@pytest.fixture
def tiny_bert():
    """A tiny random BERT: unit tests never need trained weights."""
    torch.manual_seed(0)
    return BertModel(BertConfig(**TINY_BERT, attn_implementation="sdpa"), add_pooling_layer=False).eval()


@pytest.fixture
def tiny_bert_with(tiny_bert):
    """``tiny_bert_with(**config_changes)``: a fresh tiny random BERT (seed 0) with a changed config."""

    def build(**changes):
        torch.manual_seed(0)
        return BertModel(BertConfig(**{**tiny_bert.config.to_dict(), **changes}), add_pooling_layer=False)

    return build


def save_tiny_backbone(directory: Path, tokenizer, **changes) -> str:
    """A tiny random BERT (seed 0, ``TINY_BERT`` with ``changes``) saved with the real vocabulary."""
    torch.manual_seed(0)
    BertModel(BertConfig(**TINY_BERT, **changes), add_pooling_layer=False).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="session")
def tiny_backbone(tmp_path_factory, tokenizer):
    """A tiny random BERT saved as a backbone directory (``backbone=<path>``), with the real vocabulary."""
    return save_tiny_backbone(tmp_path_factory.mktemp("tiny_backbone"), tokenizer)


@pytest.fixture(scope="session")
def still_backbone(tmp_path_factory, tokenizer):
    """The tiny backbone without dropout (runs that must see the same numbers twice)."""
    return save_tiny_backbone(
        tmp_path_factory.mktemp("still_backbone"), tokenizer, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )


TOPICS = [
    "kernel",
    "socket",
    "thread",
    "signal",
    "memory",
    "file",
    "clock",
    "locale",
    "pipe",
    "mutex",
    "timer",
    "device",
    "network",
    "printer",
    "terminal",
    "process",
    "string",
    "number",
    "random",
    "matrix",
    "vector",
    "buffer",
    "cache",
    "queue",
]


def write_tiny_dataset(directory: Path) -> Path:
    """24 documents, one query each: 12 train, 6 dev, 6 test (BEIR layout)."""
    from longdoc.data.beir import Document, RetrievalDataset, save_beir

    corpus = {
        f"d{i}": Document(f"d{i}", t, f"{t} " * 20 + "about the " + t + " and other things " * 6)
        for i, t in enumerate(TOPICS)
    }
    queries = {f"q{i}": f"what is a {t}" for i, t in enumerate(TOPICS)}
    splits = {"train": range(0, 12), "dev": range(12, 18), "test": range(18, 24)}
    qrels = {split: {f"q{i}": {f"d{i}": 1} for i in ids} for split, ids in splits.items()}
    save_beir(RetrievalDataset("tiny", corpus, queries, qrels), directory)
    return directory


def add_further_set(directory: Path, split: str = "dl19") -> Path:
    """``qrels/<split>.tsv`` in a BEIR folder: its test queries again under ids of their own (``dl19-q18``:
    a query belongs to one split), judged as in test."""
    import json

    lines = (directory / "qrels" / "test.tsv").read_text().splitlines()
    texts = {row["_id"]: row["text"] for row in map(json.loads, (directory / "queries.jsonl").read_text().splitlines())}
    judged = [line.split("\t") for line in lines[1:] if line.strip()]
    with (directory / "queries.jsonl").open("a") as handle:
        for qid in dict.fromkeys(q for q, _, _ in judged):
            handle.write(json.dumps({"_id": f"{split}-{qid}", "text": texts[qid]}) + "\n")
    rows = "".join(f"{split}-{q}\t{d}\t{r}\n" for q, d, r in judged)
    (directory / "qrels" / f"{split}.tsv").write_text(lines[0] + "\n" + rows)
    return directory


@pytest.fixture
def tiny_dataset(tmp_path) -> Path:
    return write_tiny_dataset(tmp_path / "tiny")


@pytest.fixture
def isolated_outputs(tmp_path, monkeypatch):
    """Cache, results and figures in a temporary directory (tests never write into the checkout)."""
    from longdoc import plots
    from longdoc.experiments import cache, records, study

    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(records, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(study, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(study, "FIGURES_DIR", tmp_path / "figures")
    monkeypatch.setattr(plots, "FIGURES_DIR", tmp_path / "figures")
    return tmp_path


def build_tiny_study(dataset, backbone, **changes):
    """A study of the tiny dataset with the tiny backbone (seconds per fine-tuning run)."""
    from longdoc.experiments.families.retrieval import RETRIEVAL
    from longdoc.experiments.study import Study

    params = dict(
        profile="test",
        dataset=str(dataset),
        max_docs=0,
        backbone=backbone,
        pooling="cls",
        precision="fp32",
        block_size=16,
        max_blocks=2,
        query_length=8,
        train_steps=4,
        train_epochs=1,
        batch_size=4,
        dev_evals=2,
        patience=0,
        dev_candidates=0,
        learning_rates=[1e-4, 3e-3],
        seeds=[0, 1],
        pretrain_corpus="",
        pretrain_steps=1,
        pretrain_epochs=1,
        pretrain_batch_size=2,
        pretrain_learning_rate=1e-3,
        head_warmup_steps=0,
        decoder_init="copy",
        mlm_ratio=0.3,
        lmae_ratio=0.5,
    )
    return Study("01_baselines", params | changes, RETRIEVAL, progress=False)


@pytest.fixture
def tiny_study():
    return build_tiny_study


def committed_records() -> list[Path]:
    """Every ``results/<profile>/<dataset>/<notebook>/metrics.json`` in git (not the local runs beside them)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    listed = subprocess.run(["git", "ls-files", "results/*/*/*/metrics.json"], cwd=root, capture_output=True, text=True)
    return [root / line for line in listed.stdout.split()] if listed.returncode == 0 else []  # not a checkout: none


def copied_results(tmp_path: Path) -> Path:
    """A copy of the committed records under ``tmp_path/results`` (a fresh clone's ``results/``)."""
    import shutil

    results = tmp_path / "results"
    for path in committed_records():
        target = results / path.relative_to(path.parents[3])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return results


def papermill_values(profile: str, notebook: str, overrides: dict | None = None) -> dict:
    """What a notebook receives from ``run_all.sh``: the profiles tool's values, through papermill's YAML file."""
    import yaml

    from longdoc.experiments.profiles import NOTEBOOKS_DIR, PROFILES_DIR, parameters_for

    values = parameters_for(PROFILES_DIR / f"{profile}.yaml", NOTEBOOKS_DIR / f"{notebook}.ipynb", overrides)
    return yaml.safe_load(yaml.safe_dump(values, sort_keys=False))
