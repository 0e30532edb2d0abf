"""Other cards and several GPUs: the published figures as the planner applies them."""

import pytest

from longdoc.bench.cards import A100_PER_H100, V100_PER_A100, card_factor, scaling_efficiency
from longdoc.bench.gpu_hours import on_card


def test_the_published_ratios_are_the_sources_throughputs():
    assert A100_PER_H100 == pytest.approx(2.764, abs=1e-3)  # MLPerf v2.1: 6,711 / 2,428 samples per second
    assert V100_PER_A100["other"] == pytest.approx(2.125)  # SQuAD fine-tuning: 110.5 / 52
    assert V100_PER_A100["pre-training"] == pytest.approx(2.8)  # pre-training at 512 tokens: 210 / 75


def test_a_card_costs_its_factor_per_kind_and_several_gpus_their_efficiency():
    assert card_factor("H100", "fine-tuning") == 1.0
    assert card_factor("V100", "pre-training") == pytest.approx(A100_PER_H100 * 2.8)
    assert card_factor("V100", "decoding") == pytest.approx(A100_PER_H100 * 2.125)
    assert scaling_efficiency("A100", 1) == 1.0 and scaling_efficiency("A100", 8) == pytest.approx(7.66 / 8)
    assert scaling_efficiency("H100", 16) == scaling_efficiency("A100", 8)  # assumed, as the module says
    hours = {"fine-tuning": 10.0, "pre-training": 2.0, "BM25": 99.0}  # a CPU kind is no GPU's work
    assert on_card({"split": hours}, "H100", 1) == pytest.approx(12.0)
    assert on_card({"split": hours}, "V100", 8) == pytest.approx(
        (10 * A100_PER_H100 * 2.125 + 2 * A100_PER_H100 * 2.8) / (7.34 / 8)
    )
    # one process decodes while the other 7 GPUs wait; every process decodes the dev queries: 8 GPUs held
    assert on_card({"one process": {"decoding": 1.0}, "every process": {"decoding": 0.5}}, "H100", 8) == 12.0
    assert on_card({"one process": {"decoding": 1.0}}, "H100", 1) == 1.0


def test_an_unknown_card_or_no_gpu_is_refused_by_name():
    with pytest.raises(ValueError, match="card 'T4'"):
        card_factor("T4", "fine-tuning")
    with pytest.raises(ValueError, match="gpus must be at least 1"):
        scaling_efficiency("H100", 0)
