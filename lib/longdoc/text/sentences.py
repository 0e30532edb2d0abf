"""Sentences and SMITH's greedy sentence filling (section 4.1.1, Figure 3).

Sentences come from Bling Fire's sentence breaker (offline, no data download) run on each line of a
document: the corpora here render one paragraph per line (man pages, BEIR passages joined by
newlines), so a heading or a line of code is never glued to the next paragraph's first sentence.

Greedy sentence filling packs whole sentences into blocks of at most ``content_length`` WordPiece
tokens (the block length L_s minus its [CLS] and [SEP]): a sentence that does not fit in the current
block starts the next one. A sentence longer than a whole block is cut; the paper truncates it "to fit
in the current block" and the released code drops the overflow, whereas here its rest continues in
the following blocks, so no text of the document is lost before ``max_blocks``.
"""

from __future__ import annotations

import blingfire
from transformers import PreTrainedTokenizerBase


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, line by line (empty lines give none)."""
    sentences = []
    for line in text.splitlines():
        if line.strip():
            sentences.extend(s for s in blingfire.text_to_sentences(line.strip()).split("\n") if s.strip())
    return sentences


def greedy_fill(sentences: list[list[int]], content_length: int, max_blocks: int = 0) -> list[list[int]]:
    """Token ids of sentences packed whole into blocks of at most ``content_length`` tokens.

    A sentence joins the current block when it fits; otherwise it opens a new block. A sentence longer
    than ``content_length`` opens a new block (unless the current one is empty), fills it, and its rest
    continues in the next blocks, where the following sentences may join it. ``max_blocks`` > 0 keeps
    the first blocks only. A document without tokens gives one empty block.
    """
    if content_length < 1:
        raise ValueError(f"content_length must be >= 1, got {content_length}")
    if max_blocks < 0:
        raise ValueError(f"max_blocks must be >= 0, got {max_blocks}")
    blocks: list[list[int]] = []
    current: list[int] = []
    for sentence in sentences:
        if not sentence:
            continue
        if len(current) + len(sentence) > content_length and current:
            blocks.append(current)
            current = []
        while len(sentence) > content_length:  # only reached with an empty current block
            blocks.append(list(sentence[:content_length]))
            sentence = sentence[content_length:]
        current = current + list(sentence)
        if max_blocks and len(blocks) >= max_blocks:
            break
    if current:
        blocks.append(current)
    blocks = blocks[:max_blocks] if max_blocks else blocks
    return blocks or [[]]


def sentence_blocks(
    tokenizer: PreTrainedTokenizerBase, texts: list[str], block_length: int, max_blocks: int = 0, batch_size: int = 64
) -> list[list[list[int]]]:
    """Every document as greedy-filled sentence blocks of content token ids; a block becomes
    ``[CLS] content [SEP]`` of at most ``block_length`` tokens when encoded (L_s = ``block_length``)."""
    if block_length < 3:
        raise ValueError(f"block_length must be >= 3 (room for [CLS] and [SEP]), got {block_length}")
    documents = []
    for start in range(0, len(texts), batch_size):
        split = [split_sentences(text) for text in texts[start : start + batch_size]]
        flat = [s for sentences in split for s in sentences]
        ids = tokenizer(flat, add_special_tokens=False)["input_ids"] if flat else []
        position = 0
        for sentences in split:
            tokens, position = ids[position : position + len(sentences)], position + len(sentences)
            documents.append(greedy_fill(tokens, block_length - 2, max_blocks))
    return documents
