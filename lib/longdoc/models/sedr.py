"""SeDR (Chen et al., AAAI 2023): the Segment-Interaction Transformer, one vector per segment.

A document of n tokens is cut into up to k segments ``[CLS] … [SEP]`` (:class:`SegmentedCorpus`).

- **Segment order.** A learned embedding of the segment's index within its document is added to
  every input token embedding of the segment (before the embedding LayerNorm, where the released
  code adds it to the token-type embedding).
- **Interaction (eq. 7).** In every layer, the queries of segment s_i are its own tokens, and its
  keys and values are its own tokens followed by the [CLS] states of the document's other segments
  from the previous layer; padded tokens and absent segments are masked. The layer's own
  projections, output block and feed-forward are used
  (:func:`longdoc.models.attention.layer_with_context`, through the backbone's attention
  implementation). All segments of all documents of a batch go through each layer at once. The
  released code writes the other [CLS] states into k − 1 slots at the end of each segment, which
  run as queries too and are overwritten; keeping them as keys/values only computes the same
  token states from the second layer on (the release's first layer sees pad embeddings there, ours
  the other segments' embedded [CLS]).
- **Segment vectors (eq. 8).** ``[s_1 .. s_k] = [h_CLS^{s_1} .. h_CLS^{s_k}] W + b``; queries go
  through the same map (the released ``RobertaDot`` applies its head to both), and relevance is the
  maximum over a document's segments (eq. 9, :func:`longdoc.models.biencoder.maxp_scores`).

Start rule (not in the paper, whose RoBERTa starts from STAR's checkpoint with its trained head):
the segment-order embedding starts at zero and W, b at the identity and zero, so that SeDR-MaxP (and
the Transformer-Head, whose gate starts at 0) *is* the warm-start model read segment by segment; with
interaction the other segments' [CLS] keys change the states from the first layer on. The released
code draws both at random; notebook 20 probes that start beside ours (at the ``cpu`` profile's start,
a random order embedding lowered the dev probe's accuracy from 0.750 to 0.711 for SeDR-MaxP).

Table 2's variants, by ``interaction``:

- ``"none"``: SeDR-MaxP, segments encoded independently (with the segment-order embedding and the map);
- ``"head"``: SeDR-Transformer-Head, segments encoded independently, then one transformer layer over
  each document's segment [CLS] states (padded segments masked) before the map. The paper does not
  say how the layer starts: ours is a copy of the backbone's last layer whose change to the [CLS]
  states enters through a learned gate that starts at 0 (``cls + g · (layer(cls) − cls)``), so the
  variant starts as SeDR-MaxP; without the gate a fresh layer moves the documents, and not the queries
  (which do not pass through it), away from the warm start's space;
- ``"global"``: SeDR-Global-Attention, in every layer each segment's [CLS] attends to every token of
  its document (absent segments and padding masked) through separate global query/key/value
  projections, as Longformer's global attention has (they start as copies of the layer's own, as in
  Longformer's conversion; the extra parameters are why the paper's row has 149M against 125M); the
  other tokens attend within their segment. Read that way, every [CLS] of a document has the same
  keys and a query that differs only through the segment-order embedding, so a document's segment
  vectors are (nearly) identical by construction: measured on 80 ``manpages`` documents (4 × 64 tokens,
  MiniLM), one minus their mean cosine is 2e-8 with our zero order embedding, 3e-8 with the release's
  random one. That is the paper's model and its Figure 5 ("the segment embeddings of Global-Attention
  collapse"). Neither the paper (Section 4.1, Table 2's variants) nor the release adds anything that
  tells a [CLS] its own segment's keys; an earlier version here added a learned own-segment bias
  (ln k at the start, after ETC's relative labels), which set the variant's within-document cosine
  at initialisation, and is removed.

SeDR-Longformer (Table 2's fifth row) is not built: it needs a Longformer converted from the backbone.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from longdoc.models.attention import attention_bias, attention_mix, finish_layer, layer_with_context
from longdoc.models.biencoder import BiEncoder, DocBatch, EncoderConfig, scatter_slots

INTERACTIONS = ("sit", "none", "head", "global")


@dataclass
class SeDRConfig(EncoderConfig):
    """``segment_length`` is the segment length (with [CLS] and [SEP]); ``max_segments`` is k."""

    max_segments: int = 4
    interaction: str = "sit"  # "sit": the Segment-Interaction Transformer (eq. 7); "none": SeDR-MaxP; "head"; "global"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.interaction not in INTERACTIONS:
            raise ValueError(f"interaction must be one of {INTERACTIONS}, got {self.interaction!r}")
        if self.pooling != "cls":
            raise ValueError("SeDR reads each segment's [CLS] state (eq. 8): pooling must be 'cls'")


class SeDR(BiEncoder):
    name = "SeDR"
    config_class = SeDRConfig

    def __init__(self, config: SeDRConfig, model=None, tokenizer=None):
        super().__init__(config, model, tokenizer)
        hidden = self.backbone.config.hidden_size
        self.segment_embedding = nn.Embedding(config.max_segments, hidden)  # segment order within the document
        nn.init.zeros_(self.segment_embedding.weight)
        self.head = nn.Linear(hidden, hidden)  # W, b of eq. 8
        with torch.no_grad():
            self.head.weight.copy_(torch.eye(hidden))
            self.head.bias.zero_()
        if config.interaction == "head":
            self.segment_layer = copy.deepcopy(self.backbone.encoder.layer[-1])  # over a document's segments
            self.segment_gate = nn.Parameter(torch.zeros(()))  # g: the layer's change enters gated, from 0
        if config.interaction == "global":  # per layer: the [CLS] rows' query/key/value projections
            self.global_projections = nn.ModuleList(
                nn.ModuleDict(
                    {name: copy.deepcopy(getattr(layer.attention.self, name)) for name in ("query", "key", "value")}
                )
                for layer in self.backbone.encoder.layer
            )

    # -- queries ---------------------------------------------------------------------------------
    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.head(super().embed(input_ids, attention_mask))

    # -- segments --------------------------------------------------------------------------------
    def input_states(self, batch: DocBatch) -> torch.Tensor:
        """Token embeddings plus the segment-order embedding, through the backbone's embedding layer
        (positions, token type, LayerNorm): ``[S, L, d]``."""
        embeddings = self.backbone.embeddings
        words = embeddings.word_embeddings(batch.input_ids) + self.segment_embedding(batch.position)[:, None, :]
        return embeddings(inputs_embeds=words, token_type_ids=torch.zeros_like(batch.input_ids))

    def segment_states(self, batch: DocBatch) -> torch.Tensor:
        """Last-layer token states of every segment, ``[S, L, d]``."""
        hidden = self.input_states(batch)
        keep_tokens = batch.attention_mask.bool()
        if self.config.interaction in ("none", "head"):
            bias = attention_bias(keep_tokens, hidden.dtype)
            for layer in self.backbone.encoder.layer:
                hidden = layer_with_context(layer, hidden, hidden, bias)
            return hidden
        if self.config.interaction == "global":
            return self.global_attention_states(batch, hidden)
        others, present = other_segments(batch)  # [S, k-1] segment indices of the same document, real ones
        bias = attention_bias(torch.cat([keep_tokens, present], dim=1), hidden.dtype)
        for layer in self.backbone.encoder.layer:
            context = hidden[:, 0][others.clamp(min=0)]  # [S, k-1, d]: the other segments' [CLS] (layer l-1)
            hidden = layer_with_context(layer, hidden, torch.cat([hidden, context], dim=1), bias)
        return hidden

    def global_attention_states(self, batch: DocBatch, hidden: torch.Tensor) -> torch.Tensor:
        """SeDR-Global-Attention: tokens attend within their segment; each segment's [CLS] attends to
        all tokens of its document through the layer's global projections."""
        keep_tokens = batch.attention_mask.bool()
        segments, length = keep_tokens.shape
        k = batch.max_segments
        slots, _ = scatter_slots(keep_tokens.to(hidden.dtype), batch.owner, batch.position, batch.num_docs, k)
        document_keep = slots.bool().reshape(batch.num_docs, k * length)  # [D, k·L] real tokens of the document
        local_bias = attention_bias(keep_tokens, hidden.dtype)
        global_bias = attention_bias(document_keep, hidden.dtype)  # [D, 1, 1, k·L]
        for layer, projections in zip(self.backbone.encoder.layer, self.global_projections):
            attention = layer.attention.self
            mixed = attention_mix(attention, hidden, hidden, local_bias)  # [S, L, d]
            tokens = hidden.new_zeros((batch.num_docs, k, length, hidden.shape[-1])).index_put(
                (batch.owner, batch.position), hidden
            )
            cls_grid = tokens[:, :, 0]  # [D, k, d] (absent segments' rows are computed and dropped)
            cls_mixed = attention_mix(
                attention, cls_grid, tokens.reshape(batch.num_docs, k * length, -1), global_bias, projections
            )[batch.owner, batch.position]  # [S, d]
            mixed = torch.cat([cls_mixed[:, None], mixed[:, 1:]], dim=1)
            hidden = finish_layer(layer, mixed, hidden)
        return hidden

    def encode_segments(self, batch: DocBatch) -> torch.Tensor:
        """One vector per segment, ``[S, d]`` (eq. 8)."""
        cls = self.segment_states(batch)[:, 0]
        if self.config.interaction == "head":
            grid, present = scatter_slots(cls, batch.owner, batch.position, batch.num_docs, batch.max_segments)
            mixed = layer_with_context(self.segment_layer, grid, grid, attention_bias(present, grid.dtype))
            cls = cls + self.segment_gate * (mixed[batch.owner, batch.position] - cls)
        return self.head(cls)


def other_segments(batch: DocBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """For every segment, the indices (into the batch's flat segments) of the other segments of its
    document, ``[S, k-1]`` with -1 where the document has fewer, and whether each is real."""
    k = batch.max_segments
    grid = torch.full((batch.num_docs, k), -1, dtype=torch.long, device=batch.owner.device)
    grid[batch.owner, batch.position] = torch.arange(len(batch.owner), device=batch.owner.device)
    everyone = torch.arange(k, device=grid.device)
    # row p: the positions other than p, in order
    other_positions = everyone.expand(k, k)[~torch.eye(k, dtype=torch.bool, device=grid.device)].view(k, k - 1)
    others = grid[batch.owner[:, None], other_positions[batch.position]]
    return others, others >= 0
