"""HAN: the Hierarchical Attention Network (Yang et al., NAACL 2016), SMITH's first baseline (Table 5).

- Word encoder: a bidirectional GRU over a sentence's word vectors; word attention
  u_it = tanh(W_w h_it + b_w), α_it = softmax_t(u_itᵀ u_w), s_i = Σ_t α_it h_it.
- Sentence encoder: a bidirectional GRU over the s_i; sentence attention with u_s gives the
  document vector v. GRUs of 50 units per direction, as in HAN.

Deviations, for this machine: the word vectors are the backbone's WordPiece embeddings (trainable; no
GloVe can be fetched), and the "sentences" are SMITH's greedy-filled sentence blocks, so that HAN and
SMITH read the same units of the same documents. Padding takes no part in either GRU (packed
sequences) or attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from longdoc.models.biencoder import DocBatch, EncoderConfig, SingleVectorEncoder, place_slots, slot_mask


@dataclass
class HanConfig(EncoderConfig):
    gru_size: int = 50  # units per direction
    sentence_filling: bool = True


class AttentivePooling(nn.Module):
    """Σ_t softmax_t(tanh(W h_t + b)ᵀ u) h_t over the real steps (HAN eq. 5–7 and 8–10)."""

    def __init__(self, size: int):
        super().__init__()
        self.projection = nn.Linear(size, size)
        self.context = nn.Parameter(torch.randn(size) * 0.05)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = (torch.tanh(self.projection(states)) @ self.context).masked_fill(~mask, float("-inf"))
        return (states * torch.softmax(scores, dim=-1)[..., None]).sum(1)


def _bigru(gru: nn.GRU, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    packed = pack_padded_sequence(inputs, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
    states, _ = pad_packed_sequence(gru(packed)[0], batch_first=True, total_length=inputs.shape[1])
    return states


class HAN(SingleVectorEncoder):
    name = "HAN"
    config_class = HanConfig

    def __init__(self, config: HanConfig, model=None, tokenizer=None):
        super().__init__(config, model, tokenizer)
        self.backbone.encoder.layer = self.backbone.encoder.layer[:0]  # only the word embeddings are read
        self.backbone.config.num_hidden_layers = 0
        read = {id(p) for p in self.backbone.embeddings.word_embeddings.parameters()}
        for parameter in self.backbone.parameters():  # never read, so never a gradient: frozen, so that DDP
            parameter.requires_grad_(id(parameter) in read)  # over several processes waits for none of them
        width = self.backbone.config.hidden_size
        size = config.gru_size
        self.word_gru = nn.GRU(width, size, batch_first=True, bidirectional=True)
        self.word_attention = AttentivePooling(2 * size)
        self.sentence_gru = nn.GRU(2 * size, size, batch_first=True, bidirectional=True)
        self.sentence_attention = AttentivePooling(2 * size)

    def encode_documents(self, batch: DocBatch) -> torch.Tensor:
        words = self.backbone.embeddings.word_embeddings(batch.input_ids)  # [R, L, d]
        keep = batch.attention_mask.bool()
        sentences = self.word_attention(_bigru(self.word_gru, words, keep.sum(-1)), keep)  # s_i, [R, 2u]
        grid = place_slots(sentences, batch.owner, batch.position, batch.num_docs, batch.max_segments)
        mask = slot_mask(batch.owner, batch.position, batch.num_docs, batch.max_segments)
        return self.sentence_attention(_bigru(self.sentence_gru, grid, mask.sum(-1)), mask)  # v, [D, 2u]
