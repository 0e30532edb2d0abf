"""The Neural Corpus Indexer's sequence-to-sequence model (NCI section 3.3): a query encoder and the
prefix-aware weight-adaptive (PAWA) decoder that generates a document's semantic identifier.

- **Encoder**: the backbone (BERT-style, or T5's encoder when the backbone is T5), as in the paper,
  which initialises the encoder from T5 and the decoder at random.
- **Decoder** (eq. 2): ``decoder_layers`` (M2) pre-norm transformer layers with causal self-attention
  over the identifier tokens and cross-attention to the query's token states (random init, as the
  paper's decoder). Its token embedding is
  its own (the identifier vocabulary, not the encoder's) and is tied to the classifier ``W`` (eq. 3).
  The tokens are (position, value) pairs, which carry the step, so NCI adds no position embedding;
  over DSI's shared digit vocabulary ``step_embedding`` adds a learned one (T5's decoder, which DSI
  used, has relative position biases).
- **PAWA** (eq. 4): ``adaptor_layers`` (M3) causal transformer layers read ``[e, r_1, ..., r_{i-1}]``,
  ``e`` the query embedding (mean of the encoder states) in the start token's place, and give step
  ``i`` the adapted classifier ``W_ada^i = A_i W`` with ``A_i = I + U_i V_iᵀ`` (rank ``adaptor_rank``,
  ``U_i, V_i`` projected from the adaptor's state). So ``logits_i = (h_i + (h_i U_i) V_iᵀ) W`` is
  computed for all steps at once under teacher forcing. Differences from the released code: it
  projected d → d·V (a full per-step weight, 178M parameters at T5-base) and fed the adaptor a learned
  constant instead of the query; here ``A_i`` is low-rank (2·d·d·r parameters: 2.4M at d = 384,
  r = 8) and reads ``e`` as the paper says. ``V_i``'s projection starts at zero, so a new PAWA decoder
  computes exactly the plain decoder's logits; ``adaptor_layers = 0`` is the plain decoder (the "w/o
  PAWA" row, DSI). The low-rank term is scaled by ``1/√(d·r)`` (:attr:`PrefixAdaptor.scale`; the paper
  states no scale): unscaled, ``h_i U_i`` has entries of about 0.58·|h_i| and AdamW made
  ``|h_i A_i − h_i|`` as large as ``|h_i|`` within a few dozen steps at d = 384, which slowed learning
  below the plain decoder's (``python -m longdoc.bench.nci_pawa`` measures both).

:class:`NciModel` is a ``transformers`` ``PreTrainedModel`` with ``GenerationMixin``, so decoding is
``transformers``' own beam search (:mod:`longdoc.index.nci_retriever`). It keeps a key-value cache
(:class:`DecodingCache`): each step runs the new token only, and the query's cross-attention keys and
values are projected once per search. The released code decoded without a cache, feeding the whole
prefix again at every step and projecting the query states again in every layer and step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils import ModelOutput


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
    encoder_layers: int = 0  # > 0: keep the backbone's first layers only (model capacity, Figure 3); 0: all
    step_embedding: bool = False  # add a learned embedding of the decoding step (DSI's shared digit tokens)

    def __post_init__(self) -> None:
        if self.vocab_size < 3 or self.max_id_length < 2:
            raise ValueError(f"vocab_size >= 3 and max_id_length >= 2 are required (from the IdTokenizer): {self}")
        if self.decoder_layers < 1 or self.adaptor_layers < 0 or self.adaptor_rank < 1 or self.encoder_layers < 0:
            raise ValueError(
                f"decoder_layers >= 1, adaptor_layers >= 0, adaptor_rank >= 1 and encoder_layers >= 0 are "
                f"required: {self}"
            )


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


def keep_first_layers(encoder: nn.Module, layers: int) -> None:
    """Cut a BERT-style (``encoder.layer``) or T5 (``block``) encoder to its first ``layers`` layers."""
    stack = (
        encoder.encoder.layer
        if hasattr(encoder, "encoder") and hasattr(encoder.encoder, "layer")
        else encoder.encoder.block
    )
    if layers > len(stack):
        raise ValueError(f"encoder_layers={layers}: the backbone has {len(stack)} layers")
    del stack[layers:]
    for name in ("num_hidden_layers", "num_layers"):
        if hasattr(encoder.config, name):
            setattr(encoder.config, name, layers)


class Attention(nn.Module):
    """Multi-head attention through PyTorch's fused kernel; keys and values come projected, so a caller
    can keep them (the decoding cache, the query's projected token states)."""

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        if d % heads:
            raise ValueError(f"hidden size {d} is not divisible by {heads} heads")
        self.heads, self.dropout = heads, dropout
        self.query, self.key, self.value, self.out = (nn.Linear(d, d) for _ in range(4))

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], self.heads, -1).transpose(1, 2)

    def project(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._split(self.key(source)), self._split(self.value(source))

    def forward(
        self,
        x: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        causal: bool = False,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        attended = F.scaled_dot_product_attention(
            self._split(self.query(x)),
            keys,
            values,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=causal,
        )
        return self.out(attended.transpose(1, 2).flatten(2))


class Layer(nn.Module):
    """A pre-norm transformer layer: causal self-attention, cross-attention to the query's token states
    (decoder layers only), feed-forward; residual dropout."""

    def __init__(self, d: int, heads: int, feed_forward: int, dropout: float, cross: bool):
        super().__init__()
        self.self_norm, self.self_attention = nn.LayerNorm(d), Attention(d, heads, dropout)
        self.cross_norm, self.cross_attention = (
            (nn.LayerNorm(d), Attention(d, heads, dropout)) if cross else (None, None)
        )
        self.feed_norm = nn.LayerNorm(d)
        self.feed = nn.Sequential(
            nn.Linear(d, feed_forward), nn.GELU(), nn.Dropout(dropout), nn.Linear(feed_forward, d)
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, past: tuple | None, memory: tuple | None = None) -> tuple[torch.Tensor, tuple]:
        """``past``: this layer's cached self-attention (keys, values) of earlier steps, or None;
        ``memory``: the cross-attention's (keys, values, mask). Returns the states and the new cache."""
        normed = self.self_norm(x)
        keys, values = self.self_attention.project(normed)
        if past is not None:
            keys, values = torch.cat([past[0], keys], dim=2), torch.cat([past[1], values], dim=2)
        kept = (keys, values)
        x = x + self.drop(self.self_attention(normed, keys, values, causal=past is None and x.shape[1] > 1))
        if self.cross_attention is not None:
            memory_keys, memory_values, mask = memory
            x = x + self.drop(self.cross_attention(self.cross_norm(x), memory_keys, memory_values, mask=mask))
        return x + self.drop(self.feed(self.feed_norm(x))), kept


class DecodingCache:
    """The self-attention keys and values of every decoder and adaptor layer for the steps decoded so
    far, and the cross-attention's projected query states (computed once per search). Beam search
    reorders the former (:meth:`NciModel._reorder_cache`); the latter are the same for every beam of a
    query, and beams are only ever reordered within their query, so they stay."""

    def __init__(self, memory: list[tuple]):
        self.memory = memory
        self.layers: dict[str, tuple] = {}

    def get_seq_length(self, layer_idx: int = 0) -> int:
        first = next(iter(self.layers.values()), None)
        return 0 if first is None else first[0].shape[2]

    def reorder(self, beam_idx: torch.Tensor) -> DecodingCache:
        self.layers = {
            name: (k.index_select(0, beam_idx), v.index_select(0, beam_idx)) for name, (k, v) in self.layers.items()
        }
        return self


class PrefixAdaptor(nn.Module):
    """Eq. 4's AdaptiveDecoder: M3 causal layers over ``[e, r_1, ...]`` and the low-rank ``U_i, V_i``.

    ``scale`` (``1/√(d·r)``) multiplies ``(h U_i) V_iᵀ`` so that the adaptation grows at the same pace
    whatever d and r are (not in the paper; see the module docstring)."""

    def __init__(self, d: int, heads: int, feed_forward: int, layers: int, rank: int, dropout: float):
        super().__init__()
        self.layers = nn.ModuleList(Layer(d, heads, feed_forward, dropout, cross=False) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.to_u = nn.Linear(d, d * rank)
        self.to_v = nn.Linear(d, d * rank)
        nn.init.zeros_(self.to_v.weight)
        nn.init.zeros_(self.to_v.bias)
        self.rank = rank
        self.scale = (d * rank) ** -0.5

    def forward(self, inputs: torch.Tensor, hidden: torch.Tensor, cache: DecodingCache | None) -> torch.Tensor:
        """``h_i A_i`` for the given steps: ``inputs`` are the steps' adaptor inputs (``e`` first when
        the prefix starts here), ``hidden`` [B, T, d] the decoder states of the same steps."""
        states = inputs
        for number, layer in enumerate(self.layers):
            name = f"adaptor{number}"
            states, kept = layer(states, cache.layers.get(name) if cache is not None else None)
            if cache is not None:
                cache.layers[name] = kept
        states = self.norm(states)
        batch, steps, d = hidden.shape
        u = self.to_u(states).view(batch, steps, d, self.rank)
        v = self.to_v(states).view(batch, steps, d, self.rank)
        return hidden + self.scale * torch.einsum("btr,btdr->btd", torch.einsum("btd,btdr->btr", hidden, u), v)


@dataclass
class QueryStates(ModelOutput):
    """What the encoder gives generation: the query's token states and, stacked, every decoder layer's
    cross-attention keys and values of them ``[B, layers, 2, heads, S, d/heads]``, projected before
    beam search copies each query once per beam."""

    last_hidden_state: torch.Tensor | None = None
    memory_projections: torch.Tensor | None = None


class _GenerationEncoder:
    """``get_encoder()`` for ``generate``: the backbone, then the decoder's cross-attention projections."""

    def __init__(self, model: NciModel):
        self.model = model

    def forward(self, input_ids=None, attention_mask=None, **unused) -> QueryStates:
        states = self.model.encode(input_ids, attention_mask)
        projected = self.model.project_memory(states, attention_mask)
        return QueryStates(
            last_hidden_state=states,
            memory_projections=torch.stack([torch.stack([k, v], 1) for k, v, _ in projected], 1),
        )

    __call__ = forward


class NciModel(PreTrainedModel, GenerationMixin):
    config_class = NciGenerationConfig
    main_input_name = "input_ids"

    def __init__(self, config: NciGenerationConfig, encoder: nn.Module | None = None, tokenizer=None):
        super().__init__(config)
        self.nci = NciConfig(**config.nci)
        if encoder is None:
            encoder, tokenizer = load_query_encoder(self.nci.backbone)
        if self.nci.encoder_layers:
            keep_first_layers(encoder, self.nci.encoder_layers)
        self.encoder, self.tokenizer = encoder, tokenizer
        hidden = encoder.config.to_dict()
        d = hidden.get("hidden_size") or hidden["d_model"]
        heads = hidden.get("num_attention_heads") or hidden["num_heads"]
        feed_forward = hidden.get("intermediate_size") or hidden["d_ff"]
        self.embedding = nn.Embedding(self.nci.vocab_size, d)  # tied to the classifier W (eq. 3)
        nn.init.normal_(self.embedding.weight, std=d**-0.5)
        self.steps = nn.Embedding(self.nci.max_id_length, d) if self.nci.step_embedding else None
        self.decoder = nn.ModuleList(
            Layer(d, heads, feed_forward, self.nci.dropout, cross=True) for _ in range(self.nci.decoder_layers)
        )
        self.decoder_norm = nn.LayerNorm(d)
        self.adaptor = (
            PrefixAdaptor(d, heads, feed_forward, self.nci.adaptor_layers, self.nci.adaptor_rank, self.nci.dropout)
            if self.nci.adaptor_layers
            else None
        )

    @classmethod
    def build(cls, config: NciConfig, encoder: nn.Module | None = None, tokenizer=None) -> NciModel:
        return cls(NciGenerationConfig(nci=asdict(config)), encoder, tokenizer)

    @property
    def name(self) -> str:
        return "NCI" if self.adaptor is not None else "NCI w/o PAWA"

    def get_encoder(self):
        return _GenerationEncoder(self)

    def _init_weights(self, module):  # the encoder keeps its pre-trained weights; new parts init in __init__
        pass

    def query_inputs(self, queries: list[str]) -> dict[str, torch.Tensor]:
        return dict(
            self.tokenizer(
                queries, padding=True, truncation=True, max_length=self.nci.query_length, return_tensors="pt"
            )
        )

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def project_memory(self, memory: torch.Tensor, attention_mask: torch.Tensor) -> list[tuple]:
        """Each decoder layer's cross-attention (keys, values, mask) of the query's token states."""
        mask = (attention_mask != 0)[:, None, None, :]
        return [(*layer.cross_attention.project(memory), mask) for layer in self.decoder]

    def decoder_hidden(
        self, embeddings: torch.Tensor, memory: list[tuple], cache: DecodingCache | None = None
    ) -> torch.Tensor:
        """Eq. 2: the decoder states ``h`` of the given steps (after the earlier ones in ``cache``)."""
        hidden = embeddings
        for number, layer in enumerate(self.decoder):
            name = f"decoder{number}"
            hidden, kept = layer(hidden, cache.layers.get(name) if cache is not None else None, memory[number])
            if cache is not None:
                cache.layers[name] = kept
        return self.decoder_norm(hidden)

    def decode(
        self,
        decoder_input_ids: torch.Tensor,
        memory: torch.Tensor,
        attention_mask: torch.Tensor,
        cache: DecodingCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [B, T, V], classifier inputs h_i A_i [B, T, d], decoder states h_i [B, T, d])`` of the
        given steps: every step at once under teacher forcing, or the next step(s) after those in ``cache``."""
        first_step = cache is None or cache.get_seq_length() == 0
        projected = cache.memory if cache is not None else self.project_memory(memory, attention_mask)
        embeddings = self.embedding(decoder_input_ids)
        decoder_inputs = embeddings
        if self.steps is not None:
            offset = 0 if cache is None else cache.get_seq_length()
            positions = torch.arange(offset, offset + embeddings.shape[1], device=embeddings.device)
            decoder_inputs = embeddings + self.steps(positions.clamp(max=self.nci.max_id_length - 1))
        hidden = plain = self.decoder_hidden(decoder_inputs, projected, cache)
        if self.adaptor is not None:
            inputs = embeddings
            if first_step:  # e, the query embedding, in the start token's place
                mask = attention_mask.unsqueeze(-1).to(memory.dtype)
                query = (memory * mask).sum(1) / mask.sum(1).clamp(min=1)
                inputs = torch.cat([query[:, None], embeddings[:, 1:]], dim=1)
            hidden = self.adaptor(inputs, hidden, cache)
        return hidden @ self.embedding.weight.T, hidden, plain

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        decoder_input_ids=None,
        encoder_outputs=None,
        past_key_values: DecodingCache | None = None,
        use_cache: bool = False,
        **unused,
    ):
        memory = self.encode(input_ids, attention_mask) if encoder_outputs is None else encoder_outputs[0]
        if attention_mask is None:
            attention_mask = torch.ones(memory.shape[:2], dtype=torch.long, device=memory.device)
        cache = past_key_values
        if use_cache and cache is None:
            stacked = getattr(encoder_outputs, "memory_projections", None)
            mask = (attention_mask != 0)[:, None, None, :]
            cache = DecodingCache(
                self.project_memory(memory, attention_mask)
                if stacked is None
                else [(stacked[:, n, 0], stacked[:, n, 1], mask) for n in range(stacked.shape[1])]
            )
        logits, states, plain = self.decode(decoder_input_ids, memory, attention_mask, cache)
        return Seq2SeqLMOutput(
            logits=logits,
            decoder_hidden_states=(plain, states),  # the decoder states h_i, then the classifier inputs h_i A_i
            past_key_values=cache if use_cache else None,
        )

    def prepare_inputs_for_generation(
        self,
        decoder_input_ids,
        encoder_outputs=None,
        attention_mask=None,
        past_key_values=None,
        use_cache=True,
        **unused,
    ):
        if past_key_values is not None and past_key_values.get_seq_length() > 0:
            decoder_input_ids = decoder_input_ids[:, past_key_values.get_seq_length() :]
        return {
            "decoder_input_ids": decoder_input_ids,
            "encoder_outputs": encoder_outputs,
            "attention_mask": attention_mask,
            "past_key_values": past_key_values,
            "use_cache": use_cache,
        }

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the model makes its own cache (DecodingCache) on the first step

    def _reorder_cache(self, cache: DecodingCache, beam_idx: torch.Tensor) -> DecodingCache:
        return cache.reorder(beam_idx)
