"""Length buckets (SeDR Figure 4): buckets by the segments the relevant document fills, per-bucket scores and
gains checked against direct computations."""

import numpy as np
import pandas as pd
import pytest

from longdoc.analysis.length import bucket_gains, bucket_scores, gain_growth, relevant_lengths, segment_buckets
from longdoc.eval.significance import seed_query_bootstrap


def test_a_query_takes_the_length_of_its_longest_relevant_document():
    tokens = pd.Series({"a": 10, "b": 300, "c": 50})
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1, "b": 0}, "q3": {"missing": 1}}
    assert relevant_lengths(qrels, tokens).to_dict() == {"q1": 300, "q2": 50}
    with pytest.raises(ValueError, match="no query"):
        relevant_lengths({"q": {"missing": 1}}, tokens)


def test_buckets_count_the_segments_a_document_fills_up_to_what_the_model_reads():
    lengths = pd.Series({"a": 1, "b": 62, "c": 63, "d": 124, "e": 125, "f": 248, "g": 249, "h": 5000})
    buckets = segment_buckets(lengths, 62, 4)
    assert buckets.to_dict() == {
        "a": "1 segment",
        "b": "1 segment",
        "c": "2 segments",
        "d": "2 segments",
        "e": "3 segments",
        "f": "≥ 4 segments",
        "g": "≥ 4 segments",
        "h": "≥ 4 segments",
    }
    assert list(buckets.cat.categories) == ["1 segment", "2 segments", "3 segments", "≥ 4 segments"]
    assert segment_buckets(lengths, 62, 1).unique().tolist() == ["≥ 1 segment"]
    with pytest.raises(ValueError, match="segment_tokens and segments"):
        segment_buckets(lengths, 0, 4)


def test_bucket_scores_and_gains_are_the_bucket_means():
    rng = np.random.default_rng(0)
    queries = [f"q{i}" for i in range(40)]
    buckets = segment_buckets(pd.Series([10] * 20 + [100] * 20, index=queries), 62, 2)
    a = [dict(zip(queries, rng.random(40))) for _ in range(3)]
    b = [dict(zip(queries, rng.random(40)))]
    scores = bucket_scores({"A": a, "B": b}, buckets)
    first = scores.iloc[0]
    expected = np.mean([np.mean([s[q] for s in a]) for q in queries[:20]])
    assert (first["system"], first["bucket"], first["queries"]) == ("A", "1 segment", 20)
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


def test_an_empty_bucket_is_left_out_and_the_order_is_by_segments():
    lengths = pd.Series({f"q{i}": n for i, n in enumerate([10, 20, 300, 400, 500, 30])})
    buckets = segment_buckets(lengths, 62, 4)  # nobody fills 2 or 3 segments
    scores = bucket_scores({"A": [dict.fromkeys(lengths.index, 0.5)]}, buckets)
    assert scores["bucket"].tolist() == ["1 segment", "≥ 4 segments"] and scores["queries"].tolist() == [3, 3]


def test_a_bucket_of_one_query_gets_its_gain_and_no_interval():
    """The cpu run of notebook 24 met a bucket with one test query: its Δ is shown, its interval is not
    (one item has no spread), and the other buckets keep theirs."""
    lengths = pd.Series({f"q{i}": n for i, n in enumerate([10, 20, 30, 40, 200])})
    buckets = segment_buckets(lengths, 62, 4)
    a, b = [dict(zip(lengths.index, [0.5, 0.2, 1.0, 0.1, 0.9]))], [dict.fromkeys(lengths.index, 0.3)]
    gains = bucket_gains(a, b, buckets).set_index("bucket")
    assert gains.loc["≥ 4 segments", "Δ"] == pytest.approx(0.6) and gains.loc["≥ 4 segments", "queries"] == 1
    assert np.isnan(gains.loc["≥ 4 segments", "95% CI low"]) and np.isnan(gains.loc["≥ 4 segments", "95% CI high"])
    assert gains.loc["1 segment", "95% CI low"] < gains.loc["1 segment", "Δ"] < gains.loc["1 segment", "95% CI high"]


def test_gain_growth_resamples_seeds_as_well_as_queries():
    """The claim says "over queries and seeds": a system whose seeds disagree gets a wider interval of
    the same growth than one whose seeds agree."""
    rng = np.random.default_rng(2)
    queries = [f"q{i}" for i in range(60)]
    buckets = segment_buckets(pd.Series([10] * 30 + [100] * 30, index=queries), 62, 2)
    base = rng.random(60)
    agreeing = [dict(zip(queries, base)) for _ in range(3)]
    # the same seed mean per query, but each seed moves the long bucket up or down as a whole
    shifts = (-0.3, 0.0, 0.3)
    disagreeing = [dict(zip(queries, base + np.r_[np.zeros(30), np.full(30, shift)])) for shift in shifts]
    other = [dict(zip(queries, rng.random(60)))]
    steady, spread = gain_growth(agreeing, other, buckets), gain_growth(disagreeing, other, buckets)
    assert steady["growth"] == pytest.approx(spread["growth"])
    assert spread["95% CI high"] - spread["95% CI low"] > 1.5 * (steady["95% CI high"] - steady["95% CI low"])


def toy_study(sedr, other, maxp_segments: int = 4, first_length: int = 64):
    """Per-query scores of SeDR, MaxP and FirstP, and the encoders they read with (64-token segments)."""
    from types import SimpleNamespace

    def result(scores, segment_length, segments):
        encoder = SimpleNamespace(segment_length=segment_length, max_segments=segments, document_tokens=0)
        return SimpleNamespace(
            per_item=lambda data, measure: scores, system=SimpleNamespace(spec=SimpleNamespace(encoder=encoder))
        )

    results = {
        "SeDR": result(sedr, 64, 4),
        "MaxP": result(other, 64, maxp_segments),
        "FirstP": result(other, first_length, 1),
    }
    return SimpleNamespace(results=results, data=None)


def test_figure_4_claims_need_rows_that_read_what_the_claim_assumes():
    """MaxP reading fewer tokens than SeDR leaves the long-document claims against it not testable;
    FirstP's first segment shorter than the bucket's leaves the one-segment claims against it so."""
    from longdoc.experiments.papers.sedr import length_claims
    from longdoc.experiments.verdicts import NOT_TESTABLE

    queries = [f"q{i}" for i in range(30)]
    buckets = segment_buckets(pd.Series([10] * 15 + [500] * 15, index=queries), 62, 4)
    sedr = [{q: 0.9 for q in queries}, {q: 0.8 for q in queries}]
    other = [{q: 0.2 for q in queries}, {q: 0.3 for q in queries}]
    sound = length_claims(toy_study(sedr, other), buckets, "SeDR", "MaxP", "FirstP", 62)
    assert NOT_TESTABLE not in set(sound["verdict"])
    assert "same tokens of a long document (SeDR 248, MaxP 248)" in sound.loc[0, "condition"]
    fewer = length_claims(toy_study(sedr, other, maxp_segments=2), buckets, "SeDR", "MaxP", "FirstP", 62)
    assert list(fewer["verdict"][:3]) == [NOT_TESTABLE, NOT_TESTABLE, "reversed"]
    assert "NOT met" in fewer.loc[0, "condition"] and "MaxP 124" in fewer.loc[0, "condition"]
    # each part of a combined condition carries its own status: the bucket size held, the tokens did not
    assert fewer.loc[1, "condition"].startswith("met: 1 segment: 15 queries, ≥ 4 segments: 15 queries")
    assert "met: both read a one-segment document whole" in fewer.loc[1, "condition"]
    assert "NOT met: both read the same tokens of a long document (SeDR 248, MaxP 124)" in fewer.loc[1, "condition"]
    assert list(fewer["verdict"][3:]) == list(sound["verdict"][3:])  # FirstP's claims do not read MaxP
    short = length_claims(toy_study(sedr, other, first_length=32), buckets, "SeDR", "MaxP", "FirstP", 62)
    assert list(short["verdict"][4:]) == [NOT_TESTABLE, NOT_TESTABLE] and short.loc[3, "verdict"] == "holds"
    assert "FirstP 30; the bucket's segment: 62" in short.loc[5, "condition"]


def test_figure_4_claims_need_enough_queries_in_their_buckets():
    """SeDR Figure 4's claims, posed on the segments a document fills: the one-segment claims are not
    testable with 3 queries there, the longest bucket's are (12 queries), and its gain is the bucket's."""

    from longdoc.experiments.papers.sedr import length_claims
    from longdoc.experiments.verdicts import NOT_TESTABLE

    queries = [f"q{i}" for i in range(15)]
    buckets = segment_buckets(pd.Series([10] * 3 + [500] * 12, index=queries), 62, 4)
    sedr = [{q: 0.9 for q in queries}, {q: 0.8 for q in queries}]
    other = [{q: 0.2 for q in queries}, {q: 0.3 for q in queries}]
    table = length_claims(toy_study(sedr, other), buckets, "SeDR", "MaxP", "FirstP", 62)
    assert len(table) == 6 and list(table["verdict"][[1, 2, 4, 5]]) == [NOT_TESTABLE] * 4
    assert list(table["verdict"][[0, 3]]) == ["holds", "holds"]
    assert table.loc[0, "claim"] == "SeDR above MaxP on documents filling ≥ 4 segments"
    assert (
        table.loc[0, "ours: Δ [95% CI]"].startswith("+0.600 ") and "1 segment: 3 queries" in table.loc[2, "condition"]
    )
