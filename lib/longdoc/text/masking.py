"""Vectorised masks for pre-training: whole-word MLM (BERT) and LMAE's per-row attention mask.

Both work on a batch of blocks ``[R, L]`` at once. Whole words are found from WordPiece's ``##``
continuation marks; a word is masked as a unit. The released Longtriever code drew the LMAE mask
with one Python call per row (O(L²) Python work per block); here it is one tensor draw per batch.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase

IGNORE = -100  # label of positions that are not predicted (torch's cross-entropy ignore_index)


def continuation_table(tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """``[vocab]`` booleans: the token continues the previous word (WordPiece ``##`` pieces)."""
    table = torch.zeros(len(tokenizer), dtype=torch.bool)
    for token, index in tokenizer.get_vocab().items():
        table[index] = token.startswith("##")
    return table


def word_index(input_ids: torch.Tensor, continuation: torch.Tensor) -> torch.Tensor:
    """``[R, L]`` index of the word each token belongs to (0-based within its row)."""
    starts = ~continuation.to(input_ids.device)[input_ids]
    return starts.long().cumsum(-1) - 1


def candidates(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_ids: list[int]) -> torch.Tensor:
    """``[R, L]`` positions that may be masked and predicted: real tokens other than [CLS]/[SEP]/[PAD]."""
    special = torch.isin(input_ids, torch.tensor(special_ids, device=input_ids.device))
    return attention_mask.bool() & ~special


def whole_word_mlm(
    input_ids: torch.Tensor,
    words: torch.Tensor,
    maskable: torch.Tensor,
    ratio: float,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
):
    """BERT's MLM corruption on whole words: each word is chosen with probability ``ratio``; a chosen
    token becomes [MASK] (80%), a random token (10%) or stays (10%). Returns ``(inputs, labels)``."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"mlm ratio must be in [0, 1], got {ratio}")
    device = input_ids.device
    draw = torch.rand(input_ids.shape, generator=generator, device=device)  # one draw per word slot
    chosen = (draw.gather(-1, words.clamp(min=0)) < ratio) & maskable
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE))
    action = torch.rand(input_ids.shape, generator=generator, device=device)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device)
    inputs = torch.where(chosen & (action < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    return inputs, labels


def lmae_attention_mask(
    words: torch.Tensor,
    maskable: torch.Tensor,
    attention_mask: torch.Tensor,
    ratio: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """LMAE's random mask A (eq. 10) as booleans ``[R, L, L + 1]`` (True = may be attended).

    Rows are the decoder's queries (block positions 0..L-1); columns are its keys
    ``[s_d, c̃_i, h⁰_1 .. h⁰_{L-1}]`` (eq. 9; token column j + 1 holds token j, the block's own
    [CLS] is replaced by c̃_i). For every row a fresh set of whole words is hidden with probability
    ``ratio``; a row never sees its own token; it always sees [DOC], the block state and [SEP], and never
    padding.
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"lmae ratio must be in [0, 1], got {ratio}")
    rows, length = words.shape
    draw = torch.rand((rows, length, length), generator=generator, device=words.device)  # [row, query, word]
    hidden = draw.gather(-1, words.clamp(min=0)[:, None, :].expand(rows, length, length)) < ratio
    hidden = hidden & maskable[:, None, :]
    hidden = hidden | torch.eye(length, dtype=torch.bool, device=words.device)
    keep_tokens = ~hidden & attention_mask.bool()[:, None, :]
    fixed = torch.ones((rows, length, 2), dtype=torch.bool, device=words.device)  # s_d and c̃_i
    return torch.cat([fixed, keep_tokens[:, :, 1:]], dim=-1)
