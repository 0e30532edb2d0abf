"""Longtriever (Yang et al., EMNLP 2023, section 3.1): tightly coupled intra/inter-block encoding.

Every layer runs the inter-block encoder over ``[DOC; CLS_1 .. CLS_N]`` (eq. 1–3) and dispatches
its outputs into a slot in front of each block, so that every token of block i attends to the
globally informed c̃_i in the next intra-block layer (eq. 4–6). The last [DOC] state is the
embedding; relevance is its dot product with the query's (eq. 7, queries go through the same model).

The layer order is intra then inter, as in the released code: in the paper's order (inter first)
the first inter-block layer would see N identical [CLS] embeddings. The stack itself is
:class:`longdoc.models.hierarchical.HierarchicalEncoder`; where it differs from the paper and the
released code (initialisation, [DOC] start value) its docstring says so.

Ablations (Table 4): ``doc_token=False`` averages the last block states instead (IV);
``inter_block=False`` also drops the inter-block encoder (V), leaving independent blocks whose
[CLS] states are averaged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from longdoc.models.biencoder import DocBatch, EncoderConfig
from longdoc.models.hierarchical import HierarchicalEncoder, mean_over_blocks


@dataclass
class LongtrieverConfig(EncoderConfig):
    """``segment_length`` is the block size M (with [CLS] and [SEP]); ``max_segments`` is N."""

    max_segments: int = 4
    doc_token: bool = True
    inter_block: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.doc_token and not self.inter_block:
            raise ValueError("doc_token=True needs inter_block=True: only the inter-block layers update [DOC]")


class Longtriever(HierarchicalEncoder):
    name = "Longtriever"
    config_class = LongtrieverConfig
    inter_block = True
    doc_token = True
    context_slot = True

    def encode_documents(self, batch: DocBatch) -> torch.Tensor:
        states = self.encode_blocks(batch)
        if self.doc_token:
            return states.document
        return mean_over_blocks(states.blocks, states.block_mask)
