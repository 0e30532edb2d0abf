import math
import random

import pytest
import pytrec_eval

from longdoc.eval import evaluate, per_query, read_run, write_run
from longdoc.eval.metrics import ranking

OURS_TO_TREC = {
    "MRR@10": None,
    "R@100": "recall_100",
    "R@5": "recall_5",
    "NDCG@10": "ndcg_cut_10",
    "NDCG@5": "ndcg_cut_5",
    "RPrec": "Rprec",
    "MAP": "map",
    "Success@1": "success_1",
    "Success@10": "success_10",
    "Success@100": "success_100",
}


def random_case(seed, queries=30, docs=60, ties=True):
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(queries):
        qid = f"q{q}"
        judged = rng.sample(range(docs), rng.randint(1, 12))
        qrels[qid] = {f"d{d}": rng.choice([0, 1, 1, 2, 3]) for d in judged}
        retrieved = rng.sample(range(docs), rng.randint(0, docs))
        # coarse scores create many ties, which is where tie-breaking conventions differ
        run[qid] = {f"d{d}": float(rng.randint(0, 8) if ties else rng.random()) for d in retrieved}
    return qrels, run


@pytest.mark.parametrize("seed", range(8))
def test_metrics_equal_pytrec_eval(seed):
    qrels, run = random_case(seed, ties=seed % 2 == 0)
    measures = {"recall_100", "recall_5", "ndcg_cut_10", "ndcg_cut_5", "Rprec", "map", "success.1,10,100"}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    ours = per_query(run, qrels, [m for m, t in OURS_TO_TREC.items() if t])
    compared = 0
    for measure, trec_name in OURS_TO_TREC.items():
        if trec_name is None:
            continue
        for qid, values in theirs.items():
            if any(r >= 1 for r in qrels[qid].values()):
                assert ours[measure][qid] == pytest.approx(values[trec_name], abs=1e-12), (measure, qid)
                compared += 1
    assert compared > 100


@pytest.mark.parametrize("seed", range(4))
def test_mrr_at_k_equals_recip_rank_of_truncated_run(seed):
    qrels, run = random_case(seed)
    truncated = {q: {d: s for d, s in scores.items() if d in ranking(scores)[:10]} for q, scores in run.items()}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(truncated)
    ours = per_query(run, qrels, ["MRR@10"])["MRR@10"]
    for qid, values in theirs.items():
        if any(r >= 1 for r in qrels[qid].values()):
            assert ours[qid] == pytest.approx(values["recip_rank"], abs=1e-12)


def test_missing_queries_count_as_zero_and_unjudged_are_ignored():
    qrels = {"a": {"d1": 1}, "b": {"d2": 1}, "c": {"d3": 0}}
    run = {"a": {"d1": 3.0, "d9": 1.0}}
    assert evaluate(run, qrels, ["MRR@10"])["MRR@10"] == pytest.approx(0.5)


def test_ranking_breaks_ties_by_doc_id_descending():
    assert ranking({"a": 1.0, "c": 1.0, "b": 2.0}) == ["b", "c", "a"]


def test_written_run_reads_back_with_distinct_scores_and_same_metrics(tmp_path):
    qrels, run = random_case(3)
    path = tmp_path / "run.trec"
    write_run(run, path, tag="test")
    back = read_run(path)
    for qid, scores in back.items():
        values = list(scores.values())
        assert len(set(values)) == len(values)
        assert ranking(scores) == ranking(run[qid])
    measures = ["MRR@10", "R@100", "NDCG@10", "MAP"]
    assert evaluate(back, qrels, measures) == evaluate(run, qrels, measures)
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(back)
    mean = math.fsum(v["map"] for q, v in theirs.items() if any(r >= 1 for r in qrels[q].values()))
    judged = [q for q in theirs if any(r >= 1 for r in qrels[q].values())]
    assert mean / len(judged) == pytest.approx(
        sum(per_query(back, qrels, ["MAP"])["MAP"][q] for q in judged) / len(judged)
    )


def test_unknown_measure_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown measure"):
        evaluate({}, {"q": {"d": 1}}, ["P@10x"])


def test_success_is_a_hit_rate_not_recall():
    """NCI's Recall@N: a query with two relevant documents and one of them at rank 1 scores 1 at
    Success@1 and 0.5 at R@1."""
    qrels = {"a": {"d1": 1, "d2": 1}}
    run = {"a": {"d1": 3.0, "d3": 2.0, "d2": 1.0}}
    assert evaluate(run, qrels, ["Success@1", "R@1", "Success@2"]) == {"Success@1": 1.0, "R@1": 0.5, "Success@2": 1.0}
