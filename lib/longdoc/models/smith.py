"""SMITH: the Siamese Multi-depth Transformer-based Hierarchical encoder (Yang et al., CIKM 2020, section 4).

One tower (the two towers of the siamese matcher share it, :mod:`longdoc.models.matching`):

- **Sentence-level Transformer** (4.1.2): L1 layers over every sentence block of the batch at once
  (``[R, L_s]``, blocks from greedy sentence filling, :mod:`longdoc.text.sentences`). Its layers are
  the backbone's first L1 layers (SMITH-Short loads BERT; SMITH-NP starts random, :meth:`Smith.reinitialize`).
- **Block vector** h_i: the first token's state → dense → L2 normalisation (eq. 1 and the text after
  it). The released code puts BERT's tanh pooler and a ReLU before the dense layer; we follow the
  paper's description.
- **Document-level Transformer**: h_i plus a learned block position embedding, LayerNorm and dropout
  (as released), then L2 layers over each document's blocks, padded blocks masked; document vector =
  the first position's output → dense → L2 normalisation. The document layers are BERT layers of the
  backbone's width and heads, drawn at random (the paper pre-trains them; so do our WP+SP rows). The
  paper's sizes are H1 = H2 = 256 with 4 heads; ours are the backbone's (384/12 for MiniLM, 768/12 for
  BERT-base).
- **Combine modes** (4.1.4, Table 7): ``normal`` (the document vector), ``sum-concat`` /
  ``mean-concat`` ([sum / mean of the h_i; document vector]) and ``attention``
  ([Σ_i h_i softmax_i(tanh(h_i W) v); document vector]; the paper writes softmax(h_i W v), the released
  code puts the tanh in, as here). Padded blocks take no part in any of them
  (the released code let them into the sum, mean and attention); the concatenation is L2-normalised
  again so that the matcher's dot product is the cosine the paper names (the released code did not).

Pre-training (4.2) is :class:`SmithPretraining`: masked word prediction on the sentence blocks plus
masked sentence-block prediction (eq. 4–7).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.bert.modeling_bert import BertLayer

from longdoc.distributed import gather_ids, gather_with_grad, pad_to_longest, token_mean, world_size
from longdoc.losses.masked_tokens import masked_token_sum
from longdoc.losses.sentence_block import sentence_block_loss
from longdoc.models.attention import attention_bias
from longdoc.models.biencoder import DocBatch, EncoderConfig, SingleVectorEncoder, place_slots, slot_mask
from longdoc.text.masking import DocumentDraws, candidates, continuation_table, whole_word_mlm, word_index

COMBINE_MODES = ("normal", "sum-concat", "mean-concat", "attention")


@dataclass
class SmithConfig(EncoderConfig):
    """``segment_length`` is the sentence block length L_s, ``max_segments`` the blocks per document."""

    sentence_layers: int = 0  # L1: the backbone's first L1 layers (0: all of them)
    document_layers: int = 3  # L2 (the paper fixes 3)
    combine: str = "normal"
    attention_size: int = 0  # V of the attention combine mode (0: the hidden size)
    random_init: bool = False  # SMITH-NP: every weight drawn at random instead of loaded from the backbone
    sentence_filling: bool = True  # blocks from greedy sentence filling (False: fixed token windows)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.combine not in COMBINE_MODES:
            raise ValueError(f"combine must be one of {COMBINE_MODES}, got {self.combine!r}")
        if self.sentence_layers < 0 or self.document_layers < 0 or self.attention_size < 0:
            raise ValueError(f"sentence_layers, document_layers and attention_size must be >= 0: {self}")


def bert_init(module: nn.Module, std: float) -> None:
    """BERT's initialisation of one module (normal(0, std) weights, zero biases, unit LayerNorm), drawn
    always (transformers' own ``_init_weights`` skips modules it has initialised once)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class Smith(SingleVectorEncoder):
    name = "SMITH"
    config_class = SmithConfig

    def __init__(self, config: SmithConfig, model=None, tokenizer=None):
        super().__init__(config, model, tokenizer)
        bert = self.backbone
        available = len(bert.encoder.layer)
        keep = config.sentence_layers or available
        if keep > available:
            raise ValueError(f"sentence_layers={keep}: the backbone has {available} layers")
        bert.encoder.layer = bert.encoder.layer[:keep]
        bert.config.num_hidden_layers = keep  # a saved checkpoint then holds exactly the L1 layers
        hidden = bert.config.hidden_size
        self.block_dense = nn.Linear(hidden, hidden)
        self.block_position_embeddings = nn.Embedding(config.max_segments, hidden)
        self.document_norm = nn.LayerNorm(hidden, eps=bert.config.layer_norm_eps)
        self.document_dropout = nn.Dropout(bert.config.hidden_dropout_prob)
        self.document_encoder = nn.ModuleList(BertLayer(bert.config) for _ in range(config.document_layers))
        self.document_dense = nn.Linear(hidden, hidden)
        if config.combine == "attention":
            size = config.attention_size or hidden
            self.attention_projection = nn.Linear(hidden, size, bias=False)  # W
            self.attention_context = nn.Parameter(torch.zeros(size))  # v
        for module in self.modules_outside_backbone():
            module.apply(lambda m: bert_init(m, bert.config.initializer_range))
        if config.combine == "attention":
            nn.init.normal_(self.attention_context, std=bert.config.initializer_range)

    def modules_outside_backbone(self) -> list[nn.Module]:
        modules = [
            self.block_dense,
            self.block_position_embeddings,
            self.document_norm,
            self.document_encoder,
            self.document_dense,
        ]
        return modules + ([self.attention_projection] if self.config.combine == "attention" else [])

    def reinitialize(self) -> None:
        """SMITH-NP: every weight, the sentence-level layers and word embeddings included, drawn at random."""
        std = self.backbone.config.initializer_range
        self.backbone.apply(lambda m: bert_init(m, std))
        for module in self.modules_outside_backbone():
            module.apply(lambda m: bert_init(m, std))

    @torch.no_grad()
    def center_block_head(
        self, segments: list[list[list[int]]], blocks: int = 512, apply: bool = True
    ) -> dict[str, float]:
        """Start rule (ours; the paper does not say how the block head starts): the block dense layer's
        bias is set to −W μ, μ the mean first-token state of up to ``blocks`` blocks of ``segments``
        (training documents), so h_i = norm(W (x_i − μ)). An intermediate backbone layer's [CLS] state
        is dominated by one outlier dimension shared by every input (MiniLM's layers 1–5: cosine 0.999
        between any two blocks), and an uncentred head made every block, and so every document,
        nearly the same vector (mean cosine 0.9999), from which neither the sentence-block loss nor
        fine-tuning moved in our budgets. At the backbone's full depth (L1 = 6, the paper's) the last
        layer's [CLS] is not collapsed (mean cosine 0.649 between 512 blocks of 32 tokens of the installed
        man pages, against 0.9999 at layer 4), so centring is no longer what lets it learn; it is kept as the
        one start rule of every row, Table 6's L1 = 2 and 4 included, and each record gives the cosine
        before and after. The experiments centre at the start of pre-training and at the
        start of a fine-tuning from the backbone; a fine-tuning from a pre-trained checkpoint keeps the
        head its document layers were trained with (``apply=False``: the cosine is only measured).
        Returns the mean cosine between block vectors before and after."""
        limit = self.config.max_segments
        picked = list(islice((b for document in segments for b in document[:limit] if b), blocks))  # reads no further
        if len(picked) < 2:
            return {}
        was_training = self.training
        self.eval()
        batch = self.doc_inputs([[block] for block in picked])
        first = self.sentence_states(batch)[:, 0]

        def mean_cosine() -> float:
            h = self.block_vectors(first)
            return float(((h @ h.T).sum() - len(h)) / (len(h) * (len(h) - 1)))

        before = mean_cosine()
        if not apply:
            self.train(was_training)
            return {"block cosine (head kept)": round(before, 4), "blocks": len(picked)}
        self.block_dense.bias.sub_(self.block_dense(first.mean(0)))
        after = mean_cosine()
        self.train(was_training)
        return {"block cosine before centring": round(before, 4), "after": round(after, 4), "blocks": len(picked)}

    # -- the two levels --------------------------------------------------------------------------
    def sentence_states(self, batch: DocBatch) -> torch.Tensor:
        """``[R, L_s, d]``: the sentence-level Transformer's token states of every real block."""
        return self.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state

    def block_vectors(self, first_tokens: torch.Tensor) -> torch.Tensor:
        """h_i: first token → dense → L2 normalisation, ``[R, d]``."""
        return F.normalize(self.block_dense(first_tokens), dim=-1)

    def document_states(self, blocks: torch.Tensor, block_mask: torch.Tensor) -> torch.Tensor:
        """``[D, N, d]``: the document-level Transformer over block vectors ``[D, N, d]`` (any masked
        block already replaced), block positions added, padded blocks masked."""
        states = blocks + self.block_position_embeddings.weight[: blocks.shape[1]]
        states = self.document_dropout(self.document_norm(states))
        bias = None if bool(block_mask.all()) else attention_bias(block_mask, states.dtype)
        for layer in self.document_encoder:
            states = layer(states, attention_mask=bias)
        return states

    def combine(self, document: torch.Tensor, blocks: torch.Tensor, block_mask: torch.Tensor) -> torch.Tensor:
        """The final representation of section 4.1.4 from the document vector ``[D, d]`` and the block
        vectors ``[D, N, d]`` (padded blocks excluded)."""
        mode = self.config.combine
        if mode == "normal":
            return document
        weights = block_mask[..., None].to(blocks.dtype)
        if mode == "sum-concat":
            pooled = (blocks * weights).sum(1)
        elif mode == "mean-concat":
            pooled = (blocks * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        else:
            scores = torch.tanh(self.attention_projection(blocks)) @ self.attention_context  # [D, N]
            scores = scores.masked_fill(~block_mask, float("-inf"))
            pooled = (blocks * torch.softmax(scores, dim=-1)[..., None]).sum(1)
        return F.normalize(torch.cat([pooled, document], dim=-1), dim=-1)

    def encode_documents(self, batch: DocBatch) -> torch.Tensor:
        first = self.sentence_states(batch)[:, 0]
        blocks = place_slots(self.block_vectors(first), batch.owner, batch.position, batch.num_docs, batch.max_segments)
        mask = slot_mask(batch.owner, batch.position, batch.num_docs, batch.max_segments)
        states = self.document_states(blocks, mask)
        document = F.normalize(self.document_dense(states[:, 0]), dim=-1)
        return self.combine(document, blocks, mask)


def sample_masked_blocks(
    block_mask: torch.Tensor, per_document: int, generator: torch.Generator | DocumentDraws | None = None
) -> torch.Tensor:
    """Dynamic sentence-block masking (4.2.1): ``[D, N]`` booleans, ``per_document`` real blocks of
    each document drawn uniformly, fresh at every call. A document keeps at least one block unmasked
    (one of n blocks masks at most n − 1; a one-block document masks none): the paper does not say,
    and a document whose every block is the mask vector gives the document encoder nothing to read."""
    if isinstance(generator, DocumentDraws):
        draw = generator.documents(tuple(block_mask.shape))
    else:
        draw = torch.rand(block_mask.shape, generator=generator, device=block_mask.device)
    draw = draw.masked_fill(~block_mask, 2.0)  # padded blocks sort last and are never drawn
    rank = draw.argsort(dim=-1).argsort(dim=-1)
    allowed = (block_mask.sum(-1, keepdim=True) - 1).clamp(min=0).clamp(max=per_document)
    return (rank < allowed) & block_mask


def global_sentence_block_loss(predicted: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
    """Eq. 6 over the masked blocks of every process (one process: :func:`sentence_block_loss`, 0 without a
    masked block). Each process gathers every process's Ŝ and h (its own keeping their gradient, padded to
    the most blocks) and takes the global batch's loss; the caller steps on it times the world size, so that
    DDP's average of the gradients is the global batch's. A collective: every process calls it, with or
    without masked blocks."""
    if world_size() == 1:
        return sentence_block_loss(predicted, original) if len(predicted) else original.sum() * 0.0
    real = pad_to_longest(torch.ones(len(predicted), dtype=torch.bool, device=predicted.device), 0, False)
    real = gather_ids(real)
    if not bool(real.any()):
        return (predicted.sum() + original.sum()) * 0.0
    everyone = [gather_with_grad(pad_to_longest(part, 0, 0.0))[real] for part in (predicted, original)]
    return sentence_block_loss(*everyone)


class SmithPretraining(nn.Module):
    """SMITH's pre-training task (4.2): L = L_sp + L_wp (eq. 7).

    - L_wp: whole-word masked word prediction on the sentence blocks (BERT), through a prediction
      head tied to the word embeddings (:func:`longdoc.models.lmae.prediction_head`).
    - L_sp: ``masked_blocks`` blocks per document are replaced by one learned vector ĥ (4.2.1); the
      document-level output Ŝ_k at each masked position scores the original h of every masked block
      of the batch, Sim = Ŝ hᵀ (eq. 4), softmax cross-entropy with the diagonal as labels (eq. 5–6,
      :func:`longdoc.losses.sentence_block.sentence_block_loss`). Padded blocks are never candidates
      and no parameter depends on the batch size (the released code added a bias of size batch × k).

    One forward pass serves both: the word-masked blocks give the token predictions and the block
    vectors (the released code also ran them together).
    """

    def __init__(self, encoder: Smith, mlm_ratio: float = 0.15, masked_blocks: int = 2, block_prediction: bool = True):
        super().__init__()
        from longdoc.models.lmae import prediction_head

        self.encoder = encoder
        self.mlm_ratio = mlm_ratio
        self.masked_blocks = masked_blocks
        self.block_prediction = block_prediction
        self.head, self.head_pretrained = prediction_head(encoder)
        hidden = encoder.backbone.config.hidden_size
        self.mask_vector = nn.Parameter(torch.empty(hidden).normal_(std=encoder.backbone.config.initializer_range))  # ĥ
        tokenizer = encoder.tokenizer
        self.register_buffer("continuation", continuation_table(tokenizer), persistent=False)
        self.special_ids = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]

    def head_parameters(self) -> list[nn.Parameter]:
        """What the head warm-up trains: everything outside the sentence-level encoder."""
        inside = {id(p) for p in self.encoder.backbone.parameters()}
        return [p for p in self.parameters() if id(p) not in inside]

    def forward(self, batch: DocBatch, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        tokenizer = self.encoder.tokenizer
        words = word_index(batch.input_ids, self.continuation)
        maskable = candidates(batch.input_ids, batch.attention_mask, self.special_ids)
        inputs, labels = whole_word_mlm(
            batch.input_ids, words, maskable, self.mlm_ratio, tokenizer.mask_token_id, len(tokenizer), generator
        )
        states = self.encoder.backbone(input_ids=inputs, attention_mask=batch.attention_mask).last_hidden_state
        losses = {"mlm": token_mean(*masked_token_sum(self.head, states, labels))}
        if self.block_prediction:
            losses["sp"] = self.block_loss(batch, states[:, 0], generator)  # the global batch's eq. 6
        # L = L_wp + L_sp (eq. 7); L_sp, which every process computes over all processes' blocks, counts
        # world-size times so that DDP's average of the gradients is the global batch's
        losses["loss"] = losses["mlm"] + losses.get("sp", 0.0) * world_size()
        return losses

    def block_loss(
        self, batch: DocBatch, first_tokens: torch.Tensor, generator: torch.Generator | None
    ) -> torch.Tensor:
        """L_sp of eq. 6 (0 when no document of the batch has two blocks)."""
        encoder = self.encoder
        blocks = place_slots(
            encoder.block_vectors(first_tokens), batch.owner, batch.position, batch.num_docs, batch.max_segments
        )
        block_mask = slot_mask(batch.owner, batch.position, batch.num_docs, batch.max_segments)
        masked = sample_masked_blocks(block_mask, self.masked_blocks, generator)
        corrupted = torch.where(masked[..., None], self.mask_vector.to(blocks.dtype), blocks)
        predicted = encoder.document_states(corrupted, block_mask)[masked]  # Ŝ, [B, d]
        return global_sentence_block_loss(predicted.float(), blocks[masked].float())
