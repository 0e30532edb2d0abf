"""The chance level of a ranking measure equals its mean over every ranking of a small corpus."""

import itertools
import math

import pytest

from longdoc.eval.chance import random_ranking_value
from longdoc.eval.metrics import evaluate


@pytest.mark.parametrize("measure", ["MRR@3", "Success@2", "R@3", "MRR@100"])
@pytest.mark.parametrize("relevant", [1, 2, 3])
def test_the_chance_level_is_the_mean_over_every_ranking(measure, relevant):
    documents = [f"d{i}" for i in range(6)]
    qrels = {"q": {d: 1 for d in documents[:relevant]}}
    values = [
        evaluate({"q": {d: float(len(order) - rank) for rank, d in enumerate(order)}}, qrels, [measure])[measure]
        for order in itertools.permutations(documents)
    ]
    assert random_ranking_value(measure, len(documents), [relevant]) == pytest.approx(math.fsum(values) / len(values))


def test_the_chance_level_averages_over_queries_and_knows_its_measures():
    one, two = random_ranking_value("MRR@10", 50, [1]), random_ranking_value("MRR@10", 50, [2])
    assert random_ranking_value("MRR@10", 50, [1, 2]) == pytest.approx((one + two) / 2) and two > one
    assert random_ranking_value("NDCG@10", 50, [1]) is None
    with pytest.raises(ValueError, match="relevant must be in 1..50"):
        random_ranking_value("MRR@10", 50, [51])
