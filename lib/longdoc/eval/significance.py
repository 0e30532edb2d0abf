"""Paired comparisons of two systems over the same queries (per-query metric values)."""

from __future__ import annotations

import numpy as np
from scipy import stats


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
    low, high = np.quantile(means, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    p = 2 * min(np.mean(means <= 0), np.mean(means >= 0))
    return {"mean_difference": float(diff.mean()), "ci_low": float(low), "ci_high": float(high), "p_value": float(min(p, 1.0))}
