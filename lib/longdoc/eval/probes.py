"""The in-batch probe: how far apart a model's document vectors are *before* fine-tuning.

``size`` queries (each with its own relevant document) are scored against the relevant documents of
all of them, as in one large training batch (eq. 8 of Longtriever, without hard negatives):
accuracy = share of queries whose own document scores highest (chance: 1 / size), loss = the
contrastive loss on that batch, cosine = mean cosine between different documents' vectors (near 1:
every document gets almost the same vector, so fine-tuning starts from no signal). Run it on dev
queries; it tells whether a start point (the backbone, a pre-trained checkpoint) is informative.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from longdoc.models.biencoder import BiEncoder, scatter_slots
from longdoc.text.segments import SegmentedCorpus


def probe_pairs(
    queries: dict[str, str], qrels: dict, corpus: SegmentedCorpus, size: int
) -> tuple[list[str], list[int]]:
    """The first ``size`` queries (sorted ids) with a relevant document in ``corpus`` that no earlier
    query has taken (so that each column has exactly one owner), and those documents' numbers."""
    index = {d: i for i, d in enumerate(corpus.doc_ids)}
    chosen, taken = [], set()
    for qid in sorted(queries):
        relevant = sorted(index[d] for d, r in qrels.get(qid, {}).items() if r > 0 and d in index)
        free = [d for d in relevant if d not in taken]
        if free:
            chosen.append((qid, free[0]))
            taken.add(free[0])
        if len(chosen) == size:
            break
    return [q for q, _ in chosen], [d for _, d in chosen]


@torch.no_grad()
def in_batch_probe(
    model: BiEncoder,
    corpus: SegmentedCorpus,
    queries: dict[str, str],
    qrels: dict,
    size: int = 128,
    batch_size: int = 32,
) -> dict:
    qids, numbers = probe_pairs(queries, qrels, corpus, size)
    if len(qids) < 2:
        raise ValueError(f"the probe needs at least 2 queries with distinct relevant documents, found {len(qids)}")
    model.eval()
    device = next(model.parameters()).device
    query_vectors = torch.from_numpy(model.encode_queries([queries[q] for q in qids], batch_size)).to(device)
    scores, pooled = [], []
    for start in range(0, len(numbers), batch_size):
        batch = model.doc_inputs([corpus.segments[i] for i in numbers[start : start + batch_size]]).to(device)
        with model.autocast():
            vectors, owner, slot = model.document_vectors(batch)
        docs, mask = scatter_slots(vectors.float(), owner, slot, batch.num_docs, model.slots_per_document(batch))
        scores.append(model.score(query_vectors, docs, mask))
        pooled.append(docs.sum(1))  # multi-vector documents: the sum of their vectors (padded slots are zero)
    scores = torch.cat(scores, 1)
    targets = torch.arange(len(qids), device=device)
    unit = F.normalize(torch.cat(pooled), dim=-1)
    n = len(qids)
    return {
        "queries": n,
        "accuracy": (scores.argmax(1) == targets).float().mean().item(),
        "loss": F.cross_entropy(scores, targets).item(),
        "cosine": ((unit @ unit.T).sum().item() - n) / (n * (n - 1)),
    }
