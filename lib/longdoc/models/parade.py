"""PARADE-Transformer (Li et al., 2020) as a dense retriever ("BERT-PARADE", Longtriever Table 2).

Blocks are encoded independently by the backbone (one batch of all blocks); their pooled states,
plus block-position embeddings, go through a small Transformer with a learned [CLS] in front whose
output is the document vector. Li et al. aggregate for a cross-encoder; in a bi-encoder the query
goes through the same path as a one-block document. The aggregation layers are new (random init,
as in PARADE); the aggregation [CLS] starts as the backbone's [CLS] embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertLayer

from longdoc.models.attention import attention_bias
from longdoc.models.biencoder import DocBatch, EncoderConfig, SingleVectorEncoder, cls_embedding, scatter_slots


@dataclass
class ParadeConfig(EncoderConfig):
    max_segments: int = 4
    aggregation_layers: int = 2  # PARADE-Transformer uses two


class Parade(SingleVectorEncoder):
    name = "PARADE"
    config_class = ParadeConfig

    def __init__(self, config: ParadeConfig, model=None, tokenizer=None):
        super().__init__(config, model, tokenizer)
        bert_config = self.backbone.config
        self.aggregator = nn.ModuleList(BertLayer(bert_config) for _ in range(config.aggregation_layers))
        self.aggregator.apply(self.backbone._init_weights)
        self.block_position_embeddings = nn.Embedding(config.max_segments, bert_config.hidden_size)
        nn.init.normal_(self.block_position_embeddings.weight, std=bert_config.initializer_range)
        self.aggregation_cls = nn.Parameter(cls_embedding(self.backbone, self.tokenizer))

    def encode_documents(self, batch: DocBatch) -> torch.Tensor:
        hidden = self.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
        pooled = self.pool(hidden, batch.attention_mask)  # [R, d]
        num_docs, num_blocks = batch.num_docs, batch.max_segments
        blocks, block_mask = scatter_slots(pooled, batch.owner, batch.position, num_docs, num_blocks)
        blocks = blocks + self.block_position_embeddings.weight[:num_blocks]
        keep = torch.cat([block_mask.new_ones(num_docs, 1), block_mask], 1)  # the aggregation [CLS] is real
        sequence = torch.cat([self.aggregation_cls.expand(num_docs, 1, -1), blocks], 1)
        for layer in self.aggregator:
            sequence = layer(sequence, attention_mask=attention_bias(keep, sequence.dtype))
        return sequence[:, 0]
