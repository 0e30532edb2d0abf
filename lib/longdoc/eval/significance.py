"""Paired comparisons of two systems over the same queries (per-query metric values) or document
pairs (resampled by their documents)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

POWER = 0.80  # the power of a minimum detectable difference (:func:`minimum_detectable_difference`)
PAIR_SEPARATOR = "\t"  # an item keyed "<source>\t<target>" is a document pair (the matching family's)


def item_units(keys: list[str]) -> list[tuple[int, ...]]:
    """The units each item is resampled with, as indices: a pair ("<source>\t<target>") reads two documents
    and is drawn with both, so pairs sharing either document (a source's pairs, and the pairs of a target
    that several sources link to) share its judgement; a query is its own unit. SMITH's test pairs come
    from far fewer documents than pairs (532 pairs of 461 documents in notebook 30, 136 sources, 266 pairs
    sharing a target): resampling pairs as independent would narrow the interval; the paper reports none."""
    names = [tuple(dict.fromkeys(str(key).split(PAIR_SEPARATOR, 1))) for key in keys]
    if len({len(str(key).split(PAIR_SEPARATOR, 1)) for key in keys}) > 1:
        raise ValueError("the items mix queries and document pairs: one comparison reads one kind")
    index = {unit: i for i, unit in enumerate(dict.fromkeys(u for units in names for u in units))}
    return [tuple(index[u] for u in units) for units in names]


def _independent(units: list[tuple[int, ...]]) -> bool:
    """Every item is its own single unit (queries): the plain bootstrap and standard error apply."""
    return all(len(u) == 1 for u in units) and len({u[0] for u in units}) == len(units)


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
    resample draws queries with replacement (the same queries for both systems: they are paired) and,
    independently for each system, its seeds with replacement; the difference of the two means over
    the resampled seeds and queries is collected. The interval therefore widens with the seed-to-seed
    spread as well as with the query-to-query spread (with three seeds the plain bootstrap still
    understates the seed variance by a third, and seed k of two systems is not paired although both
    saw the same query order: both make it a rough interval). ``mean_difference`` is the difference of
    the seed-averaged means; the p-value is the same bootstrap's two-sided share of resampled differences
    on the far side of zero (:func:`bootstrap_p`), so p < 1 − confidence exactly when the percentile
    interval excludes zero: the two never disagree.

    Document pairs (keys "<source>\t<target>", :func:`item_units`) share documents, and no simple
    bootstrap of that design has the right width (drawing documents and weighing a pair by both its draws,
    the pigeonhole bootstrap, counts each pair's own noise about three times: ~1.7× too wide), so their
    interval is Δ ± t·SE with the dyadic-robust standard error of :func:`difference_standard_error`
    (Aronow, Samii & Assenova 2015) and its Welch–Satterthwaite degrees of freedom, and p its two-sided p.
    """
    if not a or not b:
        raise ValueError("each system needs at least one seed's per-query values")
    keys = sorted(a[0])
    for values in [*a, *b]:
        if set(values) != set(keys):
            raise ValueError("all seeds of both systems must be evaluated on the same queries")
    x = np.array([[values[k] for k in keys] for values in a])  # [Sa, Q]
    y = np.array([[values[k] for k in keys] for values in b])  # [Sb, Q]
    units = item_units(keys)
    standard_error, degrees_of_freedom = difference_error(x, y, units)
    delta = float(x.mean(0).mean() - y.mean(0).mean())
    if _independent(units):  # every item its own unit: draw items with replacement
        rng = np.random.default_rng(seed)
        weights_x = rng.multinomial(len(x), np.full(len(x), 1 / len(x)), size=samples) / len(x)  # [samples, Sa]
        weights_y = rng.multinomial(len(y), np.full(len(y), 1 / len(y)), size=samples) / len(y)
        per_query = weights_x @ x - weights_y @ y  # [samples, Q]: seed-resampled differences per query
        queries = rng.integers(0, len(keys), size=(samples, len(keys)))
        means = np.take_along_axis(per_query, queries, axis=1).mean(axis=1)
        (low, high), p_value = percentile_interval(means, confidence), bootstrap_p(means)
    else:
        (low, high), p_value = t_interval(delta, standard_error, degrees_of_freedom, confidence)
    return {
        "mean_difference": delta,
        "ci_low": float(low),
        "ci_high": float(high),
        "p_value": p_value,
        "standard_error": standard_error,
        "degrees_of_freedom": degrees_of_freedom,
        "minimum_detectable_difference": minimum_detectable_difference(
            standard_error, confidence=confidence, degrees_of_freedom=degrees_of_freedom
        ),
        "seeds": [len(x), len(y)],
        "queries": len(keys),
        "units": len({u for item in units for u in item}),
    }


def t_interval(
    delta: float, standard_error: float, degrees_of_freedom: float, confidence: float = 0.95
) -> tuple[tuple[float, float], float]:
    """Δ ± t·SE and its two-sided p (p < 1 − confidence exactly when the interval excludes 0); a t of z
    at infinite degrees of freedom."""
    t = _t(degrees_of_freedom)
    if standard_error == 0:
        return (delta, delta), 1.0 if delta == 0 else 0.0
    quantile = t.ppf(1 - (1 - confidence) / 2)
    return (delta - quantile * standard_error, delta + quantile * standard_error), float(
        2 * t.sf(abs(delta) / standard_error)
    )


def _t(degrees_of_freedom: float):
    """Student's t at ``degrees_of_freedom``; the normal at infinitely many."""
    return stats.t(degrees_of_freedom) if math.isfinite(degrees_of_freedom) else stats.norm


def difference_standard_error(x: np.ndarray, y: np.ndarray, units: list[tuple[int, ...]] | None = None) -> float:
    """The standard error of the difference of two systems' means over seeds and queries (``x``: [seeds,
    queries], ``y`` likewise, the same queries): the paired per-query differences of the seed means over
    the queries, plus each system's seed-to-seed variance of its mean over its seeds (unbiased, ddof=1; 0
    with one seed). The bootstrap's own spread would understate the seed part at two seeds by half, so the
    detectable difference is built from these parts instead (a slight overstatement: per-query seed noise
    enters both parts). With ``units`` (:func:`item_units`, pairs of documents), the item part is the
    dyadic-robust one (Fafchamps & Gubert 2007): Σ e_i·e_j over every two items sharing a unit, over N²,
    with D/(D−1) for D units as for clustered errors, and never below the independent items' part."""
    return difference_error(x, y, units)[0]


def difference_error(x: np.ndarray, y: np.ndarray, units: list[tuple[int, ...]] | None = None) -> tuple[float, float]:
    """:func:`difference_standard_error` and its Welch–Satterthwaite degrees of freedom: the item part has
    N − 1 (D − 1 over D documents for pairs), each system's seed part its seeds − 1, so two seeds a side
    whose spread dominates give few degrees of freedom and a wide t quantile (inf: a t of z)."""
    if x.shape[1] < 2:
        raise ValueError(f"{x.shape[1]} item(s): an interval needs at least two")
    paired = x.mean(0) - y.mean(0)
    independent = paired.var(ddof=1) / len(paired)
    if units is None or _independent(units):
        parts = [(independent, len(paired) - 1)]
    else:
        count = len({u for item in units for u in item})
        parts = [(max(_dyadic_variance(paired, units), independent), count - 1)]
    parts += [(m.mean(1).var(ddof=1) / len(m), len(m) - 1) for m in (x, y) if len(m) > 1]
    total = sum(v for v, _ in parts)
    spread = sum(v**2 / df for v, df in parts)
    return float(np.sqrt(total)), float(total**2 / spread) if spread > 0 else math.inf


def _dyadic_variance(values: np.ndarray, units: list[tuple[int, ...]]) -> float:
    """Σ over item pairs (i, j) sharing at least one unit of e_i·e_j, e = values − mean, over N², times
    D/(D−1): Σ_d (Σ_{i∋d} e_i)² counts twice the item pairs that share two units (an item with itself, a
    repeated pair), so each such group's (Σ e)² is taken off once."""
    residual = values - values.mean()
    count = len({u for item in units for u in item})
    if count < 2:
        raise ValueError(f"all {len(values)} items read one unit (document): no interval can be estimated")
    per_unit = np.zeros(count)
    shared_twice: dict[frozenset, float] = {}
    for e, item in zip(residual, units):
        for u in set(item):
            per_unit[u] += e
        if len(set(item)) == 2:
            shared_twice[frozenset(item)] = shared_twice.get(frozenset(item), 0.0) + e
    total = float((per_unit**2).sum() - sum(g**2 for g in shared_twice.values()))
    return count / (count - 1) * total / len(values) ** 2


def minimum_detectable_difference(
    standard_error: float, power: float = POWER, confidence: float = 0.95, degrees_of_freedom: float = math.inf
) -> float:
    """The smallest true difference a two-sided test at ``confidence`` finds with probability ``power``,
    given the standard error of the observed difference and its degrees of freedom (:func:`difference_error`):
    (t₁₋α/₂ + t_power) · SE, 2.80 · SE at 95% and 80% with many degrees of freedom, more where two seeds'
    spread dominates. With ``standard_error`` from :func:`seed_query_bootstrap` it covers the queries'
    paired differences and the seeds alike."""
    t = _t(degrees_of_freedom)
    return float((t.ppf(1 - (1 - confidence) / 2) + t.ppf(power)) * standard_error)


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
