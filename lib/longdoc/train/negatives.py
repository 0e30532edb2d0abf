"""Hard negatives: the top of a BM25 run (DPR, "BM25 Neg") or of the model's own run (ANCE, STAR)."""

from __future__ import annotations

from longdoc.eval.metrics import Qrels, Run, ranking


def negatives_from_run(run: Run, qrels: Qrels, depth: int = 100, skip: int = 0) -> dict[str, list[str]]:
    """Per query, the non-relevant documents among the top ``depth`` of ``run`` (after skipping the
    first ``skip`` ranks, which RocketQA-style denoising uses), in rank order."""
    negatives = {}
    for qid, judged in qrels.items():
        relevant = {d for d, r in judged.items() if r > 0}
        ranked = [d for d in ranking(run.get(qid, {}))[skip:depth] if d not in relevant]
        negatives[qid] = ranked
    return negatives
