"""The shared bi-encoder interface, and the FirstP and MaxP baselines built on it.

A query becomes one vector; a document becomes one vector per segment, ``[D, S, d]`` with a mask.
Relevance is :meth:`BiEncoder.score`: the dot product, max-pooled over a document's segments (for one
segment this is the plain dot product). Subclasses change how documents are cut (``max_segments``) and,
for the systems that follow, how segments are encoded; the training loop, its losses, the probe,
indexing and evaluation see only this interface. A late-interaction model (several vectors per query)
overrides :meth:`BiEncoder.embed_queries` and :meth:`BiEncoder.score`.

- :class:`FirstP`: the first ``segment_length`` tokens only (the papers' "BERT-Passage", STAR, DPR).
- :class:`MaxP`: up to ``max_segments`` independent segments, score = max over segments (Dai & Callan
  2019; ANCE(MaxP)/STAR(MaxP) in SeDR Table 1).
- :class:`SingleVectorEncoder`: the base of models that read all blocks of a document into one vector
  (Longtriever, PARADE, Hi-Transformer); queries go through the same model as a one-block document.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from longdoc.io import missing_checkpoint
from longdoc.models.backbone import DEFAULT_BACKBONE, load_backbone
from longdoc.progress import tqdm
from longdoc.sharding import gather_in_order, my_share
from longdoc.text.segments import SegmentedCorpus

PRECISIONS = ("fp32", "bf16")


@dataclass
class EncoderConfig:
    backbone: str = DEFAULT_BACKBONE
    segment_length: int = 512  # tokens per segment including [CLS] and [SEP]
    max_segments: int = 1
    max_query_length: int = 32
    pooling: str = "cls"  # "cls" as in the papers; "mean" is how all-MiniLM-L6-v2 was trained
    precision: str = "fp32"  # "bf16": mixed precision (the released Longtriever code trained in fp16)
    document_tokens: int = 0  # content tokens read per document; 0 = all that max_segments blocks hold

    def __post_init__(self) -> None:
        if self.document_tokens < 0:
            raise ValueError(f"document_tokens must be >= 0, got {self.document_tokens}")
        if self.document_tokens >= self.max_segments * (self.segment_length - 2):
            self.document_tokens = 0  # one spelling for "all the blocks hold", so equal configs share a cache key
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {self.pooling!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.segment_length < 3 or self.max_segments < 1 or self.max_query_length < 3:
            raise ValueError(f"segment_length >= 3, max_segments >= 1 and max_query_length >= 3 are required: {self}")


@dataclass
class DocBatch:
    """Segments of a batch of documents, flattened: ``owner[s]`` is the document of segment s."""

    input_ids: torch.Tensor  # [S, L]
    attention_mask: torch.Tensor  # [S, L]
    owner: torch.Tensor  # [S]
    position: torch.Tensor  # [S] segment index within its document
    num_docs: int
    max_segments: int

    def to(self, device) -> DocBatch:
        return DocBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.owner.to(device),
            self.position.to(device),
            self.num_docs,
            self.max_segments,
        )


class BiEncoder(nn.Module):
    """Dual encoder with shared weights for queries and documents (template for every dense model)."""

    name = "bi-encoder"
    reads_one_block = False  # True: the model reads the first segment only (its config has max_segments 1)

    def __init__(self, config: EncoderConfig, model=None, tokenizer=None):
        super().__init__()
        self.config = config
        if model is None:
            model, tokenizer = load_backbone(config.backbone)
        self.backbone = model
        self.tokenizer = tokenizer

    # -- inputs -------------------------------------------------------------------------------
    def query_inputs(self, texts: list[str]) -> dict[str, torch.Tensor]:
        return self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.config.max_query_length, return_tensors="pt"
        )

    def doc_inputs(self, documents: list[list[list[int]]]) -> DocBatch:
        """``documents[i]`` is a list of content-token segments; only the first ``max_segments`` are used."""
        cls_id, sep_id, pad_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id, self.tokenizer.pad_token_id
        rows, owners, positions = [], [], []
        for doc, segments in enumerate(documents):
            for position, content in enumerate(segments[: self.config.max_segments]):
                rows.append([cls_id, *content[: self.config.segment_length - 2], sep_id])
                owners.append(doc)
                positions.append(position)
        width = max(map(len, rows))
        input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = torch.tensor(row)
            attention_mask[i, : len(row)] = 1
        max_segments = max(positions) + 1
        return DocBatch(
            input_ids, attention_mask, torch.tensor(owners), torch.tensor(positions), len(documents), max_segments
        )

    # -- encoding ------------------------------------------------------------------------------
    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.config.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.pool(hidden, attention_mask)

    def embed_queries(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Query vectors: ``[B, d]``, one per query (the default), or ``[B, T, d]`` for a model that
        scores with several vectors per query (late interaction; rows of zeros for padding)."""
        return self.embed(input_ids, attention_mask)

    def score(self, queries: torch.Tensor, documents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B, D]`` relevance of each query to each document of ``documents [D, S, d]`` (``mask [D, S]``:
        real vectors): the dot product with each of a document's vectors, max over them (MaxP; the plain
        dot product for one vector; Longtriever eq. 7, SeDR eq. 9). The training losses, the in-batch probe
        and the dense retriever score through this (FAISS for this default, an exhaustive index for any other),
        so a late-interaction model overrides it; SeDR's cost and t-SNE helpers and the siamese matchers
        assume this default."""
        return maxp_scores(queries, documents, mask)

    @property
    def max_vectors(self) -> int:
        """The most vectors one document can have (a training step pads every document to it)."""
        return self.config.max_segments

    def encode_segments(self, batch: DocBatch) -> torch.Tensor:
        """One vector per segment, ``[S, d]``. Segment-interaction models override this."""
        return self.embed(batch.input_ids, batch.attention_mask)

    def document_vectors(self, batch: DocBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The vectors that stand for a batch of documents, with their (document, slot) coordinates.

        Multi-vector models give one per segment (the default); single-vector models one per document.
        """
        return self.encode_segments(batch), batch.owner, batch.position

    def slots_per_document(self, batch: DocBatch) -> int:
        """How many vectors a document of ``batch`` may have (the ``S`` of ``[D, S, d]``)."""
        return batch.max_segments

    def forward(self, query_inputs: dict, doc_batch: DocBatch):
        """Training forward: ``(queries [B, d], documents [D, S, d], document mask [D, S])``, in fp32."""
        with self.autocast():
            queries = self.embed_queries(query_inputs["input_ids"], query_inputs["attention_mask"])
            vectors, owner, slot = self.document_vectors(doc_batch)
        docs, mask = scatter_slots(vectors.float(), owner, slot, doc_batch.num_docs, self.slots_per_document(doc_batch))
        return queries.float(), docs, mask

    def autocast(self) -> torch.autocast:
        """The context of every forward pass: bf16 autocast when ``config.precision`` is "bf16" (weights,
        gradients and optimizer state stay fp32; the vectors leave the model as fp32), else a no-op."""
        return torch.autocast(self._device().type, dtype=torch.bfloat16, enabled=self.config.precision == "bf16")

    # -- inference -----------------------------------------------------------------------------
    def _device(self) -> torch.device:
        return next(self.parameters()).device

    @torch.no_grad()
    def encode_queries(self, texts: list[str], batch_size: int = 128, progress: bool = False) -> np.ndarray:
        """Query vectors ``[Q, d]`` (``[Q, T, d]`` for late interaction); under several processes each encodes its share of the batches and
        all of them get every vector, in order (:func:`longdoc.sharding.gather_in_order`)."""
        self.eval()
        parts = []
        starts = my_share(list(range(0, len(texts), batch_size)))
        for position, start in tqdm(starts, desc="encoding queries", disable=not progress):
            inputs = {k: v.to(self._device()) for k, v in self.query_inputs(texts[start : start + batch_size]).items()}
            with self.autocast():
                vectors = self.embed_queries(inputs["input_ids"], inputs["attention_mask"])
            parts.append((position, vectors.float().cpu().numpy()))
        out = gather_in_order(parts)
        return np.concatenate(out) if out else np.zeros((0, self.backbone.config.hidden_size), np.float32)

    def token_batches(self, corpus: SegmentedCorpus, max_tokens: int = 8192) -> list[list[int]]:
        """Documents grouped so that each batch holds at most ``max_tokens`` padded tokens (segments x
        the longest segment), documents kept whole (single-vector models need all their blocks) and
        ordered by their longest segment, so that a batch pads little."""
        widths, counts = corpus.extents(self.config.max_segments)
        widths = widths + 2  # [CLS] and [SEP]
        order = np.lexsort((-counts, -widths))  # widest first, then most segments; stable, as sorted() was
        batches, batch, segments, width = [], [], 0, 0
        for i in order.tolist():
            w, n = int(widths[i]), int(counts[i])
            if batch and (segments + n) * max(width, w) > max_tokens:
                batches.append(batch)
                batch, segments, width = [], 0, 0
            batch.append(i)
            segments, width = segments + n, max(width, w)
        return batches + ([batch] if batch else [])

    @torch.no_grad()
    def encode_corpus(
        self, corpus: SegmentedCorpus, max_tokens: int = 8192, progress: bool = True, everyone: bool = True
    ) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """Segment vectors ``[S, d]`` and their document numbers ``[S]``, in batches of at most
        ``max_tokens`` padded tokens (:meth:`token_batches`; 8,192 = 32 segments of 256). Under several
        processes (``torchrun``/``accelerate launch``) each encodes its share of the batches and every
        process (``everyone=False``: the first only; the others get ``(None, None)``) gets the arrays
        one process would have made, in the same order."""
        self.eval()
        parts = []
        batches = my_share(self.token_batches(corpus, max_tokens))
        for position, chosen in tqdm(batches, desc=f"encoding corpus ({self.name})", disable=not progress):
            batch = self.doc_inputs([corpus.segments[i] for i in chosen]).to(self._device())
            with self.autocast():
                encoded, owner, _ = self.document_vectors(batch)
            parts.append((position, (encoded.float().cpu().numpy(), np.asarray(chosen)[owner.cpu().numpy()])))
        gathered = gather_in_order(parts, everyone)
        if gathered is None:
            return None, None
        return np.concatenate([v for v, _ in gathered]), np.concatenate([o for _, o in gathered])

    # -- persistence ---------------------------------------------------------------------------
    config_class = EncoderConfig

    def save(self, directory: str | Path) -> None:
        """The backbone in Hugging Face format, the config, and any parameters outside the backbone."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory / "backbone")
        self.tokenizer.save_pretrained(directory / "backbone")
        extra = {k: v for k, v in self.state_dict().items() if not k.startswith("backbone.")}
        if extra:
            torch.save(extra, directory / "extra_parameters.pt")
        (directory / "encoder_config.json").write_text(
            json.dumps({"class": type(self).__name__, **asdict(self.config)}, indent=2)
        )

    @classmethod
    def load(cls, directory: str | Path) -> BiEncoder:
        directory = Path(directory)
        if not directory.is_dir() and missing_checkpoint(directory):
            raise FileNotFoundError(missing_checkpoint(directory))
        saved = json.loads((directory / "encoder_config.json").read_text())
        saved_class = saved.pop("class", cls.__name__)
        if saved_class != cls.__name__:
            raise ValueError(f"{directory} holds a {saved_class}, not a {cls.__name__}")
        model = cls(cls.config_class(**{**saved, "backbone": str(directory / "backbone")}))
        if (directory / "extra_parameters.pt").exists():
            missing, unexpected = model.load_state_dict(torch.load(directory / "extra_parameters.pt"), strict=False)
            if unexpected or any(not k.startswith("backbone.") for k in missing):
                raise ValueError(
                    f"{directory}: parameters do not match {cls.__name__} (missing {missing}, unexpected {unexpected})"
                )
        return model


def place_slots(
    vectors: torch.Tensor, owner: torch.Tensor, slot: torch.Tensor, num_docs: int, slots: int
) -> torch.Tensor:
    """Flat vectors ``[V, d]`` (segments or blocks of documents) placed at ``(owner, slot)`` of a
    zero ``[D, slots, d]`` grid."""
    return vectors.new_zeros((num_docs, slots, vectors.shape[-1])).index_put((owner, slot), vectors)


def slot_mask(owner: torch.Tensor, slot: torch.Tensor, num_docs: int, slots: int) -> torch.Tensor:
    """``[D, slots]``: True where :func:`place_slots` puts a vector."""
    mask = torch.zeros((num_docs, slots), dtype=torch.bool, device=owner.device)
    mask[owner, slot] = True
    return mask


def scatter_slots(
    vectors: torch.Tensor, owner: torch.Tensor, slot: torch.Tensor, num_docs: int, slots: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The grid of :func:`place_slots` and its mask."""
    return place_slots(vectors, owner, slot, num_docs, slots), slot_mask(owner, slot, num_docs, slots)


def cls_embedding(backbone, tokenizer) -> torch.Tensor:
    """The backbone's input embedding of [CLS] at position 0: the start value of new summary tokens."""
    with torch.no_grad():
        return backbone.embeddings(input_ids=torch.tensor([[tokenizer.cls_token_id]]))[0, 0].detach().clone()


def maxp_scores(queries: torch.Tensor, documents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B, D]`` relevance: dot product of each query with each segment, max over real segments."""
    scores = torch.einsum("bh,dsh->bds", queries, documents)
    return scores.masked_fill(~mask.unsqueeze(0), float("-inf")).amax(dim=-1)


class FirstP(BiEncoder):
    """First ``segment_length`` tokens of the document ("BERT-Passage" in Longtriever Table 2)."""

    name = "FirstP"
    reads_one_block = True  # the one-block rule: settings, the training benchmark and the GPU-hour prices read it

    def __init__(self, config: EncoderConfig, model=None, tokenizer=None):
        if config.max_segments != 1:
            raise ValueError(f"FirstP reads one segment; got max_segments={config.max_segments}")
        super().__init__(config, model, tokenizer)


class MaxP(BiEncoder):
    """Independent segments, document score = max over segment scores (SeDR Table 1 "(MaxP)")."""

    name = "MaxP"


class SingleVectorEncoder(BiEncoder):
    """One vector per document from all of its blocks (``[D, 1, d]`` in the shared interface).

    Queries go through the same model as one-block documents, so that both live in one space.
    """

    def encode_documents(self, batch: DocBatch) -> torch.Tensor:
        """``[D, d]``: one vector per document of the batch."""
        raise NotImplementedError

    def slots_per_document(self, batch: DocBatch) -> int:
        return 1

    def document_vectors(self, batch: DocBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        vectors = self.encode_documents(batch)
        owner = torch.arange(batch.num_docs, device=vectors.device)
        return vectors, owner, torch.zeros_like(owner)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(len(input_ids), device=input_ids.device)
        return self.encode_documents(DocBatch(input_ids, attention_mask, rows, torch.zeros_like(rows), len(rows), 1))
