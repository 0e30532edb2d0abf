"""The interleaved block/document stack shared by Longtriever and Hi-Transformer.

A document is a set of blocks ``[CLS] tokens [SEP]`` (at most ``segment_length`` tokens each, at most
``max_segments`` blocks). For every backbone layer l:

1. the *intra-block* layer l (the backbone's own ``encoder.layer[l]``) runs over every real block of
   every document of the batch at once, ``[R, 1 + L, d]`` (R = real blocks; no loop over blocks or
   documents); with ``context_slot`` a slot in front of each block holds the block's globally
   informed representation from the previous layer (Longtriever eq. 4);
2. the *inter-block* layer l runs over each document's ``[DOC; CLS_1 .. CLS_N]`` (eq. 1–3; without
   a [DOC] token over the CLS only), padded blocks masked;
3. its block outputs are dispatched back: into the context slot (Longtriever) or over the block's
   [CLS] (Hi-Transformer), where the tokens of block i attend to them in layer l + 1.

Both attention steps go through the backbone's attention implementation (PyTorch's fused
``scaled_dot_product_attention`` when the backbone was loaded with ``attn_implementation="sdpa"``).
Cost: O(M²Nd) for the intra-block layers plus O(N²d) for the inter-block layers.

Initialisation: the intra-block layers *are* the pretrained backbone layers (the released Longtriever
code silently loaded none of them, see notes/upstream-implementations.md). Inter-block layer l starts
as a copy of backbone layer l: it attends over [CLS] states that live in layer l's representation
space, and a copy starts it as a BERT layer over those states instead of random noise written into
every block (the paper does not say; upstream trained both stacks from random weights).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from longdoc.models.biencoder import DocBatch, SingleVectorEncoder, cls_embedding, place_slots, slot_mask


def attention_bias(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[B, K]`` booleans (True = may be attended) → the ``[B, 1, 1, K]`` additive mask HF layers take."""
    return (~keep)[:, None, None, :].to(dtype) * torch.finfo(dtype).min


@dataclass
class BlockStates:
    """Last-layer states of a batch of documents."""

    document: torch.Tensor | None  # [D, d] the [DOC] state after the last inter-block layer (s_d^(L'))
    blocks: torch.Tensor  # [D, N, d] block states after the last layer (c̃_i^(L'); zeros for padded blocks)
    block_mask: torch.Tensor  # [D, N] real blocks
    tokens: torch.Tensor  # [R, L, d] last-layer token states of the real blocks (context slot removed)


class HierarchicalEncoder(SingleVectorEncoder):
    """Template for interleaved hierarchies; subclasses set the switches and the final pooling."""

    inter_block = True  # run the inter-block layers at all
    doc_token = False  # a learned [DOC] vector takes part in every inter-block layer
    context_slot = True  # dispatched block states go to an extra slot (True) or overwrite [CLS] (False)
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
        embedded = bert.embeddings(input_ids=batch.input_ids)  # [R, L, d], block-local positions
        rows, _, hidden = embedded.shape
        keep = batch.attention_mask.bool()
        num_docs, num_blocks = batch.num_docs, batch.max_segments
        slot = 1 if (self.inter_block and self.context_slot) else 0  # index of each block's [CLS]
        states = embedded
        if slot:  # the context slot is empty (masked) in the first layer
            states = torch.cat([embedded.new_zeros(rows, 1, hidden), embedded], dim=1)
            keep = torch.cat([keep.new_zeros(rows, 1), keep], dim=1)
        document = self.doc_embedding.expand(num_docs, hidden) if self.doc_token else None
        block_mask = slot_mask(batch.owner, batch.position, num_docs, num_blocks)
        inter_keep = torch.cat([block_mask.new_ones(num_docs, 1), block_mask], 1) if self.doc_token else block_mask
        inter_bias = attention_bias(inter_keep, states.dtype)  # the [DOC] slot is always real
        intra_bias = attention_bias(keep, states.dtype)
        for depth, layer in enumerate(bert.encoder.layer):
            states = layer(states, attention_mask=intra_bias)
            blocks = place_slots(states[:, slot], batch.owner, batch.position, num_docs, num_blocks)
            if not self.inter_block:
                continue
            if self.block_positions:
                blocks = blocks + self.block_position_embeddings.weight[:num_blocks]
            sequence = torch.cat([document[:, None], blocks], 1) if self.doc_token else blocks
            exchanged = self.inter_layers[depth](sequence, attention_mask=inter_bias)
            if self.doc_token:
                document, exchanged = exchanged[:, 0], exchanged[:, 1:]
            blocks = exchanged * block_mask[..., None]
            # dispatch: block i's state goes to position 0 of block i (the slot, or its [CLS])
            states = torch.cat([exchanged[batch.owner, batch.position][:, None], states[:, 1:]], dim=1)
            if slot and depth == 0:  # from now on the slot holds something
                intra_bias = attention_bias(torch.cat([keep.new_ones(rows, 1), keep[:, 1:]], dim=1), states.dtype)
        return BlockStates(document, blocks, block_mask, states[:, slot:])


def mean_over_blocks(blocks: torch.Tensor, block_mask: torch.Tensor) -> torch.Tensor:
    """``[D, d]``: the mean of each document's real block states (Longtriever ablation IV)."""
    weights = block_mask[..., None].to(blocks.dtype)
    return (blocks * weights).sum(1) / weights.sum(1).clamp(min=1.0)
