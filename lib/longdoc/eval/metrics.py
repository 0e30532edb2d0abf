"""Ranking metrics with trec_eval's semantics (checked against pytrec_eval in the tests).

A run is ``{query id: {doc id: score}}``; qrels are ``{query id: {doc id: relevance}}``.
Conventions, as trec_eval: documents are ranked by score descending and ties by doc id descending;
a document is relevant when its judgement is >= 1; nDCG uses the graded judgement as linear gain
and log2(rank + 1) discount; averages are over the judged queries with at least one relevant
document, and such a query missing from the run scores 0 (trec_eval ``-c``).

Names: ``MRR@k`` (trec_eval ``recip_rank`` on the top k), ``R@k`` (``recall_k``: the share of the
relevant documents in the top k), ``Success@k`` (``success_k``: 1 when any relevant document is in
the top k; NCI's and DSI's "Recall@N" is this hit rate, not ``recall_k``), ``NDCG@k``
(``ndcg_cut_k``), ``RPrec`` (``Rprec``), ``MAP`` (``map``), ``MAP@k``.
"""

from __future__ import annotations

import math
import re

import numpy as np

from longdoc.types import Qrels, Run

_MEASURE = re.compile(r"^(MRR|R|Success|NDCG|MAP|RPrec)(?:@(\d+))?$")


def ranking(scores: dict[str, float]) -> list[str]:
    """trec_eval's order: score descending, ties broken by doc id descending (two stable sorts)."""
    by_doc = sorted(scores, reverse=True)
    return sorted(by_doc, key=lambda doc: -scores[doc])


def _parse(measure: str) -> tuple[str, int | None]:
    match = _MEASURE.match(measure)
    if not match:
        raise ValueError(f"unknown measure {measure!r}; use MRR@k, R@k, Success@k, NDCG@k, MAP, MAP@k or RPrec")
    name, cutoff = match.group(1), match.group(2)
    if name in ("MRR", "R", "Success", "NDCG") and cutoff is None:
        raise ValueError(f"measure {measure!r} needs a cutoff, e.g. {name}@100")
    if cutoff is not None and int(cutoff) < 1:
        raise ValueError(f"measure {measure!r}: the cut-off must be at least 1 (a ranking's top {cutoff} is empty)")
    return name, int(cutoff) if cutoff is not None else None


def _query_value(name: str, cutoff: int | None, ranked: list[str], judged: dict[str, int]) -> float:
    relevant = {d for d, r in judged.items() if r >= 1}
    top = ranked[:cutoff] if cutoff else ranked
    hits = np.array([doc in relevant for doc in top], dtype=bool)
    if name == "MRR":
        first = np.flatnonzero(hits)
        return 1.0 / (first[0] + 1) if first.size else 0.0
    if name == "R":
        return hits.sum() / len(relevant)
    if name == "Success":
        return float(hits.any())
    if name == "RPrec":
        return np.sum(hits[: len(relevant)]) / len(relevant)
    if name == "MAP":
        precision_at_hits = np.cumsum(hits)[hits] / (np.flatnonzero(hits) + 1)
        return precision_at_hits.sum() / len(relevant)
    if name == "NDCG":
        gains = np.array([max(judged.get(doc, 0), 0) for doc in top], dtype=float)
        discounts = 1.0 / np.log2(np.arange(2, len(top) + 2))
        ideal = np.sort(np.array([r for r in judged.values() if r > 0], dtype=float))[::-1][:cutoff]
        ideal_dcg = float(np.sum(ideal / np.log2(np.arange(2, len(ideal) + 2))))
        return float(np.sum(gains * discounts)) / ideal_dcg if ideal_dcg > 0 else 0.0
    raise AssertionError(name)


def per_query(run: Run, qrels: Qrels, measures: list[str]) -> dict[str, dict[str, float]]:
    """``{measure: {query id: value}}`` over the judged queries that have a relevant document."""
    parsed = {m: _parse(m) for m in measures}
    values: dict[str, dict[str, float]] = {m: {} for m in measures}
    for qid, judged in qrels.items():
        if not any(r >= 1 for r in judged.values()):
            continue
        scores = run.get(qid, {})
        bad = next((d for d, score in scores.items() if not math.isfinite(score)), None)
        if bad is not None:
            raise ValueError(f"run: query {qid!r}, document {bad!r} has score {scores[bad]!r} (not a finite number)")
        ranked = ranking(scores)
        for measure, (name, cutoff) in parsed.items():
            values[measure][qid] = float(_query_value(name, cutoff, ranked, judged))
    return values


def evaluate(run: Run, qrels: Qrels, measures: list[str]) -> dict[str, float]:
    """Mean of each measure over the judged queries (a query missing from the run counts 0); qrels
    without a query that has a relevant document are an error (no NaN means), and so is a run that
    shares no query with the qrels."""
    if not any(r >= 1 for judged in qrels.values() for r in judged.values()):
        raise ValueError("qrels: no query has a relevant document (an empty split?); nothing to evaluate")
    for measure in measures:  # a misspelt measure is named first
        _parse(measure)
    if not any(qid in qrels for qid in run):
        shown = ", ".join(repr(q) for q in list(run)[:3]) or "none"
        raise ValueError(
            f"run: none of its {len(run)} queries ({shown}) is judged in the qrels (a run of another split, e.g. dev "
            f"against test judgements?); it would score 0 everywhere"
        )
    values = per_query(run, qrels, measures)
    return {m: math.fsum(v.values()) / len(v) for m, v in values.items()}
