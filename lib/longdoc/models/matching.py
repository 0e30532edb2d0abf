"""The document-matching family: two towers with shared weights over any document encoder.

Matching is symmetric: both documents of a pair go through the same encoder and Sim(d_s, d_c) is the
cosine of their vectors (SMITH section 3.2; MatchBERT 3.2.1). Any :class:`~longdoc.models.biencoder.BiEncoder`
is a tower: MatchBERT is FirstP over the first N tokens (its last-layer [CLS] vector; the paper takes
BERT's pooled output, tanh(W [CLS]), which the packaged backbone does not ship), SMITH, HAN and Longtriever give one vector per document, and multi-vector encoders (MaxP,
SeDR) one per segment, where the pair's similarity is the largest cosine over pairs of their
vectors (MaxP's rule applied to both sides; our choice, the SeDR paper has no document pairs).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from longdoc.models.biencoder import BiEncoder, DocBatch, scatter_slots


def pair_cosines(a: torch.Tensor, a_mask: torch.Tensor, b: torch.Tensor, b_mask: torch.Tensor) -> torch.Tensor:
    """``[P]``: for unit vectors ``a [P, S, d]`` and ``b [P, T, d]`` with masks, the largest cosine
    over real (s, t) pairs (the plain cosine for one vector each)."""
    scores = torch.einsum("psh,pth->pst", a, b)
    keep = a_mask[:, :, None] & b_mask[:, None, :]
    return scores.masked_fill(~keep, float("-inf")).flatten(1).amax(-1)


class SiameseMatcher(nn.Module):
    """``encoder`` as both towers of a siamese matcher."""

    def __init__(self, encoder: BiEncoder):
        super().__init__()
        self.encoder = encoder

    @property
    def name(self) -> str:
        return self.encoder.name

    def vectors(self, batch: DocBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Unit vectors ``[D, S, d]`` of a batch of documents and their mask ``[D, S]`` (fp32)."""
        encoder = self.encoder
        with encoder.autocast():
            vectors, owner, slot = encoder.document_vectors(batch)
        return scatter_slots(
            F.normalize(vectors.float(), dim=-1), owner, slot, batch.num_docs, encoder.slots_per_document(batch)
        )

    def forward(self, batch: DocBatch, sources: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cosines ``[P]`` of the pairs (``sources[p]``, ``targets[p]``), numbers of ``batch``'s documents."""
        docs, mask = self.vectors(batch)
        return pair_cosines(docs[sources], mask[sources], docs[targets], mask[targets])


def stored_pair_cosines(vectors: np.ndarray, owners: np.ndarray, sources: list[int], targets: list[int]) -> np.ndarray:
    """The cosines of pairs of documents (numbers into ``owners``' documents) from encoded corpus
    vectors ``[V, d]`` (normalised here), by the same rule as :func:`pair_cosines`."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
    order = np.argsort(owners, kind="stable")
    starts = np.searchsorted(owners[order], np.arange(owners.max() + 2))
    rows = {int(d): order[starts[d] : starts[d + 1]] for d in set(sources) | set(targets)}
    return np.array(
        [float((unit[rows[s]] @ unit[rows[t]].T).max()) for s, t in zip(sources, targets)], dtype=np.float32
    )
