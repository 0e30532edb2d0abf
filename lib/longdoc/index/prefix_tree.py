"""The prefix tree of every valid identifier and the constraint it puts on beam search (NCI
Algorithm 2, section 3.4).

:class:`PrefixTree` holds the token sequences (each ending in EOS) of every document of the corpus.
The released code built its tree from the identifiers of the train and dev queries only, so a
document no training query points to could never be retrieved; here it is always the whole corpus.

:class:`PrefixConstraint` is a ``transformers`` ``LogitsProcessor``: at each step every beam may
extend its prefix only by one of the prefix's children in the tree (every other token gets −inf).
It finds the tree node of all beams at once (one vectorised lookup per decoded position) rather
than calling a Python function per beam (``prefix_allowed_tokens_fn``), which keeps constrained
decoding close to the cost of unconstrained decoding. A prefix that has left the tree (possible
only without the constraint) may emit only EOS, as in the released code.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import LogitsProcessor


class PrefixTree:
    """Nodes are numbered from 0 (the root, the decoder's start); ``child(node, token)`` is a table
    lookup over the sorted keys ``node · V + token``."""

    def __init__(self, sequences: list[list[int]], vocab_size: int, eos: int = 1):
        if not sequences:
            raise ValueError("a prefix tree needs at least one identifier")
        self.vocab_size, self.eos = vocab_size, eos
        children: dict[tuple[int, int], int] = {}
        self.leaves: dict[int, int] = {}  # node after EOS -> position of the sequence in ``sequences``
        for number, sequence in enumerate(sequences):
            if not sequence or sequence[-1] != eos or eos in sequence[:-1]:
                raise ValueError(f"identifier {number} ({sequence}) must end with EOS={eos} and hold it once")
            if any(not 0 <= t < vocab_size for t in sequence):
                raise ValueError(f"identifier {number} ({sequence}) has a token outside 0..{vocab_size - 1}")
            node = 0
            for token in sequence:
                node = children.setdefault((node, token), len(children) + 1)
            if node in self.leaves:
                raise ValueError(f"identifiers {self.leaves[node]} and {number} are the same sequence {sequence}")
            self.leaves[node] = number
        self.num_nodes = len(children) + 1
        keys = np.array([n * vocab_size + t for n, t in children], dtype=np.int64)
        values = np.array(list(children.values()), dtype=np.int64)
        order = np.argsort(keys)
        self.keys, self.values = torch.from_numpy(keys[order]), torch.from_numpy(values[order])
        allowed = torch.zeros(self.num_nodes + 1, vocab_size, dtype=torch.bool)  # the last row: off the tree
        for n, t in children:
            allowed[n, t] = True
        allowed[self.num_nodes, eos] = True
        self.allowed = allowed

    def __len__(self) -> int:
        return len(self.leaves)

    def nodes(self, prefixes: torch.Tensor) -> torch.Tensor:
        """The node of each row of ``prefixes`` [N, t] (column 0 is the start token, not a tree step);
        ``num_nodes`` for a prefix that left the tree."""
        off = self.num_nodes
        node = torch.zeros(len(prefixes), dtype=torch.long)
        keys, values = self.keys, self.values
        for column in range(1, prefixes.shape[1]):
            key = node * self.vocab_size + prefixes[:, column].cpu()
            where = torch.searchsorted(keys, key).clamp(max=len(keys) - 1)
            found = (keys[where] == key) & (node != off)
            node = torch.where(found, values[where], torch.full_like(node, off))
        return node

    def allowed_tokens(self, prefixes: torch.Tensor) -> torch.Tensor:
        """[N, V] mask of the tokens each prefix may take next."""
        return self.allowed[self.nodes(prefixes)]

    def sequence_number(self, tokens: list[int]) -> int | None:
        """The position in ``sequences`` of a complete token sequence (without the start token), or None."""
        node = 0
        for token in tokens:
            key = node * self.vocab_size + token
            where = int(torch.searchsorted(self.keys, torch.tensor(key)).clamp(max=len(self.keys) - 1))
            if int(self.keys[where]) != key:
                return None
            node = int(self.values[where])
        return self.leaves.get(node)


class PrefixConstraint(LogitsProcessor):
    """Algorithm 2's constraint as a logits processor: tokens that leave the tree get −inf."""

    def __init__(self, tree: PrefixTree):
        self.tree = tree

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        allowed = self.tree.allowed_tokens(input_ids).to(scores.device)
        return scores.masked_fill(~allowed[:, : scores.shape[1]], float("-inf"))
