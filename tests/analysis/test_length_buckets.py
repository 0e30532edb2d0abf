"""Length buckets (SeDR Figure 4): buckets by the relevant document's length, per-bucket scores and
gains checked against direct computations."""

import numpy as np
import pandas as pd
import pytest

from longdoc.analysis.length import bucket_gains, bucket_scores, gain_growth, length_buckets, relevant_lengths
from longdoc.eval.significance import seed_query_bootstrap


def test_a_query_takes_the_length_of_its_longest_relevant_document():
    tokens = pd.Series({"a": 10, "b": 300, "c": 50})
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1, "b": 0}, "q3": {"missing": 1}}
    assert relevant_lengths(qrels, tokens).to_dict() == {"q1": 300, "q2": 50}
    with pytest.raises(ValueError, match="no query"):
        relevant_lengths({"q": {"missing": 1}}, tokens)


def test_buckets_have_equal_counts_and_name_their_token_range():
    lengths = pd.Series({f"q{i}": length for i, length in enumerate([5, 80, 20, 40, 60, 10, 70, 30])})
    buckets = length_buckets(lengths, 4)
    assert buckets.value_counts().tolist() == [2, 2, 2, 2]
    assert buckets["q0"] == buckets["q5"] == "5–10 tokens" and buckets["q1"] == "70–80 tokens"


def test_bucket_scores_and_gains_are_the_bucket_means():
    rng = np.random.default_rng(0)
    queries = [f"q{i}" for i in range(40)]
    buckets = pd.Series(["1–9 tokens"] * 20 + ["10–99 tokens"] * 20, index=queries)
    a = [dict(zip(queries, rng.random(40))) for _ in range(3)]
    b = [dict(zip(queries, rng.random(40)))]
    scores = bucket_scores({"A": a, "B": b}, buckets)
    first = scores.iloc[0]
    expected = np.mean([np.mean([s[q] for s in a]) for q in queries[:20]])
    assert (first["system"], first["bucket"], first["queries"]) == ("A", "1–9 tokens", 20)
    assert first["mean"] == pytest.approx(expected) and first["95% CI low"] < expected < first["95% CI high"]
    gains = bucket_gains(a, b, buckets)
    direct = seed_query_bootstrap(
        [{q: s[q] for q in queries[20:]} for s in a], [{q: s[q] for q in queries[20:]} for s in b]
    )
    assert (
        gains.iloc[1]["Δ"] == pytest.approx(direct["mean_difference"])
        and gains.iloc[1]["95% CI low"] == direct["ci_low"]
    )
    growth = gain_growth(a, b, buckets)
    assert growth["growth"] == pytest.approx(gains.iloc[1]["Δ"] - gains.iloc[0]["Δ"])
    assert growth["95% CI low"] < growth["growth"] < growth["95% CI high"]


def test_equal_lengths_share_a_bucket():
    buckets = length_buckets(pd.Series({"a": 5, "b": 5, "c": 5, "d": 10, "e": 20, "f": 30}), 2)
    assert buckets.to_dict() == {
        "a": "5–5 tokens",
        "b": "5–5 tokens",
        "c": "5–5 tokens",
        "d": "10–30 tokens",
        "e": "10–30 tokens",
        "f": "10–30 tokens",
    }
    few = length_buckets(pd.Series({"a": 5, "b": 5, "c": 5, "d": 5, "e": 10, "f": 20}), 2)
    assert set(few) == {"5–20 tokens"}  # the median is a tie: one bucket remains


def test_gain_growth_resamples_seeds_as_well_as_queries():
    """The claim says "over queries and seeds": a system whose seeds disagree gets a wider interval of
    the same growth than one whose seeds agree."""
    rng = np.random.default_rng(2)
    queries = [f"q{i}" for i in range(60)]
    buckets = pd.Series(["1–9 tokens"] * 30 + ["10–99 tokens"] * 30, index=queries)
    base = rng.random(60)
    agreeing = [dict(zip(queries, base)) for _ in range(3)]
    # the same seed mean per query, but each seed moves the long bucket up or down as a whole
    shifts = (-0.3, 0.0, 0.3)
    disagreeing = [dict(zip(queries, base + np.r_[np.zeros(30), np.full(30, shift)])) for shift in shifts]
    other = [dict(zip(queries, rng.random(60)))]
    steady, spread = gain_growth(agreeing, other, buckets), gain_growth(disagreeing, other, buckets)
    assert steady["growth"] == pytest.approx(spread["growth"])
    assert spread["95% CI high"] - spread["95% CI low"] > 1.5 * (steady["95% CI high"] - steady["95% CI low"])
