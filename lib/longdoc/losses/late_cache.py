"""SeDR's Late-Cache Negative (Chen et al., section "Late-Cache Negative", eqs. 10-12).

After each training step the step's query, positive and hard-negative embeddings are detached and
queued (a FIFO of the last ``size`` = C training instances). In the next steps:

- eq. 10: every current query also scores the cached documents {d̂+, d̂-} as negatives;
- eq. 11: every cached query q̂ adds a loss row against its cached positive d̂+, with the current
  documents and the other cached documents as negatives (its only gradient flows through the current
  documents, the cache being detached);
- eq. 12: the batch loss covers both kinds of rows. Eq. 12 writes a sum; like the released code we take
  the mean over the B + C rows, so that C = 0 is exactly the plain contrastive loss (mean over B).

Scores are the model's document scores, ``score(queries, documents, mask) -> [rows, documents]`` (the
model's :meth:`~longdoc.models.biencoder.BiEncoder.score`: for SeDR the max over a document's segment
vectors, eq. 9); the loss itself is pure tensor arithmetic. A document relevant to a row's query is masked out of
that row's negatives wherever it sits (current or cached; the release masks only current rows x
current columns). Under several processes the loss is given the gathered batch, so every process
caches the same global batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from longdoc.losses.contrastive import contrastive_loss

Score = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
TENSORS = ("queries", "positive", "documents", "mask", "numbers", "owner")  # the queue's tensors


class LateCacheNegatives:
    """The loss with its queue. ``size`` = C cached training instances (0: the plain contrastive loss).

    ``relevant(query_id)`` gives the document numbers judged relevant to a query (for the masks);
    ``score(queries, documents, mask)`` is the model's relevance (``[Q, D]``)."""

    def __init__(self, size: int, relevant: Callable[[str], set[int]], score: Score, temperature: float = 1.0):
        if size < 0:
            raise ValueError(f"cache size must be >= 0, got {size}")
        self.size, self.relevant, self.score, self.temperature = size, relevant, score, temperature
        self.clear()

    def clear(self) -> None:
        self.queries: torch.Tensor | None = None  # [Cq, H] (or [Cq, T, H]: several vectors per query)
        self.query_ids: list[str] = []
        self.positive: torch.Tensor | None = None  # [Cq] index of each cached query's positive among cached docs
        self.documents: torch.Tensor | None = None  # [Cd, S, H]
        self.mask: torch.Tensor | None = None  # [Cd, S] real segments
        self.numbers: torch.Tensor | None = None  # [Cd] document numbers
        self.owner: torch.Tensor | None = None  # [Cd] index of the cached query that brought the document

    def __len__(self) -> int:
        return len(self.query_ids)

    def __call__(
        self,
        queries: torch.Tensor,
        documents: torch.Tensor,
        mask: torch.Tensor,
        positive_index: torch.Tensor,
        query_ids: list[str],
        doc_numbers: torch.Tensor,
        doc_owner: torch.Tensor,
    ) -> torch.Tensor:
        """The loss of one step (``queries [B, H]``, ``documents [D, S, H]`` with ``mask [D, S]``,
        ``positive_index [B]`` into D, ``doc_numbers [D]``, ``doc_owner [D]`` = the query each document
        was drawn for), then the step's instances join the queue."""
        self.to(documents.device)  # a queue restored from a checkpoint comes back on the CPU
        loss = self.loss(queries, documents, mask, positive_index, query_ids, doc_numbers)
        if self.size:
            self.enqueue(queries, documents, mask, positive_index, query_ids, doc_numbers, doc_owner)
        return loss

    def loss(self, queries, documents, mask, positive_index, query_ids, doc_numbers) -> torch.Tensor:
        scores = self.score(queries, documents, mask)  # [B, D]
        if not len(self):
            return contrastive_loss(
                scores, positive_index, self._relevance_mask(query_ids, doc_numbers), self.temperature
            )
        cached_docs = self.score(queries, self.documents, self.mask)  # [B, Cd] (eq. 10)
        cached_rows = torch.cat(
            [self.score(self.queries, documents, mask), self.score(self.queries, self.documents, self.mask)], 1
        )
        scores = torch.cat([torch.cat([scores, cached_docs], 1), cached_rows.to(scores.dtype)], 0)  # [B + Cq, D + Cd]
        labels = torch.cat([positive_index, self.positive.to(positive_index.device) + documents.shape[0]])
        all_numbers = torch.cat([doc_numbers.to(self.numbers.device), self.numbers])
        fn_mask = self._relevance_mask(list(query_ids) + self.query_ids, all_numbers).to(scores.device)
        return contrastive_loss(scores, labels, fn_mask, self.temperature)

    def _relevance_mask(self, query_ids: list[str], doc_numbers: torch.Tensor) -> torch.Tensor:
        """``[rows, columns]``: True where the column's document is relevant to the row's query (the
        label column itself is kept by :func:`contrastive_loss`)."""
        numbers = doc_numbers.tolist()
        return torch.tensor(
            [[n in self.relevant(q) for n in numbers] for q in query_ids], dtype=torch.bool, device=doc_numbers.device
        )

    @torch.no_grad()
    def enqueue(self, queries, documents, mask, positive_index, query_ids, doc_numbers, doc_owner) -> None:
        """Append the step's instances (detached) and keep the newest ``size`` of them, each with its
        positive and hard negatives."""
        offset = 0 if self.documents is None else self.documents.shape[0]
        base = len(self)
        parts = {
            "queries": queries.detach(),
            "documents": documents.detach(),
            "mask": mask,
            "numbers": doc_numbers.to(documents.device),
            "owner": doc_owner.to(documents.device) + base,
            "positive": positive_index.to(documents.device) + offset,
        }
        if self.documents is not None and documents.shape[1:] != self.documents.shape[1:]:
            raise ValueError(
                f"documents of {tuple(documents.shape[1:])} after {tuple(self.documents.shape[1:])}: pad every "
                "step's documents to one number of vectors (the training loop pads to the model's max_vectors)"
            )
        for name, value in parts.items():
            old = getattr(self, name)
            setattr(self, name, value if old is None else torch.cat([old, value]))
        self.query_ids = self.query_ids + list(query_ids)
        drop = len(self) - self.size
        if drop > 0:
            keep_docs = self.owner >= drop
            remap = torch.cumsum(keep_docs.long(), 0) - 1  # old document index -> new
            self.positive = remap[self.positive[drop:]]
            self.queries, self.query_ids = self.queries[drop:], self.query_ids[drop:]
            self.documents, self.mask = self.documents[keep_docs], self.mask[keep_docs]
            self.numbers, self.owner = self.numbers[keep_docs], self.owner[keep_docs] - drop

    def to(self, device: torch.device | str) -> LateCacheNegatives:
        """The queue's tensors on ``device`` (no copy where they are already there)."""
        for name in TENSORS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.to(device))
        return self

    def state_dict(self) -> dict:
        """The queue (saved with a training state, so a resumed run keeps its cache)."""
        return {
            name: getattr(self, name)
            for name in ("queries", "query_ids", "positive", "documents", "mask", "numbers", "owner")
        }

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)
