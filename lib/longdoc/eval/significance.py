"""Paired comparisons of two systems over the same queries (per-query metric values)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

POWER = 0.80  # the power of a minimum detectable difference (:func:`minimum_detectable_difference`)
PAIR_SEPARATOR = "\t"  # an item keyed "<source>\t<target>" is a document pair (the matching family's)


def item_clusters(keys: list[str]) -> np.ndarray:
    """The unit each item is resampled with, as an index per key: a pair ("<source>\t<target>") goes with
    every pair of its source document, which it shares a document and so a judgement with (SMITH's test
    pairs come from far fewer source documents than pairs: resampling pairs as independent would narrow
    the interval; the paper reports no interval); a query is its own unit."""
    units = [str(key).split(PAIR_SEPARATOR, 1)[0] for key in keys]
    index = {unit: i for i, unit in enumerate(dict.fromkeys(units))}
    return np.array([index[unit] for unit in units])


def _paired(a: dict[str, float], b: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    if set(a) != set(b):
        raise ValueError(f"the two systems were evaluated on different queries ({len(set(a) ^ set(b))} differ)")
    keys = sorted(a)
    return np.array([a[k] for k in keys]), np.array([b[k] for k in keys])


def paired_t_test(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Two-sided paired Student's t-test (what SMITH and most IR papers report)."""
    x, y = _paired(a, b)
    if np.allclose(x, y):
        return {"mean_difference": 0.0, "t": 0.0, "p_value": 1.0}
    result = stats.ttest_rel(x, y)
    return {"mean_difference": float(np.mean(x - y)), "t": float(result.statistic), "p_value": float(result.pvalue)}


def paired_bootstrap(
    a: dict[str, float], b: dict[str, float], samples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """Bootstrap interval of the mean difference (a - b), resampling queries; p-value is the two-sided
    share of resampled differences on the other side of zero."""
    x, y = _paired(a, b)
    diff = x - y
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(samples, len(diff)))].mean(axis=1)
    low, high = percentile_interval(means, confidence)
    return {
        "mean_difference": float(diff.mean()),
        "ci_low": float(low),
        "ci_high": float(high),
        "p_value": bootstrap_p(means),
    }


def bootstrap_p(means: np.ndarray) -> float:
    """Two-sided bootstrap p-value: twice the smaller share of resampled mean differences at or beyond
    zero on either side (at most 1). Resamples exactly at zero count on both sides (common with few
    queries and discrete measures), so p < 0.05 only where the 95% interval lies clear of zero."""
    return float(min(1.0, 2 * min(np.mean(means <= 0), np.mean(means >= 0))))


def percentile_interval(means: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval as order statistics, without interpolation: with ``n`` resamples and
    tail ``α = (1 − confidence) / 2``, the ``⌈αn⌉``-th smallest and the ``⌈αn⌉``-th largest. The low end
    is above zero exactly when fewer than ``αn`` resamples lie at or below zero, i.e. exactly when
    :func:`bootstrap_p` < 1 − confidence on that side (an interpolated quantile could split that tie)."""
    ordered = np.sort(np.asarray(means, dtype=float))
    tail = max(1, math.ceil((1 - confidence) / 2 * len(ordered) - 1e-9))
    return float(ordered[tail - 1]), float(ordered[len(ordered) - tail])


def seed_query_bootstrap(
    a: list[dict[str, float]], b: list[dict[str, float]], samples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """Interval of the difference of two systems' means when each was trained with several seeds.

    ``a`` and ``b`` hold per-query values, one dict per seed (a deterministic system has one). Each
    resample draws queries (a pair: its source document's pairs together, :func:`item_clusters`) with replacement (the same queries for both systems: they are paired) and,
    independently for each system, its seeds with replacement; the difference of the two means over
    the resampled seeds and queries is collected. The interval therefore widens with the seed-to-seed
    spread as well as with the query-to-query spread (with three seeds the plain bootstrap still
    understates the seed variance by a third, and seed k of two systems is not paired although both
    saw the same query order: both make it a rough interval). ``mean_difference`` is the difference of
    the seed-averaged means; the p-value is the same bootstrap's two-sided share of resampled differences
    on the far side of zero (:func:`bootstrap_p`), so p < 1 − confidence exactly when the percentile
    interval excludes zero: the two never disagree.
    """
    if not a or not b:
        raise ValueError("each system needs at least one seed's per-query values")
    keys = sorted(a[0])
    for values in [*a, *b]:
        if set(values) != set(keys):
            raise ValueError("all seeds of both systems must be evaluated on the same queries")
    x = np.array([[values[k] for k in keys] for values in a])  # [Sa, Q]
    y = np.array([[values[k] for k in keys] for values in b])  # [Sb, Q]
    rng = np.random.default_rng(seed)
    weights_x = rng.multinomial(len(x), np.full(len(x), 1 / len(x)), size=samples) / len(x)  # [samples, Sa]
    weights_y = rng.multinomial(len(y), np.full(len(y), 1 / len(y)), size=samples) / len(y)
    per_query = weights_x @ x - weights_y @ y  # [samples, Q]: seed-resampled differences per query
    clusters = item_clusters(keys)
    if clusters.max() + 1 == len(keys):  # every item its own unit
        queries = rng.integers(0, len(keys), size=(samples, len(keys)))
        means = np.take_along_axis(per_query, queries, axis=1).mean(axis=1)
    else:
        means = _cluster_means(per_query, clusters, rng)
    low, high = percentile_interval(means, confidence)
    return {
        "mean_difference": float(x.mean(0).mean() - y.mean(0).mean()),
        "ci_low": float(low),
        "ci_high": float(high),
        "p_value": bootstrap_p(means),
        "standard_error": difference_standard_error(x, y, clusters),
        "seeds": [len(x), len(y)],
        "queries": len(keys),
        "units": int(clusters.max() + 1),
    }


def _cluster_means(per_item: np.ndarray, clusters: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each resample's mean over the items of units drawn with replacement (:func:`item_clusters`): every
    drawn unit brings all its items, so the mean weighs units by their size, as the plain mean does."""
    units = int(clusters.max() + 1)
    membership = np.zeros((len(clusters), units))
    membership[np.arange(len(clusters)), clusters] = 1.0
    totals, sizes = per_item @ membership, membership.sum(0)  # [samples, units], [units]
    draws = rng.multinomial(units, np.full(units, 1 / units), size=len(per_item))  # [samples, units]
    return (draws * totals).sum(1) / (draws @ sizes)


def difference_standard_error(x: np.ndarray, y: np.ndarray, clusters: np.ndarray | None = None) -> float:
    """The standard error of the difference of two systems' means over seeds and queries (``x``: [seeds,
    queries], ``y`` likewise, the same queries): the paired per-query differences of the seed means over
    the queries, plus each system's seed-to-seed variance of its mean over its seeds (unbiased, ddof=1; 0
    with one seed). The bootstrap's own spread would understate the seed part at two seeds by half, so the
    detectable difference is built from these parts instead (a slight overstatement: per-query seed noise
    enters both parts). With ``clusters`` (:func:`item_clusters`), the item part is the cluster-robust one
    (the variance of the units' totals around the mean, C/(C−1)·Σ(t_c − d̄·n_c)²/N²)."""
    paired = x.mean(0) - y.mean(0)
    seeds = sum(m.mean(1).var(ddof=1) / len(m) for m in (x, y) if len(m) > 1)
    if clusters is None or clusters.max() + 1 == len(paired):
        return float(np.sqrt(paired.var(ddof=1) / len(paired) + seeds))
    units = int(clusters.max() + 1)
    totals = np.bincount(clusters, weights=paired, minlength=units)
    sizes = np.bincount(clusters, minlength=units)
    residual = totals - paired.mean() * sizes
    items = units / (units - 1) * float((residual**2).sum()) / len(paired) ** 2
    return float(np.sqrt(items + seeds))


def minimum_detectable_difference(standard_error: float, power: float = POWER, confidence: float = 0.95) -> float:
    """The smallest true difference a two-sided test at ``confidence`` finds with probability ``power``,
    given the standard error of the observed difference (normal approximation: (z₁₋α/₂ + z_power) · SE,
    2.80 · SE at 95% and 80%; with two seeds a side a t quantile would be larger where the seed part
    dominates). With ``standard_error`` from :func:`seed_query_bootstrap` (:func:`difference_standard_error`)
    it covers the queries' paired differences and the seeds alike."""
    return float((stats.norm.ppf(1 - (1 - confidence) / 2) + stats.norm.ppf(power)) * standard_error)


def seed_query_interval(
    values: list[dict[str, float]], samples: int = 10_000, confidence: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """95% interval of one system's mean over queries and seeds: :func:`seed_query_bootstrap` against a
    system that scores 0 on every query, so a figure's error bar is resampled exactly as the verdicts'
    differences are (queries with replacement, and the system's seeds with replacement)."""
    if not values:
        raise ValueError("the system needs at least one seed's per-query values")
    stats = seed_query_bootstrap(values, [dict.fromkeys(values[0], 0.0)], samples, confidence, seed)
    return {"mean": stats["mean_difference"], "ci_low": stats["ci_low"], "ci_high": stats["ci_high"]}
