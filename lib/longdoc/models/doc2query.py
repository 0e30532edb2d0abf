"""NCI's query generator (section 3.2, "DocT5Query"): a sequence-to-sequence model that reads a
document and samples queries for it, behind one interface whatever the model is.

- A user's Hugging Face seq2seq checkpoint (``generator=<path or cached hub name>``; docT5query on GPU
  nodes: ``castorini/doc2query-t5-base-msmarco``), loaded with ``AutoModelForSeq2SeqLM``.
- Otherwise (``generator=""``) one built here: ``transformers``' ``EncoderDecoderModel`` with the
  backbone as encoder and as decoder (its cross-attention new), fine-tuned on the train split's
  (relevant document, query) pairs by :func:`longdoc.train.doc2query.train_doc2query`, the dev pairs' loss choosing between
  its two evaluations; no test query is read, and no dev query is trained on.

Generation follows the paper: the document's first ``input_length`` tokens (512; the released
``qg.py`` fed it 64 *characters*), random sampling (top-k = 10, docTTTTTquery's setting), not beam
search, ``queries_per_document`` samples (15) of at most ``max_query_length`` tokens (64). Empty and
repeated samples are dropped, so a document gets *up to* that many queries.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from longdoc.progress import tqdm


@dataclass(frozen=True)
class QueryGenerationConfig:
    generator: str = ""  # a seq2seq checkpoint (path or cached hub name); "" = train one from the backbone here
    queries_per_document: int = 15  # the paper's
    input_length: int = 512  # document tokens the generator reads (the paper's)
    max_query_length: int = 64  # the paper's
    top_k: int = 10  # sampling from the 10 likeliest tokens (docTTTTTquery)
    train_steps: int = 300  # fine-tuning the generator built here
    batch_size: int = 8
    learning_rate: float = 1e-4
    generate_batch_size: int = 8  # documents per generate() call
    seed: int = 0

    def __post_init__(self) -> None:
        if (
            min(
                self.queries_per_document,
                self.input_length,
                self.max_query_length,
                self.top_k,
                self.batch_size,
                self.generate_batch_size,
            )
            < 1
            or self.train_steps < 0
        ):
            raise ValueError(f"query generation: every count must be >= 1 (train_steps >= 0): {self}")


class Doc2Query:
    """``generate(texts)``: sampled queries per document; ``loss(texts, queries)``: the training loss."""

    def __init__(self, model, tokenizer, config: QueryGenerationConfig):
        self.model, self.tokenizer, self.config = model, tokenizer, config

    @classmethod
    def from_checkpoint(cls, path: str, config: QueryGenerationConfig) -> Doc2Query:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, EncoderDecoderModel

        from longdoc.models.backbone import resolve_backbone

        resolved = resolve_backbone(path)
        try:
            model = AutoModelForSeq2SeqLM.from_pretrained(resolved)
        except ValueError:  # an EncoderDecoderModel saved by save() below
            model = EncoderDecoderModel.from_pretrained(resolved)
        return cls(model, AutoTokenizer.from_pretrained(resolved), config)

    @classmethod
    def from_backbone(cls, backbone: str, config: QueryGenerationConfig) -> Doc2Query:
        """An encoder-decoder whose two halves start from the backbone (cross-attention random)."""
        from transformers import EncoderDecoderModel

        from longdoc.models.backbone import load_tokenizer, resolve_backbone

        path = resolve_backbone(backbone)
        tokenizer = load_tokenizer(path)
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(path, path)
        special = {
            "decoder_start_token_id": tokenizer.cls_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.sep_token_id,
        }
        for target in (model.config, model.generation_config):
            for name, value in special.items():
                setattr(target, name, value)
        return cls(model, tokenizer, config)

    def save(self, directory: Path) -> None:
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)

    def _documents(self, texts: list[str]) -> dict[str, torch.Tensor]:
        device = next(self.model.parameters()).device
        encoded = self.tokenizer(
            texts, truncation=True, max_length=self.config.input_length, padding=True, return_tensors="pt"
        )
        return {"input_ids": encoded["input_ids"].to(device), "attention_mask": encoded["attention_mask"].to(device)}

    def labels(self, queries: list[str]) -> torch.Tensor:
        """The decoder's targets for ``queries`` (-100 at padding)."""
        target = self.tokenizer(
            queries, truncation=True, max_length=self.config.max_query_length, padding=True, return_tensors="pt"
        )
        labels = target["input_ids"].masked_fill(target["attention_mask"] == 0, -100)
        if self.tokenizer.cls_token_id is not None and bool((labels[:, 0] == self.tokenizer.cls_token_id).all()):
            labels = labels[
                :, 1:
            ].contiguous()  # BERT's [CLS] is already the decoder's start token: not a word to predict
        return labels

    def target_tokens(self, queries: list[str]) -> torch.Tensor:
        """How many target tokens the mean of :meth:`loss` runs over."""
        return (self.labels(queries) != -100).sum()

    def loss(self, texts: list[str], queries: list[str], model=None) -> torch.Tensor:
        """Mean token cross-entropy of ``queries`` given ``texts`` (``model``: a wrapped copy, e.g. DDP's)."""
        labels = self.labels(queries)
        with (
            warnings.catch_warnings()
        ):  # EncoderDecoderModel's notice that it builds the decoder inputs from the labels
            warnings.filterwarnings("ignore", message="Version v4.12.0 introduces", category=FutureWarning)
            return (model or self.model)(
                **self._documents(texts), labels=labels.to(next(self.model.parameters()).device)
            ).loss

    def generate(self, texts: list[str], seed: int = 0, progress: bool = False) -> list[list[str]]:
        """Up to ``queries_per_document`` distinct sampled queries per text (seeded per batch)."""
        n, size = self.config.queries_per_document, self.config.generate_batch_size
        self.model.eval()
        out: list[list[str]] = []
        for start in tqdm(range(0, len(texts), size), desc="generating queries", disable=not progress):
            batch = texts[start : start + size]
            torch.manual_seed(seed + start)
            with torch.no_grad():
                sequences = self.model.generate(
                    **self._documents(batch),
                    do_sample=True,
                    top_k=self.config.top_k,
                    num_return_sequences=n,
                    max_new_tokens=self.config.max_query_length,
                )
            decoded = self.tokenizer.batch_decode(sequences, skip_special_tokens=True)
            for row in range(len(batch)):
                samples = [q.strip() for q in decoded[row * n : (row + 1) * n]]
                out.append(list(dict.fromkeys(q for q in samples if q)))
        return out
