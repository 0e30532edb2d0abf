"""The interleaved block/document stack shared by Longtriever and Hi-Transformer.

A document is a set of blocks ``[CLS] tokens [SEP]`` (at most ``segment_length`` tokens each, at most
``max_segments`` blocks). For every backbone layer l:

1. the *intra-block* layer l (the backbone's own ``encoder.layer[l]``) runs over every real block of
   every document of the batch at once, ``[R, L, d]`` (R = real blocks; no loop over blocks or
   documents); with ``context_slot`` the tokens of block i also attend to c̃_i, the block's globally
   informed state from layer l − 1 (Longtriever eq. 4–5): c̃_i is a key and value only, never a
   query, since its own output would be overwritten by the next dispatch
   (:func:`longdoc.models.attention.layer_with_context`);
2. the *inter-block* layer l runs over each document's ``[DOC; CLS_1 .. CLS_N]`` (eq. 1–3; without
   a [DOC] token over the CLS only), padded blocks masked;
3. its block outputs are dispatched back: as the context c̃_i of block i (Longtriever) or over the
   block's [CLS] (Hi-Transformer), where the tokens of block i attend to them in layer l + 1.

Both attention steps go through the backbone's attention implementation (PyTorch's fused
``scaled_dot_product_attention`` when the backbone was loaded with ``attn_implementation="sdpa"``);
masks are built once per batch, and left out when nothing is padded (the fused kernel's fast path).
Cost: O(M²Nd) for the intra-block layers plus O(N²d) for the inter-block layers. The released code
prepends a slot to every block, runs it as a query too and rebuilds all block states each layer to
refill it; keeping c̃_i apart computes the same function (a test checks it against that slot
formulation) with one query row less per block and without rewriting the layer's output; the keys
and values are still read from ``[c̃_i; tokens]``, a copy of the layer input.

Initialisation: the intra-block layers *are* the pretrained backbone layers (the released Longtriever
code silently loaded none of them, see notes/upstream-implementations.md). Inter-block layer l starts
as a copy of backbone layer l: it attends over [CLS] states that live in layer l's representation
space, and a copy starts it as a BERT layer over those states instead of random noise written into
every block (the paper does not say; upstream trained both stacks from random weights; notebook 10
probes both starts).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from longdoc.models.attention import attention_bias, layer_with_context
from longdoc.models.biencoder import DocBatch, SingleVectorEncoder, cls_embedding, place_slots, slot_mask


@dataclass
class BlockStates:
    """Last-layer states of a batch of documents."""

    document: torch.Tensor | None  # [D, d] the [DOC] state after the last inter-block layer (s_d^(L'))
    blocks: torch.Tensor  # [D, N, d] block states after the last layer (c̃_i^(L'); zeros for padded blocks)
    block_mask: torch.Tensor  # [D, N] real blocks
    tokens: torch.Tensor  # [R, L, d] last-layer token states of the real blocks


def _bias_unless_all(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """The additive mask of ``keep``, or None when every key may be attended."""
    return None if bool(keep.all()) else attention_bias(keep, dtype)


class HierarchicalEncoder(SingleVectorEncoder):
    """Template for interleaved hierarchies; subclasses set the switches and the final pooling."""

    inter_block = True  # run the inter-block layers at all
    doc_token = False  # a learned [DOC] vector takes part in every inter-block layer
    context_slot = True  # dispatched block states are extra context (True) or overwrite [CLS] (False)
    block_positions = False  # add learned block-position embeddings before every inter-block layer

    def __init__(self, config, model=None, tokenizer=None):
        super().__init__(config, model, tokenizer)
        for switch in ("inter_block", "doc_token"):  # a config may switch them (ablations)
            setattr(self, switch, getattr(config, switch, getattr(type(self), switch)))
        if self.doc_token and not self.inter_block:
            raise ValueError("doc_token=True needs inter_block=True: only the inter-block layers update [DOC]")
        bert = self.backbone
        hidden = bert.config.hidden_size
        if self.inter_block:
            self.inter_layers = nn.ModuleList(copy.deepcopy(layer) for layer in bert.encoder.layer)
        if self.doc_token:  # the [DOC] vector starts as the embedding of [CLS] at position 0
            self.doc_embedding = nn.Parameter(cls_embedding(bert, self.tokenizer))
        if self.block_positions:
            self.block_position_embeddings = nn.Embedding(config.max_segments, hidden)
            nn.init.normal_(self.block_position_embeddings.weight, std=bert.config.initializer_range)

    def encode_blocks(self, batch: DocBatch) -> BlockStates:
        bert = self.backbone
        tokens = bert.embeddings(input_ids=batch.input_ids)  # [R, L, d], block-local positions
        rows, _, hidden = tokens.shape
        keep = batch.attention_mask.bool()
        num_docs, num_blocks = batch.num_docs, batch.max_segments
        token_bias = _bias_unless_all(keep, tokens.dtype)
        context_bias = (
            None if token_bias is None else attention_bias(torch.cat([keep.new_ones(rows, 1), keep], 1), tokens.dtype)
        )
        document = self.doc_embedding.expand(num_docs, hidden) if self.doc_token else None
        block_mask = slot_mask(batch.owner, batch.position, num_docs, num_blocks)
        inter_keep = torch.cat([block_mask.new_ones(num_docs, 1), block_mask], 1) if self.doc_token else block_mask
        inter_bias = _bias_unless_all(inter_keep, tokens.dtype)  # the [DOC] slot is always real
        context = None  # c̃_i from the previous layer (none before the first inter-block layer)
        for depth, layer in enumerate(bert.encoder.layer):
            if context is None:
                tokens = layer(tokens, attention_mask=token_bias)
            else:
                tokens = layer_with_context(layer, tokens, torch.cat([context[:, None], tokens], 1), context_bias)
            blocks = place_slots(tokens[:, 0], batch.owner, batch.position, num_docs, num_blocks)
            if not self.inter_block:
                continue
            if self.block_positions:
                blocks = blocks + self.block_position_embeddings.weight[:num_blocks]
            sequence = torch.cat([document[:, None], blocks], 1) if self.doc_token else blocks
            exchanged = self.inter_layers[depth](sequence, attention_mask=inter_bias)
            if self.doc_token:
                document, exchanged = exchanged[:, 0], exchanged[:, 1:]
            blocks = exchanged * block_mask[..., None]
            dispatched = exchanged[batch.owner, batch.position]  # block i's state, [R, d]
            if self.context_slot:
                context = dispatched
            else:  # Hi-Transformer: the global state replaces the block's [CLS]
                tokens = torch.cat([dispatched[:, None], tokens[:, 1:]], dim=1)
        return BlockStates(document, blocks, block_mask, tokens)


def mean_over_blocks(blocks: torch.Tensor, block_mask: torch.Tensor) -> torch.Tensor:
    """``[D, d]``: the mean of each document's real block states (Longtriever ablation IV)."""
    weights = block_mask[..., None].to(blocks.dtype)
    return (blocks * weights).sum(1) / weights.sum(1).clamp(min=1.0)
