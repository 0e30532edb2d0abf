import numpy as np
import pytest

from longdoc.eval import classification_metrics, paired_bootstrap, paired_t_test


def test_clearly_better_system_is_significant_and_identical_is_not():
    rng = np.random.default_rng(0)
    base = {f"q{i}": float(v) for i, v in enumerate(rng.random(200))}
    better = {q: min(1.0, v + 0.2) for q, v in base.items()}
    assert paired_t_test(better, base)["p_value"] < 1e-6
    boot = paired_bootstrap(better, base, samples=2000)
    assert boot["ci_low"] > 0 and boot["p_value"] < 0.01
    assert paired_t_test(base, base)["p_value"] == 1.0


def test_different_query_sets_are_refused():
    with pytest.raises(ValueError, match="different queries"):
        paired_t_test({"a": 1.0}, {"b": 1.0})


def test_classification_metrics():
    m = classification_metrics([1, 1, 0, 0], [0.9, 0.2, 0.7, 0.1])
    assert m == {"Accuracy": 0.5, "Precision": 0.5, "Recall": 0.5, "F1": 0.5}


def test_seed_query_bootstrap_pairs_queries_and_widens_with_the_seed_spread():
    from longdoc.eval.significance import seed_query_bootstrap

    rng = np.random.default_rng(0)
    base = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(0, 1, 200))}
    same = seed_query_bootstrap([base], [base])
    assert same["mean_difference"] == 0 and same["ci_low"] == same["ci_high"] == 0
    shifted = [{q: v + 0.05 for q, v in base.items()} for _ in range(3)]
    paired = seed_query_bootstrap(shifted, [base])
    assert paired["ci_low"] == pytest.approx(0.05) and paired["ci_high"] == pytest.approx(
        0.05
    )  # paired: no query noise
    spread = [{q: v + delta for q, v in base.items()} for delta in (-0.1, 0.05, 0.2)]
    wide = seed_query_bootstrap(spread, [base])
    assert wide["mean_difference"] == pytest.approx(0.05)
    assert wide["ci_low"] < 0 < wide["ci_high"] and wide["seeds"] == [3, 1] and wide["queries"] == 200
    with pytest.raises(ValueError, match="same queries"):
        seed_query_bootstrap([base], [{"other": 1.0}])


def test_the_interval_covers_the_true_difference_95_percent_of_the_time():
    """Coverage simulation: 600 paired samples of 80 queries whose true mean difference is 0.1. A 95%
    interval covers it in about 95% of them (a 90% interval, i.e. quantiles at 5% and 95%, would cover
    about 90% and fail this bound); the p value, from the same bootstrap, is below 0.05 exactly when
    the interval excludes zero."""
    from longdoc.eval.significance import seed_query_bootstrap

    rng = np.random.default_rng(7)
    covered, agree = 0, 0
    trials = 600
    for trial in range(trials):
        queries = [f"q{i}" for i in range(80)]
        base = rng.normal(0.5, 0.2, size=80)
        other = base + rng.normal(0.1, 0.5, size=80)
        stats = seed_query_bootstrap([dict(zip(queries, other))], [dict(zip(queries, base))], samples=2000, seed=trial)
        covered += stats["ci_low"] <= 0.1 <= stats["ci_high"]
        excludes = stats["ci_low"] > 0 or stats["ci_high"] < 0
        agree += excludes == (stats["p_value"] < 0.05)
    assert 0.92 <= covered / trials <= 0.975  # seen: 0.928 (0.883 at 90%)
    assert agree == trials  # order statistics, not interpolated quantiles: the two never disagree


def test_the_interval_ends_are_the_order_statistics_of_a_brute_force_resample():
    """The ends are the ⌈αn⌉-th smallest and largest of the resampled means (no interpolation), and the
    low end is above zero exactly when p < 0.05, also at the tie where exactly αn resamples are ≤ 0."""
    from longdoc.eval.significance import bootstrap_p, percentile_interval

    means = np.arange(1, 2001) / 1000.0 - 0.0505  # 2000 sorted values: exactly 50 (= 2.5%) at or below 0
    low, high = percentile_interval(np.random.default_rng(0).permutation(means))
    assert (low, high) == (means[49], means[-50])
    assert low <= 0 and bootstrap_p(means) == pytest.approx(0.05)  # p = 0.05 is not < 0.05: not excluded
    shifted = means + 0.001  # 49 at or below 0
    assert percentile_interval(shifted)[0] > 0 and bootstrap_p(shifted) < 0.05


def test_a_systems_interval_is_its_mean_over_queries_and_seeds_resampled_like_the_comparisons():
    """The figures' error bars: brute force over the same draws (seeds and queries with replacement)."""
    from longdoc.eval.significance import seed_query_interval

    rng = np.random.default_rng(3)
    queries = [f"q{i}" for i in range(40)]
    seeds = [dict(zip(queries, rng.uniform(0, 1, 40) + shift)) for shift in (0.0, 0.2, 0.4)]
    stats = seed_query_interval(seeds, samples=4000, seed=5)
    x = np.array([[s[q] for q in sorted(queries)] for s in seeds])
    assert stats["mean"] == pytest.approx(x.mean())
    draws = np.random.default_rng(5)  # the draws seed_query_bootstrap makes, in its order
    weights = draws.multinomial(3, np.full(3, 1 / 3), size=4000) / 3
    draws.multinomial(1, [1.0], size=4000)  # the constant system's single seed
    picked = draws.integers(0, 40, size=(4000, 40))
    means = np.sort(np.take_along_axis(weights @ x, picked, axis=1).mean(axis=1))
    assert (stats["ci_low"], stats["ci_high"]) == (pytest.approx(means[99]), pytest.approx(means[-100]))
    one_seed = seed_query_interval(seeds[:1], samples=4000)
    assert one_seed["ci_high"] - one_seed["ci_low"] < stats["ci_high"] - stats["ci_low"]  # seeds widen it


def test_the_minimum_detectable_difference_is_found_80_percent_of_the_time():
    """Brute force: paired per-query differences with sd σ over n queries; the bootstrap's standard error
    is σ/√n, the MDD 2.80 σ/√n, and experiments whose true difference is the MDD find it (interval above
    zero, z > 1.96) in about 80% of repeats."""
    from longdoc.eval.significance import minimum_detectable_difference, seed_query_bootstrap

    rng = np.random.default_rng(0)
    n, sigma = 400, 0.3
    base = {str(q): 0.0 for q in range(n)}
    diffs = rng.normal(0.0, sigma, n)
    stats = seed_query_bootstrap([{str(q): float(d) for q, d in enumerate(diffs)}], [base], samples=4000)
    expected = sigma / np.sqrt(n)
    assert stats["standard_error"] == pytest.approx(expected, rel=0.1)
    mdd = minimum_detectable_difference(stats["standard_error"])
    assert mdd == pytest.approx(2.8016 * stats["standard_error"], rel=1e-3)
    assert stats["minimum_detectable_difference"] == minimum_detectable_difference(
        stats["standard_error"], degrees_of_freedom=stats["degrees_of_freedom"]
    )  # the one every finding and recompute print, at the interval's degrees of freedom
    means = rng.normal(minimum_detectable_difference(expected), sigma, size=(4000, n)).mean(axis=1)
    assert np.mean(means / expected > 1.959964) == pytest.approx(0.80, abs=0.03)


def test_the_standard_error_covers_the_seed_to_seed_spread_at_two_seeds():
    """Brute force: two systems of two seeds each, every run shifted by its own seed effect (sd 0.05) on top
    of per-query noise; over many replications the estimated standard error matches the real spread of
    the observed difference, where the bootstrap's own spread would understate its seed part by half."""
    from longdoc.eval.significance import difference_standard_error

    rng = np.random.default_rng(1)
    queries, seed_sd, query_sd = 200, 0.05, 0.3
    base = rng.uniform(0, 1, queries)
    deltas, errors = [], []
    for _ in range(1500):
        x = base + rng.normal(0, seed_sd, (2, 1)) + rng.normal(0, query_sd, (2, queries))
        y = base + rng.normal(0, seed_sd, (2, 1)) + rng.normal(0, query_sd, (2, queries))
        deltas.append(x.mean() - y.mean())
        errors.append(difference_standard_error(x, y))
    assert np.mean(errors) == pytest.approx(np.std(deltas), rel=0.12)


def smith_like_pairs(rng, sources=136, pool=1000, pairs=532, spread=0.8, base=(0.8, 0.6)):
    """Document pairs shaped like notebook 30's test split (532 pairs from 136 sources, ~290 targets drawn
    from a pool by a popularity ∝ rank^−0.8, over half the pairs sharing a target with another) and two
    systems' correctness on them: each system finds each document easier or harder (a logit effect of sd
    ``spread`` per document and system), beside each pair's own Bernoulli noise. The dyadic standard error
    is then ~1.13× the one that clusters by source only, as on notebook 30's scores (1.09–1.21). Returns the
    pairs (source, target), both systems' 0/1 values and the true difference of their expected accuracies."""
    from scipy.special import expit

    popularity = 1 / np.arange(1, pool + 1) ** 0.8
    per_source = 1 + rng.multinomial(pairs - sources, np.full(sources, 1 / sources))
    found = [
        (s, sources + t)
        for s, k in enumerate(per_source)
        for t in rng.choice(pool, k, replace=False, p=popularity / popularity.sum())
    ]
    source, target = np.array(found).T
    values = []
    for offset in base:
        effect = rng.normal(0, spread, sources + pool)
        values.append((rng.random(len(found)) < expit(offset + effect[source] + effect[target])).astype(float))
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)  # a pair's two effects: normal, sd spread·√2
    expected = [float(weights @ expit(offset + spread * np.sqrt(2) * nodes) / weights.sum()) for offset in base]
    return found, values[0], values[1], expected[0] - expected[1]


def test_pairs_sharing_documents_get_an_interval_of_the_right_width():
    """Pairs sharing a document (a source's pairs; the pairs of a target several sources link to) share
    its difficulty. On notebook 30's design the interval (t, with the dyadic-robust SE) covers the true
    difference about 95% of the time and is as wide as the spread of the observed differences (not wider:
    the pigeonhole bootstrap was ~1.7× too wide); clustering by source only (each pair's target its own)
    or treating pairs as independent covers less."""
    from scipy import stats as scipy_stats

    from longdoc.eval.significance import seed_query_bootstrap

    rng = np.random.default_rng(1)
    trials = 300
    covered, deltas, errors = {"documents": 0, "sources": 0, "pairs": 0}, [], []
    for trial in range(trials):
        pairs, a, b, truth = smith_like_pairs(rng)
        for kind in covered:
            keys = {
                "documents": [f"s{s}\tt{t}" for s, t in pairs],
                "sources": [f"s{s}\tt{t}-{i}" for i, (s, t) in enumerate(pairs)],
                "pairs": [f"p{i}" for i in range(len(pairs))],
            }[kind]
            stats = seed_query_bootstrap([dict(zip(keys, a))], [dict(zip(keys, b))], samples=50, seed=trial)
            covered[kind] += stats["ci_low"] <= truth <= stats["ci_high"]
            if kind == "documents":
                deltas.append(stats["mean_difference"] - truth)
                errors.append(stats["standard_error"])
                quantile = scipy_stats.t(stats["degrees_of_freedom"]).ppf(0.975)
                assert (stats["ci_high"] - stats["ci_low"]) / 2 == pytest.approx(quantile * stats["standard_error"])
    shares = {kind: n / trials for kind, n in covered.items()}
    assert 0.92 <= shares["documents"] <= 0.975, shares  # seen: 0.933
    assert shares["sources"] < 0.915 and shares["pairs"] < 0.86, shares  # seen: 0.90, 0.82
    assert np.mean(errors) == pytest.approx(np.sqrt(np.mean(np.square(deltas))), rel=0.08)  # seen: 0.998


def test_the_dyadic_standard_error_matches_its_brute_force_sum():
    """The standard error behind a pair comparison's interval and MDD is Σ e_i·e_j over every two pairs
    sharing a document (D/(D−1), N²), checked by brute force (its spread is checked above)."""
    from longdoc.eval.significance import difference_standard_error, item_units

    assert item_units(["a\tb", "a\tc", "c\ta", "a\ta"]) == [(0, 1), (0, 2), (2, 0), (0,)]  # a self-pair: one unit
    assert item_units(["q1", "q2"]) == [(0,), (1,)] and item_units([7, 3, 7]) == [(0,), (1,), (0,)]  # 23's ids
    with pytest.raises(ValueError, match="mix queries and document pairs"):
        item_units(["q1", "a\tb"])
    rng = np.random.default_rng(0)
    pairs, other, base, _ = smith_like_pairs(rng, sources=6, pool=5, pairs=14)
    pairs.append(pairs[0])  # a repeated pair shares both its documents with the first
    base, other = np.append(base, base[0]), np.append(other, 1 - other[0])
    units = item_units([f"s{s}\tt{t}" for s, t in pairs])
    e = (other - base) - (other - base).mean()
    shares = np.array([[bool(set(a) & set(b)) for b in units] for a in units])
    count = len({u for item in units for u in item})
    expected = np.sqrt(count / (count - 1) * (e @ shares @ e) / len(e) ** 2)
    assert difference_standard_error(other[None], base[None], units) == pytest.approx(expected)
    with pytest.raises(ValueError, match="one unit"):
        difference_standard_error(np.ones((1, 3)), np.zeros((1, 3)), [(0,), (0,), (0,)])


def test_two_seeds_whose_spread_dominates_give_few_degrees_of_freedom_and_a_wider_mdd():
    """Welch–Satterthwaite: (Σ v)² / Σ v²/df over the item part (N − 1) and each system's seed part
    (seeds − 1); the MDD's quantiles are t's at those degrees of freedom (z's with one seed each)."""
    from scipy import stats as scipy_stats

    from longdoc.eval.significance import difference_error, minimum_detectable_difference

    rng = np.random.default_rng(4)
    x = 0.5 + rng.normal(0, 0.05, (2, 1)) + rng.normal(0, 0.1, (2, 50))
    y = 0.4 + rng.normal(0, 0.05, (2, 1)) + rng.normal(0, 0.1, (2, 50))
    se, df = difference_error(x, y)
    parts = [
        ((x.mean(0) - y.mean(0)).var(ddof=1) / 50, 49),
        (x.mean(1).var(ddof=1) / 2, 1),
        (y.mean(1).var(ddof=1) / 2, 1),
    ]
    assert se**2 == pytest.approx(sum(v for v, _ in parts))
    assert df == pytest.approx(sum(v for v, _ in parts) ** 2 / sum(v**2 / d for v, d in parts)) and df < 10
    t = scipy_stats.t(df)
    assert minimum_detectable_difference(se, degrees_of_freedom=df) == pytest.approx((t.ppf(0.975) + t.ppf(0.8)) * se)
    assert minimum_detectable_difference(se, degrees_of_freedom=df) > minimum_detectable_difference(se)
    assert difference_error(x[:1], y[:1])[1] == pytest.approx(49)  # one seed each: the items' N − 1
    with pytest.raises(ValueError, match="at least two"):
        difference_error(x[:, :1], y[:, :1])
