"""NCI's semantic document identifiers (section 3.1, Algorithm 1) and their tokens.

Hierarchical k-means: the documents' embeddings are clustered into ``k`` groups; a group of at most
``c`` documents gives each of them its position in the group as the last digit, a larger group is
clustered again. A document's identifier is the path of cluster numbers from the root plus its
position in its leaf, so every identifier ends in a leaf digit and no identifier is a prefix of
another. Differences from the released code, which (notes/upstream-implementations.md) gave
documents of singleton clusters no leaf digit (identifiers of varying form) and recursed forever on
more than ``c`` identical embeddings: here every leaf document gets its digit, and a group that
k-means cannot split (identical embeddings) is cut into ``k`` parts in document order.

Each level runs scikit-learn's ``KMeans`` (k-means++, 3 initialisations; the paper: scikit-learn's
default, the released code ``MiniBatchKMeans`` at the top and 100 initialisations below).
``random_ids`` gives a balanced tree of random identifiers (the decoding benchmark's corpus); the
"w/o semantic id" ablation instead deals the semantic identifiers to the documents at random
(:func:`longdoc.experiments.families.generative.document_identifiers`), keeping the tree's shape. Identifier tokens are (position, value) pairs, so the same digit at different depths
is a different token (:class:`IdTokenizer`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans


def _split(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Cluster labels 0..k'-1 (k' <= k, numbered by first appearance) of ``vectors``; falls back to k
    parts in order when k-means cannot separate them."""
    distinct = len(np.unique(vectors, axis=0))
    labels = (
        KMeans(n_clusters=min(k, distinct), n_init=3, random_state=seed).fit_predict(vectors)
        if distinct >= 2
        else np.zeros(len(vectors), dtype=int)
    )
    if len(np.unique(labels)) < 2:
        labels = np.arange(len(vectors)) * k // len(vectors)
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(np.argsort(first))  # renumber clusters by first appearance: deterministic digits
    return order[np.searchsorted(np.unique(labels), labels)]


def hierarchical_ids(embeddings: np.ndarray, k: int = 30, c: int = 30, seed: int = 0) -> list[tuple[int, ...]]:
    """Algorithm 1: one identifier (a tuple of digits) per row of ``embeddings``."""
    if k < 2 or c < 1:
        raise ValueError(f"k must be >= 2 and c >= 1, got k={k}, c={c}")
    embeddings = np.asarray(embeddings, dtype=np.float32)
    ids: list[tuple[int, ...] | None] = [None] * len(embeddings)

    def assign(members: np.ndarray, prefix: tuple[int, ...]) -> None:
        if len(members) <= c:
            for position, member in enumerate(members):
                ids[member] = prefix + (position,)
            return
        labels = _split(embeddings[members], k, seed + len(prefix))
        for cluster in range(labels.max() + 1):
            assign(members[labels == cluster], prefix + (cluster,))

    assign(np.arange(len(embeddings)), ())
    return ids  # type: ignore[return-value]


def random_ids(n: int, k: int = 30, c: int = 30, seed: int = 0) -> list[tuple[int, ...]]:
    """Random identifiers of the same construction (the ablation "w/o semantic id"): documents in a
    random order, cut into ``k`` equal parts per level until a part holds at most ``c``."""
    order = np.random.default_rng(seed).permutation(n)
    ids: list[tuple[int, ...] | None] = [None] * n

    def assign(members: np.ndarray, prefix: tuple[int, ...]) -> None:
        if len(members) <= c:
            for position, member in enumerate(members):
                ids[member] = prefix + (position,)
            return
        for part, chunk in enumerate(np.array_split(members, k)):
            if len(chunk):
                assign(chunk, prefix + (part,))

    assign(order, ())
    return ids  # type: ignore[return-value]


@dataclass(frozen=True)
class IdTokenizer:
    """Identifier digits as decoder tokens: digit ``v`` at depth ``i`` is token ``2 + i·base + v``
    (0 = padding / decoder start, 1 = end of identifier), the "(position, value)" vocabulary of
    section 3.3 and the released code. ``positional=False`` gives DSI's vocabulary instead: digit
    ``v`` is token ``2 + v`` at every depth."""

    base: int  # max(k, c): values per position
    depth: int  # the longest identifier
    positional: bool = True

    PAD = 0
    EOS = 1

    @classmethod
    def fit(cls, ids: list[tuple[int, ...]], positional: bool = True) -> IdTokenizer:
        return cls(max(max(i) for i in ids) + 1, max(map(len, ids)), positional)

    @property
    def vocab_size(self) -> int:
        return 2 + self.base * (self.depth if self.positional else 1)

    def _offset(self, step: int) -> int:
        return 2 + (step * self.base if self.positional else 0)

    def encode(self, identifier: tuple[int, ...]) -> list[int]:
        if len(identifier) > self.depth or any(not 0 <= v < self.base for v in identifier):
            raise ValueError(f"identifier {identifier} does not fit depth {self.depth} and base {self.base}")
        return [self._offset(i) + v for i, v in enumerate(identifier)] + [self.EOS]

    def decode(self, tokens: list[int]) -> tuple[int, ...]:
        digits = []
        for i, token in enumerate(tokens):
            if token == self.EOS:
                break
            value = token - self._offset(i)
            if not 0 <= value < self.base or i >= self.depth:
                raise ValueError(f"token {token} at step {i} is not a digit of position {i}")
            digits.append(value)
        return tuple(digits)

    def allowed_at(self, step: int) -> range:
        """The tokens of digits at ``step`` (a decoder step may emit only these, or EOS)."""
        return range(self._offset(step), self._offset(step) + self.base)

    def step_mask(self, steps: int) -> np.ndarray:
        """``[steps, vocab_size]`` booleans: the tokens each decoder step may emit, its position's digits
        (none past ``depth``) and EOS; the released code masks every other logit at each step."""
        mask = np.zeros((steps, self.vocab_size), dtype=bool)
        mask[:, self.EOS] = True
        for step in range(min(steps, self.depth)):
            mask[step, self.allowed_at(step).start : self.allowed_at(step).stop] = True
        return mask
