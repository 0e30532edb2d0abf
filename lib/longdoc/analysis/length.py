"""Retrieval quality by the length of the relevant document (SeDR Figure 4).

Each test query is placed by how many of the model's segments its relevant document fills (its length
in WordPiece tokens; the longest relevant document where a query has several): 1, 2, ..., and "≥ k"
for the k segments the models read, and each system's per-query score (averaged over its seeds) is
summarised per bucket with a 95% bootstrap interval over the bucket's queries.
A gain of one system over another per bucket uses :func:`longdoc.eval.significance.seed_query_bootstrap`
on the bucket's queries; whether the gain grows with length compares the longest and the shortest
bucket (queries of the two buckets are different, so they are resampled independently; seeds are
resampled as for every interval).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from longdoc.eval.significance import percentile_interval, seed_query_bootstrap


def relevant_lengths(qrels: dict[str, dict[str, int]], document_tokens: pd.Series) -> pd.Series:
    """Per query: the token count of its longest relevant document (``document_tokens``: per doc id)."""
    lengths = {}
    for qid, judged in qrels.items():
        relevant = [document_tokens[d] for d, grade in judged.items() if grade > 0 and d in document_tokens.index]
        if relevant:
            lengths[qid] = int(max(relevant))
    if not lengths:
        raise ValueError("no query has a relevant document with a known length")
    return pd.Series(lengths, name="tokens").sort_index()


def segment_buckets(lengths: pd.Series, segment_tokens: int, segments: int) -> pd.Series:
    """Per query: how many segments of ``segment_tokens`` content tokens its relevant document fills
    (SeDR Figure 4's question, at the model's own segment length): "1 segment" .. and "≥ ``segments``
    segments" (the model reads ``segments``; the rest of a longer document is cut). An ordered
    categorical: buckets keep their order in tables and plots."""
    if segment_tokens < 1 or segments < 1:
        raise ValueError(f"segment_tokens and segments must be >= 1, got {segment_tokens} and {segments}")
    labels = [f"{n} segment{'s' if n > 1 else ''}" for n in range(1, segments)] + [
        f"≥ {segments} segment{'s' if segments > 1 else ''}"
    ]
    filled = np.ceil(lengths.to_numpy() / segment_tokens).astype(int).clip(1, segments)
    codes = pd.Categorical([labels[n - 1] for n in filled], categories=labels, ordered=True)
    return pd.Series(codes, index=lengths.index, name="bucket")


def bucket_order(buckets: pd.Series) -> list:
    """The buckets that hold a query, shortest first."""
    present = set(buckets)
    return [b for b in buckets.cat.categories if b in present]


def seed_mean(per_seed: list[dict[str, float]]) -> pd.Series:
    """Per-query score averaged over seeds."""
    return pd.DataFrame(per_seed).mean(axis=0)


def _interval(values: np.ndarray, samples: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(samples, len(values)))].mean(axis=1)
    low, high = percentile_interval(means)
    return float(low), float(high)


def bucket_scores(
    per_query: dict[str, list[dict[str, float]]], buckets: pd.Series, samples: int = 10_000, seed: int = 0
) -> pd.DataFrame:
    """One row per (system, bucket): queries, mean score and its 95% bootstrap interval over queries.
    ``per_query``: system → one dict of per-query scores per seed."""
    order = bucket_order(buckets)
    rows = []
    for system, per_seed in per_query.items():
        scores = seed_mean(per_seed)
        for bucket in order:
            values = scores[buckets.index[buckets == bucket]].to_numpy()
            low, high = _interval(values, samples, seed)
            rows.append(
                {
                    "system": system,
                    "bucket": bucket,
                    "queries": len(values),
                    "mean": float(values.mean()),
                    "95% CI low": low,
                    "95% CI high": high,
                }
            )
    return pd.DataFrame(rows)


def bucket_gains(a: list[dict[str, float]], b: list[dict[str, float]], buckets: pd.Series) -> pd.DataFrame:
    """Per bucket: Δ = a − b with its 95% interval over the bucket's queries and both systems' seeds (a
    bucket of one query: its Δ, and no interval)."""
    rows = []
    for bucket in bucket_order(buckets):
        members = set(buckets.index[buckets == bucket])
        within_a = [{q: v for q, v in s.items() if q in members} for s in a]
        within_b = [{q: v for q, v in s.items() if q in members} for s in b]
        if len(members) < 2:
            delta = float(seed_mean(within_a).mean() - seed_mean(within_b).mean())
            stats = {"mean_difference": delta, "ci_low": float("nan"), "ci_high": float("nan")}
        else:
            stats = seed_query_bootstrap(within_a, within_b)
        rows.append(
            {
                "bucket": bucket,
                "queries": len(members),
                "Δ": stats["mean_difference"],
                "95% CI low": stats["ci_low"],
                "95% CI high": stats["ci_high"],
            }
        )
    return pd.DataFrame(rows)


def gain_growth(
    a: list[dict[str, float]], b: list[dict[str, float]], buckets: pd.Series, samples: int = 10_000, seed: int = 0
) -> dict[str, float]:
    """(a − b on the longest bucket) − (a − b on the shortest), seed-averaged per query, with a 95%
    interval over queries and seeds: each resample draws both systems' seeds with replacement (as
    :func:`~longdoc.eval.significance.seed_query_bootstrap`) and each bucket's queries independently."""
    order = bucket_order(buckets)
    if len(order) < 2:
        raise ValueError("gain growth needs at least two length buckets")
    gain = seed_mean(a) - seed_mean(b)
    short_ids, long_ids = buckets.index[buckets == order[0]], buckets.index[buckets == order[-1]]
    short, long = gain[short_ids].to_numpy(), gain[long_ids].to_numpy()
    columns = pd.DataFrame(a).columns
    x, y = pd.DataFrame(a)[columns].to_numpy(), pd.DataFrame(b)[columns].to_numpy()  # [seeds, queries]
    rng = np.random.default_rng(seed)
    weights_x = rng.multinomial(len(x), np.full(len(x), 1 / len(x)), size=samples) / len(x)
    weights_y = rng.multinomial(len(y), np.full(len(y), 1 / len(y)), size=samples) / len(y)
    per_query = weights_x @ x - weights_y @ y  # [samples, queries]: seed-resampled gains
    position = {q: i for i, q in enumerate(columns)}
    short_columns = per_query[:, [position[q] for q in short_ids]]
    long_columns = per_query[:, [position[q] for q in long_ids]]
    draws = np.take_along_axis(long_columns, rng.integers(0, len(long), size=(samples, len(long))), axis=1).mean(
        axis=1
    ) - np.take_along_axis(short_columns, rng.integers(0, len(short), size=(samples, len(short))), axis=1).mean(axis=1)
    low, high = percentile_interval(draws)
    return {
        "shortest": order[0],
        "longest": order[-1],
        "gain on shortest": float(short.mean()),
        "gain on longest": float(long.mean()),
        "growth": float(long.mean() - short.mean()),
        "95% CI low": float(low),
        "95% CI high": float(high),
    }
