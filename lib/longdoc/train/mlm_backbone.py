"""An MLM-only BERT built here, from random weights, on unjudged text: the start the papers assume.

Longtriever pre-trains from BERT-base (an MLM-trained encoder), SMITH-WP/WP+SP from random weights; the
packaged MiniLM is a contrastive sentence encoder without an MLM head, and continued MLM on it first
undoes what made it a retriever. No installable package ships an MLM-only BERT, so this module trains one:

- **Architecture.** ``BertForMaskedLM`` with BERT's WordPiece vocabulary (the packaged tokenizer, so every
  model and tokenizer path stays as it is), its MLM head kept and tied to the word embeddings (BERT).
- **Objective.** Masked-word prediction only (no next-sentence prediction, as RoBERTa): whole words chosen
  with probability ``mlm_ratio`` (BERT's 15%), 80/10/10 [MASK]/random/kept
  (:func:`longdoc.text.masking.whole_word_mlm`); the head runs on the chosen positions only
  (:func:`longdoc.losses.masked_tokens.masked_token_sum`), a sixth of the positions at 15%.
- **Text.** The pages it is given: the installed man pages outside the benchmark's packages
  (:mod:`longdoc.data.installed_pages`), curated by :mod:`longdoc.data.page_curation` (no page that is
  or quotes a benchmark document, no release-track copies or repeated lines, no package over a quarter of
  the text). Pages are cut into sequences of ``sequence_length`` tokens ([CLS] … [SEP]); each step draws
  ``batch_size`` of them at random (seeded by the run seed and the step).
- **Held out.** The pages of whole packages (the curation's split) are held out; their MLM loss and
  accuracy (a fixed mask) are measured every ``eval_every`` steps and at the end: the curve, with the
  training loss.

Saved with ``save_pretrained`` with its tokenizer, it loads like any backbone folder
(:func:`longdoc.models.backbone.load_backbone`; the MLM head through
:func:`longdoc.models.lmae.prediction_head`), with ``mlm-backbone.json`` beside it: the recipe, the
curve, the held-out figures, the pages read and the wall time.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerBase

from longdoc.losses.masked_tokens import masked_token_sum
from longdoc.progress import tqdm
from longdoc.seeding import seeded
from longdoc.text.masking import IGNORE, candidates, continuation_table, whole_word_mlm, word_index
from longdoc.train.optim import adamw_with_warmup

RECORD = "mlm-backbone.json"
PAGES = "pages.txt"  # the ids of the pages read (trained on or held out), one a line
PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class MlmBackboneConfig:
    """The encoder's shape and its pre-training; every field is in the cache key of the built backbone."""

    layers: int = 4
    hidden: int = 256
    heads: int = 4
    intermediate: int = 1024
    sequence_length: int = 128  # [CLS] + 126 tokens + [SEP]; the study's blocks are 32-128 tokens
    steps: int = 2000
    batch_size: int = 32  # sequences per step
    learning_rate: float = 1e-3
    warmup_ratio: float = 0.05
    weight_decay: float = 0.01
    mlm_ratio: float = 0.15  # BERT's
    held_out_share: float = 0.02  # of the text (whole packages: longdoc.data.page_curation)
    max_package_share: float = 0.25  # of the text, for any one package (longdoc.data.page_curation)
    held_out_sequences: int = 512  # the held-out set's size (sequences spread over the held-out pages, fixed masks)
    eval_every: int = 250
    precision: str = "fp32"  # "bf16": autocast (measure: on some CPUs it is slower)
    max_grad_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        positive = ("layers", "hidden", "heads", "intermediate", "steps", "batch_size", "eval_every")
        bad = [name for name in positive if getattr(self, name) < 1]
        if bad:
            raise ValueError(f"MlmBackboneConfig: {', '.join(bad)} must be at least 1 ({self})")
        if self.hidden % self.heads:
            raise ValueError(f"MlmBackboneConfig: hidden={self.hidden} is not a multiple of heads={self.heads}")
        if not 8 <= self.sequence_length <= 512:
            raise ValueError(f"MlmBackboneConfig: sequence_length={self.sequence_length} must be in [8, 512]")
        if not 0.0 < self.mlm_ratio < 1.0 or not 0.0 < self.held_out_share < 0.5:
            raise ValueError(f"MlmBackboneConfig: mlm_ratio in (0, 1) and held_out_share in (0, 0.5) ({self})")
        if not 0.0 < self.max_package_share < 1.0:
            raise ValueError(f"MlmBackboneConfig: max_package_share={self.max_package_share} must be in (0, 1)")
        if self.precision not in PRECISIONS:
            raise ValueError(f"MlmBackboneConfig: precision must be one of {PRECISIONS}, got {self.precision!r}")


class Sequences:
    """Pages cut into sequences of at most ``length - 2`` tokens, as ``[CLS] piece [SEP]`` rows."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, texts: list[str], length: int, progress: bool = False):
        piece = length - 2
        chunks: list[np.ndarray] = []
        for start in tqdm(range(0, len(texts), 256), desc="tokenizing pages", disable=not progress):
            encoded = tokenizer(texts[start : start + 256], add_special_tokens=False)["input_ids"]
            for ids in encoded:
                ids = np.asarray(ids, dtype=np.int32)
                chunks.extend(ids[i : i + piece] for i in range(0, len(ids), piece))
        if not chunks:
            raise ValueError("the pages hold no token")
        self.chunks = chunks
        self.length = length
        self.cls, self.sep, self.pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def tokens(self) -> int:
        return int(sum(len(chunk) for chunk in self.chunks))

    def batch(self, rows: Iterable[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)`` ``[B, T]``, padded to the batch's longest row."""
        chosen = [self.chunks[i] for i in rows]
        width = max(len(chunk) for chunk in chosen) + 2
        input_ids = torch.full((len(chosen), width), self.pad, dtype=torch.long)
        attention = torch.zeros((len(chosen), width), dtype=torch.long)
        for row, chunk in enumerate(chosen):
            input_ids[row, 0] = self.cls
            input_ids[row, 1 : len(chunk) + 1] = torch.from_numpy(chunk.astype(np.int64))
            input_ids[row, len(chunk) + 1] = self.sep
            attention[row, : len(chunk) + 2] = 1
        return input_ids, attention


def new_model(config: MlmBackboneConfig, tokenizer: PreTrainedTokenizerBase) -> BertForMaskedLM:
    """A BERT of the configured shape with random weights (drawn from ``config.seed``), head tied."""
    bert = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        intermediate_size=config.intermediate,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
    )
    with seeded(config.seed):
        model = BertForMaskedLM._from_config(bert, attn_implementation="sdpa")
    return model


class Masker:
    """BERT's whole-word MLM corruption of a batch, drawn from a generator seeded per call."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, ratio: float):
        self.continuation = continuation_table(tokenizer)
        self.special = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]
        self.mask_id, self.vocab, self.ratio = tokenizer.mask_token_id, len(tokenizer), ratio

    def __call__(
        self, input_ids: torch.Tensor, attention: torch.Tensor, seed: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        words = word_index(input_ids, self.continuation)
        maskable = candidates(input_ids, attention, self.special)
        generator = torch.Generator().manual_seed(seed)
        return whole_word_mlm(input_ids, words, maskable, self.ratio, self.mask_id, self.vocab, generator)


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def autocast(precision: str):
    return torch.autocast(device().type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()


def masked_loss(
    model: BertForMaskedLM, inputs: torch.Tensor, attention: torch.Tensor, labels: torch.Tensor, precision: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(summed cross-entropy, predicted positions)``: the encoder reads the batch, the MLM head reads only
    the masked positions."""
    with autocast(precision):
        states = model.bert(input_ids=inputs, attention_mask=attention).last_hidden_state
        return masked_token_sum(model.cls, states, labels)


def evaluate(model, sequences: Sequences, rows: list[int], masker: Masker, config: MlmBackboneConfig) -> dict:
    """Held-out MLM loss (nats per masked token) and accuracy, each batch's mask fixed by its position, and
    the accuracy of always guessing the most common masked token (what a model that ignores context can
    reach at best, about the unigram stage of MLM training)."""
    model.eval()
    total = correct = count = 0.0
    labelled: list[torch.Tensor] = []
    with torch.no_grad(), autocast(config.precision):
        for start in range(0, len(rows), config.batch_size):
            input_ids, attention = sequences.batch(rows[start : start + config.batch_size])
            inputs, labels = masker(input_ids, attention, seed=config.seed * 1_000_003 + start + 7)
            inputs, attention, labels = inputs.to(device()), attention.to(device()), labels.to(device())
            chosen = labels != IGNORE
            states = model.bert(input_ids=inputs, attention_mask=attention).last_hidden_state
            logits = model.cls(states[chosen]).float()
            total += float(F.cross_entropy(logits, labels[chosen], reduction="sum"))
            correct += float((logits.argmax(-1) == labels[chosen]).sum())
            count += float(chosen.sum())
            labelled.append(labels[chosen].cpu())
    model.train()
    labels = torch.cat(labelled)
    majority = float(torch.bincount(labels).max()) if len(labels) else 0.0
    return {
        "loss": total / max(count, 1.0),
        "accuracy": correct / max(count, 1.0),
        "predicted": int(count),
        "majority_accuracy": majority / max(count, 1.0),  # always the held-out's most common masked token
    }


def train_step(model, optimizer, inputs, attention, labels, config: MlmBackboneConfig) -> float:
    """One optimizer step on the mean masked-token loss (gradients clipped to ``max_grad_norm``); the loss."""
    total, count = masked_loss(model, inputs, attention, labels, config.precision)
    loss = total / count.clamp(min=1)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad()
    return float(loss.detach())


def train_mlm_backbone(
    ids: list[str],
    texts: list[str],
    held: list[bool],
    tokenizer: PreTrainedTokenizerBase,
    config: MlmBackboneConfig,
    out_dir: Path,
    corpus: dict | None = None,
    progress: bool = True,
) -> dict:
    """Train a BERT by MLM on the pages ``(ids, texts)`` whose ``held`` flag is False (the others are the
    held-out set), save it to ``out_dir`` with its tokenizer, ``mlm-backbone.json`` and ``pages.txt``;
    returns the record."""
    began = time.perf_counter()
    if not len(ids) == len(texts) == len(held):
        raise ValueError(f"train_mlm_backbone: {len(ids)} ids, {len(texts)} texts and {len(held)} held-out flags")
    training = [i for i, flag in enumerate(held) if not flag]
    holding = [i for i, flag in enumerate(held) if flag]
    if not training or not holding:
        raise ValueError(f"{len(ids)} pages: {len(training)} to train on and {len(holding)} held out; both are needed")
    train_sequences = Sequences(tokenizer, [texts[i] for i in training], config.sequence_length, progress)
    held_sequences = Sequences(tokenizer, [texts[i] for i in holding], config.sequence_length)
    spread = np.linspace(0, len(held_sequences) - 1, min(config.held_out_sequences, len(held_sequences)))
    held_rows = sorted(set(spread.round().astype(int).tolist()))  # over every held-out page, not the first ones
    model = new_model(config, tokenizer).to(device())
    masker = Masker(tokenizer, config.mlm_ratio)
    optimizer, scheduler = adamw_with_warmup(
        model, config.learning_rate, config.weight_decay, config.warmup_ratio, config.steps
    )
    with seeded(config.seed + 1):  # dropout draws from torch's generator: the run's own, not the process's
        curve = [{"step": 0, "held_out": evaluate(model, held_sequences, held_rows, masker, config)}]
        window: list[float] = []
        seen_tokens = 0
        model.train()
        bar = tqdm(total=config.steps, desc="MLM backbone", disable=not progress)
        for step in range(1, config.steps + 1):
            draw = np.random.default_rng([config.seed, step])
            rows = draw.integers(0, len(train_sequences), size=config.batch_size).tolist()
            input_ids, attention = train_sequences.batch(rows)
            inputs, labels = masker(input_ids, attention, seed=int(draw.integers(0, 2**62)))
            inputs, attention, labels = inputs.to(device()), attention.to(device()), labels.to(device())
            loss = train_step(model, optimizer, inputs, attention, labels, config)
            scheduler.step()
            seen_tokens += int(attention.sum())
            window.append(loss)
            bar.update(1)
            bar.set_postfix(loss=f"{window[-1]:.3f}")
            if step % config.eval_every == 0 or step == config.steps:
                point = {"step": step, "train_loss": float(np.mean(window)), "tokens": seen_tokens}
                point["held_out"] = evaluate(model, held_sequences, held_rows, masker, config)
                curve.append(point)
                window = []
        bar.close()
    seconds = time.perf_counter() - began
    out_dir = Path(out_dir)
    model.cpu().save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    record = {
        "config": asdict(config),
        "parameters": sum(p.numel() for p in model.parameters()),
        "pages": {"read": len(ids), "trained_on": len(training), "held_out": len(holding)},
        "sequences": {
            "train": len(train_sequences),
            "train_tokens": train_sequences.tokens,
            "held_out": len(held_rows),
        },
        "tokens_seen": seen_tokens,
        "held_out": curve[-1]["held_out"],
        "curve": curve,
        "seconds": seconds,
        "tokens_per_second": seen_tokens / seconds,
        "corpus": corpus or {},
        "page_ids_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
        "held_out_ids": [ids[i] for i in holding],
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device().type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
    }
    (out_dir / PAGES).write_text("".join(f"{doc_id}\n" for doc_id in ids), encoding="utf-8")
    (out_dir / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def build_on_installed_pages(
    out_dir: Path, config: MlmBackboneConfig, tokenizer_name: str, benchmark: str, progress: bool = True
) -> dict:
    """Train a backbone by ``config`` on this machine's installed man pages outside ``benchmark``'s
    packages (:mod:`longdoc.data.installed_pages`), curated against ``benchmark``'s documents
    (:mod:`longdoc.data.page_curation`), into ``out_dir``; the corpus's manifest and curation go in the
    record."""
    from longdoc.data.installed_pages import (
        INSTALLED_PAGES,
        installed_page_corpus,
        installed_pages,
        listing_key,
        page_packages,
    )
    from longdoc.data.page_curation import curate_pages
    from longdoc.data.registry import DATA_DIR, load_dataset
    from longdoc.models.backbone import load_tokenizer

    began = time.perf_counter()
    excluded = load_dataset(benchmark)
    pages = installed_pages()
    ids, texts = installed_page_corpus(DATA_DIR, progress=progress)
    curated = curate_pages(
        ids,
        texts,
        page_packages(pages),
        set(excluded.corpus),
        [document.text for document in excluded.corpus.values()],
        config.held_out_share,
        config.max_package_share,
    )
    manifest = DATA_DIR / INSTALLED_PAGES / listing_key(pages) / "manifest.json"
    corpus = {
        "name": INSTALLED_PAGES,
        "manifest": json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {},
        "excluded_benchmark": {"name": benchmark, "checksum": excluded.checksum, "documents": len(excluded.corpus)},
        "curation": curated.report,
        "corpus_seconds": time.perf_counter() - began,
    }
    return train_mlm_backbone(
        curated.ids, curated.texts, curated.held_out, load_tokenizer(tokenizer_name), config, out_dir, corpus, progress
    )


def measure_throughput(config: MlmBackboneConfig, tokenizer: PreTrainedTokenizerBase, steps: int = 8) -> float:
    """Training tokens per second of ``config`` on full-length sequences of random tokens (the first two
    steps are not timed): what chooses the precision and the size of a recipe."""
    model = new_model(config, tokenizer).to(device())
    masker = Masker(tokenizer, config.mlm_ratio)
    optimizer, _ = adamw_with_warmup(model, config.learning_rate, config.weight_decay, 0.0, steps + 2)
    generator = torch.Generator().manual_seed(config.seed)
    timed = tokens = 0.0
    for step in range(steps + 2):
        input_ids = torch.randint(
            1000, len(tokenizer), (config.batch_size, config.sequence_length), generator=generator
        )
        attention = torch.ones_like(input_ids)
        inputs, labels = masker(input_ids, attention, seed=step)
        began = time.perf_counter()
        train_step(model, optimizer, inputs.to(device()), attention.to(device()), labels.to(device()), config)
        if device().type == "cuda":
            torch.cuda.synchronize()
        if step >= 2:
            timed, tokens = timed + time.perf_counter() - began, tokens + input_ids.numel()
    return tokens / timed
