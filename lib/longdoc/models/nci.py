"""The Neural Corpus Indexer's sequence-to-sequence model (NCI section 3.3): a query encoder and the
prefix-aware weight-adaptive (PAWA) decoder that generates a document's semantic identifier.

- **Encoder**: the backbone (BERT-style, or T5's encoder when the backbone is T5), as in the paper,
  which initialises the encoder from T5 and the decoder at random.
- **Decoder** (eq. 2): ``decoder_layers`` (M2) pre-norm transformer layers with causal self-attention
  over the identifier tokens and cross-attention to the query's token states. Its token embedding is
  its own (the identifier vocabulary, not the encoder's) and is tied to the classifier ``W`` (eq. 3).
  The tokens are (position, value) pairs, which carry the step, so no position embedding is added.
- **PAWA** (eq. 4): ``adaptor_layers`` (M3) causal transformer layers read ``[e, r_1, ..., r_{i-1}]``,
  ``e`` the query embedding (mean of the encoder states) in the start token's place, and give step
  ``i`` the adapted classifier ``W_ada^i = A_i W`` with ``A_i = I + U_i V_iᵀ`` (rank ``adaptor_rank``,
  ``U_i, V_i`` projected from the adaptor's state). So ``logits_i = (h_i + (h_i U_i) V_iᵀ) W`` is
  computed for all steps at once under teacher forcing. Differences from the released code: it
  projected d → d·V (a full per-step weight, 178M parameters at T5-base) and fed the adaptor a learned
  constant instead of the query; here ``A_i`` is low-rank (2·d·d·r parameters: 2.4M at d = 384,
  r = 8) and reads ``e`` as the paper says. ``V_i``'s projection starts at zero, so a new PAWA decoder
  computes exactly the plain decoder's logits; ``adaptor_layers = 0`` is the plain decoder (the "w/o
  PAWA" row, DSI).

:class:`NciModel` is a ``transformers`` ``PreTrainedModel`` with ``GenerationMixin``, so decoding is
``transformers``' own beam search (:mod:`longdoc.index.nci_retriever`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import Seq2SeqLMOutput


@dataclass(frozen=True)
class NciConfig:
    backbone: str = "minilm"
    vocab_size: int = 0  # identifier tokens (IdTokenizer.vocab_size)
    max_id_length: int = 0  # the longest identifier in tokens, EOS included
    decoder_layers: int = 2  # M2 (the released base model: 6)
    adaptor_layers: int = 2  # M3 (the paper: 4; 0 = no PAWA, the plain decoder)
    adaptor_rank: int = 8  # r of A_i = I + U_i V_iᵀ
    dropout: float = 0.1
    query_length: int = 64  # query tokens (the released max input length)

    def __post_init__(self) -> None:
        if self.vocab_size < 3 or self.max_id_length < 2:
            raise ValueError(f"vocab_size >= 3 and max_id_length >= 2 are required (from the IdTokenizer): {self}")
        if self.decoder_layers < 1 or self.adaptor_layers < 0 or self.adaptor_rank < 1:
            raise ValueError(f"decoder_layers >= 1, adaptor_layers >= 0 and adaptor_rank >= 1 are required: {self}")


class NciGenerationConfig(PretrainedConfig):
    """What ``transformers``' generation needs to know (start, padding and end tokens)."""

    model_type = "longdoc_nci"

    def __init__(self, nci: dict | None = None, **kwargs):
        kwargs.setdefault("is_encoder_decoder", True)
        kwargs.setdefault("decoder_start_token_id", 0)
        kwargs.setdefault("pad_token_id", 0)
        kwargs.setdefault("eos_token_id", 1)
        kwargs.setdefault("bos_token_id", 0)
        super().__init__(**kwargs)
        self.nci = nci or {}
        self.vocab_size = self.nci.get("vocab_size", 0)


def load_query_encoder(backbone: str):
    """The backbone as a query encoder and its tokenizer: T5's encoder for a T5 checkpoint, else the
    backbone itself (:func:`longdoc.models.backbone.load_backbone`)."""
    from transformers import AutoConfig, T5EncoderModel

    from longdoc.models.backbone import load_backbone, load_tokenizer, resolve_backbone

    path = resolve_backbone(backbone)
    if AutoConfig.from_pretrained(path).model_type in ("t5", "mt5", "umt5"):
        return T5EncoderModel.from_pretrained(path), load_tokenizer(path)
    return load_backbone(path)


def causal_mask(length: int, device) -> torch.Tensor:
    return torch.triu(torch.full((length, length), float("-inf"), device=device), diagonal=1)


class PrefixAdaptor(nn.Module):
    """Eq. 4's AdaptiveDecoder: M3 causal layers over ``[e, r_1, ...]`` and the low-rank ``U_i, V_i``."""

    def __init__(self, d: int, heads: int, feed_forward: int, layers: int, rank: int, dropout: float):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, feed_forward, dropout, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.layers = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d), enable_nested_tensor=False)
        self.to_u = nn.Linear(d, d * rank)
        self.to_v = nn.Linear(d, d * rank)
        nn.init.zeros_(self.to_v.weight)
        nn.init.zeros_(self.to_v.bias)
        self.rank = rank

    def forward(self, prefix_embeddings: torch.Tensor, query_embedding: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """``h_i A_i`` for every step: ``hidden`` [B, T, d] through the adapted weights of each prefix."""
        inputs = torch.cat([query_embedding[:, None], prefix_embeddings[:, 1:]], dim=1)
        states = self.layers(inputs, mask=causal_mask(inputs.shape[1], inputs.device), is_causal=True)
        batch, steps, d = hidden.shape
        u = self.to_u(states).view(batch, steps, d, self.rank)
        v = self.to_v(states).view(batch, steps, d, self.rank)
        return hidden + torch.einsum("btr,btdr->btd", torch.einsum("btd,btdr->btr", hidden, u), v)


class NciModel(PreTrainedModel, GenerationMixin):
    config_class = NciGenerationConfig
    main_input_name = "input_ids"
    _supports_cache_class = False

    def __init__(self, config: NciGenerationConfig, encoder: nn.Module | None = None, tokenizer=None):
        super().__init__(config)
        self.nci = NciConfig(**config.nci)
        if encoder is None:
            encoder, tokenizer = load_query_encoder(self.nci.backbone)
        self.encoder, self.tokenizer = encoder, tokenizer
        hidden = encoder.config.to_dict()
        d = hidden.get("hidden_size") or hidden["d_model"]
        heads = hidden.get("num_attention_heads") or hidden["num_heads"]
        feed_forward = hidden.get("intermediate_size") or hidden["d_ff"]
        self.embedding = nn.Embedding(self.nci.vocab_size, d)  # tied to the classifier W (eq. 3)
        nn.init.normal_(self.embedding.weight, std=d ** -0.5)
        layer = nn.TransformerDecoderLayer(d, heads, feed_forward, self.nci.dropout, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.decoder = nn.TransformerDecoder(layer, self.nci.decoder_layers, norm=nn.LayerNorm(d))
        self.adaptor = (PrefixAdaptor(d, heads, feed_forward, self.nci.adaptor_layers, self.nci.adaptor_rank, self.nci.dropout)
                        if self.nci.adaptor_layers else None)

    @classmethod
    def build(cls, config: NciConfig, encoder: nn.Module | None = None, tokenizer=None) -> "NciModel":
        return cls(NciGenerationConfig(nci=asdict(config)), encoder, tokenizer)

    @property
    def name(self) -> str:
        return "NCI" if self.adaptor is not None else "NCI w/o PAWA"

    def get_encoder(self):
        return self.encoder

    def _init_weights(self, module):  # the encoder keeps its pre-trained weights; new parts init in __init__
        pass

    def query_inputs(self, queries: list[str]) -> dict[str, torch.Tensor]:
        return dict(self.tokenizer(queries, padding=True, truncation=True, max_length=self.nci.query_length,
                                   return_tensors="pt"))

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def decode(self, decoder_input_ids: torch.Tensor, memory: torch.Tensor, attention_mask: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [B, T, V], classifier inputs h_i A_i [B, T, d])`` of every step (teacher forcing)."""
        embeddings = self.embedding(decoder_input_ids)
        steps = decoder_input_ids.shape[1]
        hidden = self.decoder(embeddings, memory, tgt_mask=causal_mask(steps, memory.device), tgt_is_causal=True,
                              memory_key_padding_mask=attention_mask == 0)
        if self.adaptor is not None:
            mask = attention_mask.unsqueeze(-1).to(memory.dtype)
            query = (memory * mask).sum(1) / mask.sum(1).clamp(min=1)  # e: the query embedding
            hidden = self.adaptor(embeddings, query, hidden)
        return hidden @ self.embedding.weight.T, hidden

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, encoder_outputs=None, **unused):
        if encoder_outputs is None:
            memory = self.encode(input_ids, attention_mask)
        else:
            memory = encoder_outputs[0]
        if attention_mask is None:
            attention_mask = torch.ones(memory.shape[:2], dtype=torch.long, device=memory.device)
        logits, states = self.decode(decoder_input_ids, memory, attention_mask)
        return Seq2SeqLMOutput(logits=logits, decoder_hidden_states=(states,))  # states: the classifier inputs h_i A_i

    def prepare_inputs_for_generation(self, decoder_input_ids, encoder_outputs=None, attention_mask=None, **unused):
        # no key-value cache: the whole prefix is fed again at each step (identifiers are a few tokens)
        return {"decoder_input_ids": decoder_input_ids, "encoder_outputs": encoder_outputs, "attention_mask": attention_mask}
