"""Hi-Transformer (Wu et al., ACL 2021), as the hierarchical baseline of Longtriever Table 2.

Each layer: a sentence (here: block) Transformer over every block, a document Transformer over the
blocks' [CLS] states plus block-position embeddings, whose outputs overwrite each block's [CLS] for
the next layer; the document vector is an attentive pooling of the last block states. Against
Longtriever: no [DOC] collector, and the global state replaces the block's own [CLS] instead of
sitting beside it. Blocks are fixed-size token windows, not sentences (as in Longtriever's
comparison); the token-level pooling inside a block is the [CLS] state.
"""

from __future__ import annotations

import torch
from torch import nn

from longdoc.models.biencoder import DocBatch
from longdoc.models.hierarchical import HierarchicalEncoder


class AttentivePooling(nn.Module):
    """``softmax_i(q · tanh(W h_i + b))``-weighted sum over the real items (Hi-Transformer's pooling).

    The query q starts at zero, so the pooling starts as the mean of the block states (Longtriever's
    ablation IV pooling) and is the same for every seed; Hi-Transformer does not say how q starts,
    and notebook 10's start probes compare this start with a random q on dev."""

    def __init__(self, hidden: int):
        super().__init__()
        self.projection = nn.Linear(hidden, hidden)
        self.query = nn.Parameter(torch.zeros(hidden))

    def forward(self, items: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        logits = torch.tanh(self.projection(items)) @ self.query
        weights = logits.masked_fill(~mask, float("-inf")).softmax(-1)
        return torch.einsum("dn,dnh->dh", weights, items)


class HiTransformer(HierarchicalEncoder):
    name = "Hi-Transformer"
    inter_block = True
    doc_token = False
    context_slot = False
    block_positions = True

    def __init__(self, config, model=None, tokenizer=None):
        super().__init__(config, model, tokenizer)
        self.pooling = AttentivePooling(self.backbone.config.hidden_size)

    def encode_documents(self, batch: DocBatch) -> torch.Tensor:
        states = self.encode_blocks(batch)
        return self.pooling(states.blocks, states.block_mask)
