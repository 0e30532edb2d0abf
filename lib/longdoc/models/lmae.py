"""Longtriever pre-training (section 3.2): MLM on the encoder plus the local masked auto-encoder.

- MLM (3.2.1): whole-word masking at ``mlm_ratio`` (0.3), predicted from the last token states h^(L).
- LMAE (3.2.2): one decoder layer per block i with queries ``H_i^Q = s_d + p_k`` (eq. 9) and keys/values
  ``H_i^K = [s_d, c̃_i, h⁰_1 .. h⁰_M]`` (the original, unmasked token embeddings), a random mask A per
  row at ``lmae_ratio`` (eq. 10–11, :func:`longdoc.text.masking.lmae_attention_mask`), and the
  cross-entropy of every original token through the shared prediction head ψ (eq. 12).
- Loss = MLM + LMAE (1:1, as released).

Positions p_k are block-local (0..M-1) like the encoder's, not document-global as eq. 9 writes:
BERT has 512 position embeddings and N·M exceeds them. The paper does not say how the decoder layer
starts; RetroMAE and the released Longtriever code initialise it randomly (``decoder_init="random"``,
the default), ``"copy"`` starts it as a copy of the backbone's last layer. The prediction head is
BERT's MLM head with decoder weights tied to the word embeddings; it loads pretrained weights when the
checkpoint has them (bert-base-uncased does, the packaged MiniLM does not: then
``PretrainConfig.head_warmup_steps`` trains it, and the LMAE decoder, with the encoder frozen first).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch import nn
from transformers import BertForMaskedLM
from transformers.models.bert.modeling_bert import BertLayer, BertOnlyMLMHead

from longdoc.distributed import token_mean
from longdoc.losses.masked_tokens import masked_token_sum
from longdoc.models.attention import attention_bias, layer_with_context
from longdoc.models.backbone import resolve_backbone
from longdoc.models.biencoder import DocBatch
from longdoc.models.longtriever import Longtriever
from longdoc.text.masking import IGNORE, candidates, continuation_table, lmae_attention_mask, whole_word_mlm, word_index


class LMAEDecoder(nn.Module):
    """A Transformer layer whose queries and keys/values come from different streams (eq. 10–11)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer  # an HF BertLayer: its projections, output and FFN are reused

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """``keep`` ``[R, L, L + 1]``: True where query row may attend to key column."""
        return layer_with_context(self.layer, queries, keys, attention_bias(keep, queries.dtype))


def prediction_head(encoder: Longtriever) -> tuple[BertOnlyMLMHead, bool]:
    """ψ, tied to the word embeddings; ``True`` when the checkpoint held trained head weights."""
    config = encoder.backbone.config
    head = BertOnlyMLMHead(config)
    head.apply(encoder.backbone._init_weights)
    pretrained = False
    try:
        masked_lm, info = BertForMaskedLM.from_pretrained(
            resolve_backbone(encoder.config.backbone), output_loading_info=True
        )
        if masked_lm.config.hidden_size == config.hidden_size and not any(
            k.startswith("cls.") for k in info["missing_keys"]
        ):
            head.load_state_dict(masked_lm.cls.state_dict())
            pretrained = True
    except (OSError, ValueError):
        pass
    head.predictions.decoder.weight = encoder.backbone.embeddings.word_embeddings.weight
    return head, pretrained


DECODER_INITS = ("random", "copy")


def decoder_layer(encoder: Longtriever, init: str) -> nn.Module:
    """The LMAE decoder's Transformer layer: random (RetroMAE, the released code) or a copy of the
    backbone's last layer."""
    if init not in DECODER_INITS:
        raise ValueError(f"decoder_init must be one of {DECODER_INITS}, got {init!r}")
    if init == "copy":
        return copy.deepcopy(encoder.backbone.encoder.layer[-1])
    layer = BertLayer(encoder.backbone.config)
    layer.apply(encoder.backbone._init_weights)
    return layer


class LongtrieverPretraining(nn.Module):
    """The encoder with ψ and the LMAE decoder; ``forward`` returns the losses of one batch.

    Build it inside :func:`longdoc.seeding.seeded`: ψ's transform (and a random decoder) are new
    parameters."""

    def __init__(
        self,
        encoder: Longtriever,
        mlm_ratio: float = 0.3,
        lmae_ratio: float = 0.5,
        lmae: bool = True,
        decoder_init: str = "random",
    ):
        super().__init__()
        if lmae and not encoder.doc_token:
            raise ValueError("LMAE reconstructs from s_d: it needs doc_token=True")
        self.encoder = encoder
        self.mlm_ratio, self.lmae_ratio, self.use_lmae = mlm_ratio, lmae_ratio, lmae
        self.head, self.head_pretrained = prediction_head(encoder)
        self.decoder = LMAEDecoder(decoder_layer(encoder, decoder_init)) if lmae else None
        tokenizer = encoder.tokenizer
        self.register_buffer("continuation", continuation_table(tokenizer), persistent=False)
        self.special_ids = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]

    def head_parameters(self) -> list[nn.Parameter]:
        """The parameters outside the encoder (ψ's transform and bias, the LMAE decoder); ψ's output
        weights are the encoder's word embeddings and are not among them."""
        encoder = {id(p) for p in self.encoder.parameters()}
        return [p for p in self.parameters() if id(p) not in encoder]

    def _predict(self, states: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Cross-entropy over the labelled positions only (the head is not run on the others): their
        mean, over every process's labelled positions under several (:func:`~longdoc.distributed.token_mean`)."""
        return token_mean(*masked_token_sum(self.head, states, labels))

    def forward(self, batch: DocBatch, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """``{"mlm", "lmae", "loss"}`` of one batch; the passes run at the encoder's precision, the
        cross-entropies in fp32."""
        with self.encoder.autocast():
            losses = self._losses(batch, generator)
        losses["loss"] = sum(losses.values())
        return losses

    def _losses(self, batch: DocBatch, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
        tokenizer, bert = self.encoder.tokenizer, self.encoder.backbone
        words = word_index(batch.input_ids, self.continuation)
        maskable = candidates(batch.input_ids, batch.attention_mask, self.special_ids)
        inputs, mlm_labels = whole_word_mlm(
            batch.input_ids, words, maskable, self.mlm_ratio, tokenizer.mask_token_id, len(tokenizer), generator
        )
        states = self.encoder.encode_blocks(replace(batch, input_ids=inputs))
        losses = {"mlm": self._predict(states.tokens, mlm_labels)}
        if self.use_lmae:
            length = batch.input_ids.shape[1]
            document = states.document[batch.owner]  # s_d for each block, [R, d]
            block = states.blocks[batch.owner, batch.position]  # c̃_i, [R, d]
            queries = document[:, None] + bert.embeddings.position_embeddings.weight[:length][None]
            original = bert.embeddings(input_ids=batch.input_ids)  # h⁰: unmasked token embeddings
            keys = torch.cat([document[:, None], block[:, None], original[:, 1:]], dim=1)
            keep = lmae_attention_mask(words, maskable, batch.attention_mask, self.lmae_ratio, generator)
            decoded = self.decoder(queries, keys, keep)
            labels = torch.where(maskable, batch.input_ids, torch.full_like(batch.input_ids, IGNORE))
            losses["lmae"] = self._predict(decoded, labels)
        return losses
