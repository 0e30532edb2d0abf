"""What a ranking without skill scores: the expected measure of a uniformly random ranking of the
whole corpus, per query from its number of relevant documents, averaged over queries as the
measures are (pytrec_eval semantics: a query's measure is 0 when it retrieves no relevant document).

A trained model below this has learned nothing a verdict could rest on
(:func:`longdoc.experiments.preconditions.above_chance`).
"""

from __future__ import annotations

import math
import re


def first_relevant_distribution(documents: int, relevant: int, depth: int) -> list[float]:
    """P(the first relevant document is at rank r), r = 1 .. ``depth``, in a random ranking of
    ``documents`` holding ``relevant`` relevant ones."""
    if not 0 < relevant <= documents:
        raise ValueError(f"relevant must be in 1..{documents} (the corpus size), got {relevant}")
    probabilities, none_yet = [], 1.0  # none_yet: P(ranks 1 .. r-1 are all non-relevant)
    for r in range(1, min(depth, documents - relevant + 1) + 1):
        remaining = documents - r + 1
        probabilities.append(none_yet * relevant / remaining)
        none_yet *= (remaining - relevant) / remaining
    return probabilities


def expected_reciprocal_rank(documents: int, relevant: int, depth: int) -> float:
    """E[RR@depth] of a random ranking."""
    return sum(p / r for r, p in enumerate(first_relevant_distribution(documents, relevant, depth), start=1))


def expected_success(documents: int, relevant: int, depth: int) -> float:
    """E[Success@depth]: the chance that a relevant document is in the first ``depth``."""
    return sum(first_relevant_distribution(documents, relevant, depth))


def expected_recall(documents: int, relevant: int, depth: int) -> float:
    """E[R@depth]: each document is in the first ``depth`` with probability depth / documents."""
    return min(depth, documents) / documents


CHANCE_MEASURES = {"MRR": expected_reciprocal_rank, "Success": expected_success, "R": expected_recall}


def random_ranking_value(measure: str, documents: int, relevant_per_query: list[int]) -> float | None:
    """The mean over queries of ``measure`` ("MRR@k", "Success@k" or "R@k") under a random ranking of
    ``documents`` documents; None for a measure this module does not know (NDCG, MAP, ...)."""
    match = re.fullmatch(r"(MRR|Success|R)@(\d+)", measure)
    if match is None:
        return None
    if not relevant_per_query:
        raise ValueError(f"{measure}: no query with a relevant document")
    expectation, depth = CHANCE_MEASURES[match.group(1)], int(match.group(2))
    return math.fsum(expectation(documents, r, depth) for r in relevant_per_query) / len(relevant_per_query)
