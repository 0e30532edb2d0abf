"""Vectorised masks for pre-training: whole-word MLM (BERT) and LMAE's per-row attention mask.

Both work on a batch of blocks ``[R, L]`` at once. Whole words are found from WordPiece's ``##``
continuation marks; a word is masked as a unit. The released Longtriever code drew the LMAE mask
with one Python call per row (O(L²) Python work per block); here it is one tensor draw per batch.

The random numbers come from a ``torch.Generator`` (batch-shaped draws) or from
:class:`DocumentDraws`, which draws each document's numbers from its own generator at the full block
width: a document's masks then do not depend on which documents share its batch, on their padding or
on the process that holds it, so pre-training in several processes equals one process holding the
global batch.
"""

from __future__ import annotations

import hashlib

import torch
from transformers import PreTrainedTokenizerBase

IGNORE = -100  # label of positions that are not predicted (torch's cross-entropy ignore_index)


def document_seed(*parts: int) -> int:
    """A 63-bit seed from integers (run seed, step, document number), well mixed."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class DocumentDraws:
    """Uniform draws made per document. Document ``k`` of a batch draws from a generator seeded with
    ``seeds[k]``; a draw of rows ``[R, L, ...]`` gives each document its blocks' rows drawn at the full
    width ``width`` in every trailing dimension and cut to the batch's, and a draw over documents
    ``[D, N]`` gives each its row drawn at ``blocks`` wide. Rows must be grouped by document, in order
    (as :meth:`~longdoc.models.biencoder.BiEncoder.doc_inputs` makes them)."""

    def __init__(self, seeds: list[int], owner: torch.Tensor, width: int, blocks: int):
        device = owner.device
        self.generators = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]
        counts = torch.bincount(owner, minlength=len(seeds))
        if len(counts) != len(seeds) or not bool((owner[1:] >= owner[:-1]).all()):
            raise ValueError("DocumentDraws needs the rows of each document together, in document order")
        self.counts, self.width, self.blocks, self.device = counts.tolist(), width, blocks, device

    def _draw(self, generator, shape, high):
        if high is None:
            return torch.rand(shape, generator=generator, device=self.device)
        return torch.randint(high, shape, generator=generator, device=self.device)

    def rows(self, shape: tuple[int, ...], high: int | None = None) -> torch.Tensor:
        """``[R, *shape[1:]]`` uniform in [0, 1) (or integers below ``high``), row by row of each document."""
        if any(size > self.width for size in shape[1:]):
            raise ValueError(f"a draw of shape {tuple(shape)} is wider than the blocks ({self.width})")
        cut = (slice(None), *(slice(0, size) for size in shape[1:]))
        full = (self.width,) * (len(shape) - 1)
        parts = [self._draw(g, (n, *full), high)[cut] for g, n in zip(self.generators, self.counts)]
        return torch.cat(parts)

    def documents(self, shape: tuple[int, int]) -> torch.Tensor:
        """``[D, N]`` uniform in [0, 1), one row per document drawn ``blocks`` wide and cut to ``N``."""
        if shape[1] > self.blocks:
            raise ValueError(f"a draw over {shape[1]} blocks is wider than the documents' {self.blocks}")
        return torch.stack([self._draw(g, (self.blocks,), None)[: shape[1]] for g in self.generators])


def uniform_rows(generator, shape: tuple[int, ...], device, high: int | None = None) -> torch.Tensor:
    """``shape`` uniform draws (integers below ``high`` when given) from a ``torch.Generator`` (or
    torch's default) or, per document, from :class:`DocumentDraws`."""
    if isinstance(generator, DocumentDraws):
        return generator.rows(shape, high)
    if high is None:
        return torch.rand(shape, generator=generator, device=device)
    return torch.randint(high, shape, generator=generator, device=device)


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
    generator: torch.Generator | DocumentDraws | None = None,
):
    """BERT's MLM corruption on whole words: each word is chosen with probability ``ratio``; a chosen
    token becomes [MASK] (80%), a random token (10%) or stays (10%). Returns ``(inputs, labels)``."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"mlm ratio must be in [0, 1], got {ratio}")
    device = input_ids.device
    draw = uniform_rows(generator, input_ids.shape, device)  # one draw per word slot
    chosen = (draw.gather(-1, words.clamp(min=0)) < ratio) & maskable
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE))
    action = uniform_rows(generator, input_ids.shape, device)
    random_ids = uniform_rows(generator, input_ids.shape, device, high=vocab_size)
    inputs = torch.where(chosen & (action < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    return inputs, labels


def lmae_attention_mask(
    words: torch.Tensor,
    maskable: torch.Tensor,
    attention_mask: torch.Tensor,
    ratio: float,
    generator: torch.Generator | DocumentDraws | None = None,
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
    draw = uniform_rows(generator, (rows, length, length), words.device)  # [row, query, word]
    hidden = draw.gather(-1, words.clamp(min=0)[:, None, :].expand(rows, length, length)) < ratio
    hidden = hidden & maskable[:, None, :]
    hidden = hidden | torch.eye(length, dtype=torch.bool, device=words.device)
    keep_tokens = ~hidden & attention_mask.bool()[:, None, :]
    fixed = torch.ones((rows, length, 2), dtype=torch.bool, device=words.device)  # s_d and c̃_i
    return torch.cat([fixed, keep_tokens[:, :, 1:]], dim=-1)
