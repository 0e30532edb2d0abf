"""A backbone (BERT) layer whose queries and keys/values come from different streams.

Longtriever needs it twice: in the intra-block encoder every token of block i also attends to the
block's globally informed c̃_i (eq. 4–5), which is a key and value but never a query (its output would
be overwritten by the next dispatch), and in the LMAE decoder (eq. 10–11), whose queries are
``s_d + p_k`` and whose keys/values are ``[s_d, c̃_i, h⁰]``. The layer's own projections, output
block and feed-forward are used, and attention goes through the backbone's attention implementation
(``sdpa``: PyTorch's fused kernel; ``eager``: the materialised attention matrix).
"""

from __future__ import annotations

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward


def attention_bias(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[B, K]`` booleans (True = may be attended) → the ``[B, 1, 1, K]`` additive mask HF layers take;
    ``[B, Q, K]`` → ``[B, 1, Q, K]``."""
    bias = (~keep).to(dtype) * torch.finfo(dtype).min
    return bias[:, None, None, :] if keep.ndim == 2 else bias[:, None]


def attention_mix(
    attention, queries: torch.Tensor, keys: torch.Tensor, bias: torch.Tensor | None, projections=None
) -> torch.Tensor:
    """The multi-head attention of an HF ``BertSelfAttention`` before its output block, ``[B, Q, d]``:
    queries from ``queries`` ``[B, Q, d]``, keys/values from ``keys`` ``[B, K, d]``. ``projections``
    (modules with ``query``, ``key``, ``value``) replace the layer's own (Longformer's global ones)."""
    projections = projections or attention
    width = attention.attention_head_size

    def heads(x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:2], -1, width).transpose(1, 2)

    interface = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager_attention_forward)
    mixed, _ = interface(
        attention,
        heads(projections.query(queries)),
        heads(projections.key(keys)),
        heads(projections.value(keys)),
        bias,
        dropout=attention.dropout.p if attention.training else 0.0,
        scaling=attention.scaling,
    )
    return mixed.reshape(*queries.shape[:2], -1).contiguous()


def finish_layer(layer, mixed: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """The rest of the layer after attention: output block (with ``residual``) and feed-forward."""
    return layer.feed_forward_chunk(layer.attention.output(mixed, residual))


def layer_with_context(layer, queries: torch.Tensor, keys: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``layer`` (an HF ``BertLayer``) with queries from ``queries`` ``[B, Q, d]`` and keys/values
    from ``keys`` ``[B, K, d]``; the residual path is the queries' (as in the layer itself).
    ``bias`` is an additive mask broadcastable to ``[B, heads, Q, K]`` or None."""
    return finish_layer(layer, attention_mix(layer.attention.self, queries, keys, bias), queries)
