"""Preconditions of a claim: pre-training learned (its losses fell; its start probe is a diagnostic that
gates nothing), a pre-training claim's rows start as the paper assumes (MLM-trained or random), the system
is above chance, at its plateau; wired into every study. None restates a claim: a pre-trained start that
lands below the plain one still gets its verdict, reversed included."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from longdoc.experiments.families.retrieval import BM25, Dense
from longdoc.experiments.papers.longtriever import longtriever, pretrain_config
from longdoc.experiments.preconditions import (
    RANDOM,
    above_chance,
    compares_pretraining,
    losses_fell,
    paper_start,
    pretraining_works,
)
from longdoc.experiments.systems import System
from longdoc.experiments.verdicts import MDD, NOT_TESTABLE, REVERSED, Claim, assess


def history(mlm, lmae=None):
    return [
        {"phase": "full", "step": i, "mlm": m, **({} if lmae is None else {"lmae": lmae[i]})} for i, m in enumerate(mlm)
    ]


def test_every_pretraining_loss_must_fall_by_a_tenth():
    assert losses_fell(history([10.0] * 10 + [8.0] * 10))[0]
    fell, text = losses_fell(history([10.0] * 20, [10.0] * 10 + [8.0] * 10))
    assert not fell and text == "MLM +0.0%, LMAE −20.0%"
    fell, text = losses_fell(history([10.0] * 10 + [9.004] * 10))  # 9.96% down: short of the bar, and says so
    assert not fell and text == "MLM −9.9%"
    assert not losses_fell([{"phase": "head", "step": 0, "mlm": 1.0}])[0]


class FakeSpec:
    def __init__(self, probe, plain_probe, directory, backbone="minilm", random_init=False):
        self.probe, self.plain_probe, self.directory = probe, plain_probe, directory
        self.encoder, self.random_init = SimpleNamespace(backbone=backbone), random_init

    def without_pretraining(self):
        return SimpleNamespace(start_probe=lambda study: self.plain_probe, start_key=lambda: "plain")

    def start_probe(self, study):
        return self.probe

    def start_key(self):
        return "pre-trained"

    def pretraining_steps(self, study):
        return json.loads((self.directory / "history.json").read_text())["history"]


class PlainSpec:
    def without_pretraining(self):
        return None


class ProbingStudy:
    def start_probe(self, spec):
        return spec.start_probe(self)


@pytest.mark.parametrize(
    ("losses", "probe", "holds"),
    [
        ([10.0] * 5 + [5.0] * 5, {"score": 0.3, "loss": 2.0}, True),
        ([10.0] * 10, {"score": 0.3, "loss": 2.0}, False),  # the losses did not fall
        ([10.0] * 5 + [5.0] * 5, {"score": 0.3, "loss": 3.0}, True),  # a higher loss on the probe: reported only
        ([10.0] * 5 + [5.0] * 5, {"score": 0.1, "loss": 2.0}, True),  # a lower score: reported, not a gate
    ],
)
def test_pretraining_is_gated_by_its_own_losses_and_its_start_probe_is_only_reported(tmp_path, losses, probe, holds):
    (tmp_path / "history.json").write_text(json.dumps({"history": history(losses)}))
    plain = {"score": 0.2, "loss": 2.5, "probe": "dev probe"}
    system = System("LT", FakeSpec({**probe, "probe": "dev probe"}, plain, tmp_path))
    learned, diagnostic = pretraining_works(ProbingStudy(), system)
    assert learned.holds is holds and learned.what.startswith("pre-training of LT learned")
    assert diagnostic.holds and diagnostic.diagnostic
    assert f"{probe['score']:.3f} vs 0.200" in diagnostic.what and "without pre-training" in diagnostic.what


def test_a_pretraining_claim_needs_the_start_the_paper_assumes(tmp_path):
    """From MiniLM (a contrastive sentence encoder, no trained MLM head) a pre-training claim is not
    testable; from an MLM-trained encoder or from random weights it is; a claim about something else,
    or a row that is not pre-trained, is not held to it."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    starts = {
        "from MiniLM": FakeSpec(None, None, tmp_path, backbone="minilm"),
        "from MLM": FakeSpec(None, None, tmp_path, backbone=str(tmp_path / "mlm")),
        "from random": FakeSpec(None, None, tmp_path, random_init=True),
        "plain": PlainSpec(),
    }
    study = SimpleNamespace(results={n: SimpleNamespace(system=System(n, spec)) for n, spec in starts.items()})

    def rule(system, pretraining=True):
        return paper_start(study, Claim("pre-training helps", system, "plain", pretraining=pretraining))

    (minilm,) = rule("from MiniLM")
    assert not minilm.holds and "without a trained MLM head" in minilm.what
    (mlm,) = rule("from MLM")
    assert mlm.holds and "an MLM-trained encoder" in mlm.what
    (random,) = rule("from random")
    assert random.holds and RANDOM in random.what
    assert rule("plain") == []


def test_a_claim_whose_rows_differ_in_pretraining_is_held_to_the_start_rule_and_a_sweep_is_not(tmp_path):
    """SMITH-WP+SP pre-trained from MiniLM against MatchBERT (not pre-trained) compares pre-training too:
    not testable from that start, though the claim is about length; two pre-trained rows (a sweep of one
    pre-trained model) and two plain rows are not held to it."""
    starts = {
        "WP+SP from MiniLM": FakeSpec(None, None, tmp_path, backbone="minilm"),
        "WP+SP from MiniLM, 128 tokens": FakeSpec(None, None, tmp_path, backbone="minilm"),
        "MatchBERT": PlainSpec(),
        "SMITH-Short": PlainSpec(),
    }
    study = SimpleNamespace(results={n: SimpleNamespace(system=System(n, spec)) for n, spec in starts.items()})

    def rule(system, against):
        return paper_start(study, Claim("longer inputs help", system, against))

    (minilm,) = rule("WP+SP from MiniLM", "MatchBERT")
    assert not minilm.holds and "without a trained MLM head" in minilm.what
    assert "a claim whose rows differ in pre-training is not testable" in minilm.what
    assert rule("WP+SP from MiniLM", "WP+SP from MiniLM, 128 tokens") == [] and rule("SMITH-Short", "MatchBERT") == []


class ReversedStudy:
    """A pre-trained row (losses fell, from random weights) whose start probe and final score land below
    the plain row's on every query: two seeds each."""

    def __init__(self, directory):
        pre = FakeSpec({"score": 0.1, "probe": "dev probe"}, {"score": 0.3, "probe": "dev probe"}, directory)
        pre.random_init = True
        self.results = {
            "pre-trained": SimpleNamespace(system=System("pre-trained", pre), seeds=[0, 1]),
            "plain": SimpleNamespace(system=System("plain", PlainSpec()), seeds=[0, 1]),
        }

    def start_probe(self, spec):
        return spec.start_probe(self)

    def compare(self, pairs, measure):
        row = {"Δ": -0.18, "95% CI low": -0.23, "95% CI high": -0.13, "p": 0.0, MDD: 0.05}
        return pd.DataFrame([row])

    def preconditions(self, name, measure):
        return pretraining_works(self, self.results[name].system)

    def start_difference(self, claim):
        return None

    def start_conditions(self, claim):
        return paper_start(self, claim)

    def compares_pretraining(self, claim):
        return compares_pretraining(self, claim)


def test_a_pretraining_claim_whose_start_lands_below_the_plain_one_is_reported_reversed(tmp_path):
    (tmp_path / "history.json").write_text(json.dumps({"history": history([10.0] * 5 + [5.0] * 5)}))
    claim = Claim("pre-training helps", "pre-trained", "plain", "0.329 vs 0.280", pretraining=True)
    row = assess(ReversedStudy(tmp_path), [claim]).iloc[0]
    assert row["verdict"] == REVERSED
    assert "diagnostic: pre-trained's start against its start without pre-training" in row["condition"]
    assert "0.100 vs 0.300" in row["condition"] and row[MDD] == 0.05


def test_a_system_below_chance_fails_its_precondition():
    study = SimpleNamespace(
        family=SimpleNamespace(chance=lambda study, measure: 0.05),
        table=lambda names, measures: pd.DataFrame({measures[0]: [0.04]}, index=names),
    )
    condition = above_chance(study, "collapsed", "MRR@100")
    assert not condition.holds and condition.what == "collapsed above chance (MRR@100 0.040 vs 0.050)"


def test_a_study_checks_the_pretrained_row_against_its_start_without_pretraining(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0])
    row = longtriever(study, "LT", pretrain=pretrain_config(study))
    study.run(row)
    study.run(System("BM25", BM25()))
    first, probe, chance = study.preconditions("LT", "MRR@100")
    plain = study.start_probe(row.spec.without_pretraining())
    assert plain is study.start_probe(Dense("Longtriever", row.spec.encoder))  # one probe per start
    assert f"vs {plain['score']:.3f}" in probe.what and probe.diagnostic
    assert "MLM " in first.what and "LMAE " in first.what
    expected = study.table(["LT"], ["MRR@100"])["MRR@100"].iloc[0] > study.family.chance(study, "MRR@100")
    assert chance.routine and chance.holds == expected
    row_verdict = assess(study, [Claim("LT beats BM25", "LT", "BM25")]).iloc[0]
    assert row_verdict["verdict"] == NOT_TESTABLE  # one seed, and whatever the pre-training did
    assert f"{'met' if first.holds else 'NOT met'}: pre-training of LT learned" in row_verdict["condition"]
    assert "diagnostic: LT's start against its start without pre-training" in row_verdict["condition"]


def test_a_row_still_improving_at_its_last_evaluation_has_not_reached_its_plateau():
    """Only where the family trains to a plateau (NCI's); a row without training needs none."""
    from longdoc.experiments.preconditions import reached_plateau

    def training(best, last):
        return {"best_step": best, "dev_curve": [[s, 0.1] for s in range(60, last + 1, 60)]}

    plateau, fixed = SimpleNamespace(trains_to_plateau=True), SimpleNamespace(trains_to_plateau=False)

    def row(family, *runs):
        return SimpleNamespace(system=SimpleNamespace(family=family), training=list(runs))

    results = {
        "NCI": row(plateau, training(180, 300), training(120, 240)),
        "DSI": row(plateau, training(240, 240), training(120, 240)),
        "BM25": row(plateau),
        "FirstP": row(fixed, training(240, 240)),  # a dense row in NCI's table trains a fixed budget
    }
    study = SimpleNamespace(results=results)
    assert reached_plateau(study, "NCI").holds and reached_plateau(study, "BM25") is None
    assert reached_plateau(study, "FirstP") is None
    condition = reached_plateau(study, "DSI")
    assert not condition.holds and condition.routine
    assert condition.what == (
        "DSI reached its dev plateau (per seed: dev-best step [240, 120] of [240, 240] trained, stopped by its rule "
        "[False, True])"
    )


def test_a_run_that_stopped_at_its_cap_has_not_reached_its_plateau_and_every_ensemble_member_is_checked():
    """A run whose best came before its last evaluation but that ran to the step cap (its patience rule
    never fired) has not plateaued; an ensemble's condition covers every member's runs."""
    from longdoc.experiments.preconditions import reached_plateau, stopped_at_plateau

    def run(best, last, stopped):
        curve = [[s, 0.1] for s in range(60, last + 1, 60)]
        return {"best_step": best, "dev_curve": curve, "stopped_early": stopped, "patience": 2}

    capped, stopped = run(420, 480, False), run(300, 420, True)
    assert not stopped_at_plateau(capped) and stopped_at_plateau(stopped)
    assert stopped_at_plateau(capped | {"patience": 0})  # no stopping rule (smoke): its best came before its last
    plateau = SimpleNamespace(trains_to_plateau=True)

    def row(name, *runs, spec=None):
        system = SimpleNamespace(name=name, family=plateau, spec=spec or SimpleNamespace())
        return SimpleNamespace(system=system, training=list(runs))

    results = {"NCI": row("NCI", capped, stopped), "NCI k1": row("NCI k1", stopped, stopped)}
    members = (results["NCI"].system, results["NCI k1"].system)
    results["ensemble"] = row("ensemble", spec=SimpleNamespace(members=members))
    study = SimpleNamespace(results=results)
    assert not reached_plateau(study, "NCI").holds and reached_plateau(study, "NCI k1").holds
    condition = reached_plateau(study, "ensemble")
    assert not condition.holds and "NCI: dev-best step [420, 300] of [480, 420]" in condition.what
    assert "stopped by its rule [False, True]" in condition.what and "NCI k1:" in condition.what
    results["NCI"] = row("NCI", stopped, stopped)
    assert reached_plateau(study, "ensemble").holds


def test_each_table_reports_how_far_the_starts_predict_the_final_scores_and_flags_a_claim_decided_at_the_start():
    """Spearman's ρ over the trained rows' start probes and final test scores; a claim whose rows' starts
    differ by more than the paper's Δ carries a diagnostic flag (never a gate)."""
    from longdoc.experiments.study import Study
    from longdoc.experiments.verdicts import decided_at_start

    starts = {"A": 0.30, "B": 0.20, "C": 0.10, "BM25": None}
    finals = {"A": 0.5, "B": 0.4, "C": 0.45, "BM25": 0.3}
    study = Study.__new__(Study)
    study.family = SimpleNamespace(selection_measure="MRR@100")
    study._start_scores, study.params = ((), None), {}
    study.results = {
        n: SimpleNamespace(system=SimpleNamespace(spec=SimpleNamespace(trained=s is not None, start=s)))
        for n, s in starts.items()
    }
    study.start_probe = lambda spec: {"score": spec.start, "accuracy": spec.start}
    study.table = lambda names, measures: pd.DataFrame({measures[0]: [finals[names[0]]]}, index=names)
    frame = study.start_scores()
    results_c = study.results["C"]
    assert list(frame.index) == ["A", "B", "C"] and list(frame["test MRR@100"]) == [0.5, 0.4, 0.45]
    # three rows have six orders, whose ρ are ±1 and ±0.5 (twice each): |ρ| ≥ 0.5 always, |ρ| = 1 one time in three
    line = study.start_line()
    assert "over 3 trained rows: Spearman ρ = 0.50 (rows in a random order reach |ρ| ≥ 0.50 with probability 1)" in line
    from longdoc.experiments.study import chance_of_rho

    assert chance_of_rho(np.array([0.3, 0.2, 0.1]), np.array([0.5, 0.4, 0.3]), 1.0) == pytest.approx(1 / 3)
    # fewer than three probed rows: no ρ, and the line says why (a family without a probe, as NCI's)
    study._start_scores = ((), None)
    two = {n: study.results[n] for n in ("A", "B")}
    study.results, study.params = two, {}
    assert study.start_line() == "No start-probe ρ: 2 of 2 trained rows have a start probe; ρ needs three."
    study._start_scores, study.start_probe = ((), None), lambda spec: None
    assert "this family has no probe of a start" in study.start_line()
    study.results, study._start_scores = {**two, "C": results_c}, ((), None)
    study.start_probe = lambda spec: {"score": spec.start, "accuracy": spec.start}
    assert study.start_difference(Claim("A beats C", "A", "C")) == pytest.approx(0.2)
    assert study.start_difference(Claim("A beats BM25", "A", "BM25")) is None
    flag = decided_at_start(0.2, 0.05, our_delta=0.1)
    assert flag.holds and flag.diagnostic and "differ by +0.200" in flag.what and "Δ +0.050" in flag.what
    assert decided_at_start(-0.2, 0.05, our_delta=-0.1).holds  # the start favoured the row that ends ahead
    assert decided_at_start(0.02, 0.05, 0.1) is None and decided_at_start(0.2, None, 0.1) is None
    # a start gap that the final order reverses was overcome, not inherited: no flag
    assert decided_at_start(0.2, 0.05, our_delta=-0.1) is None and decided_at_start(-0.2, 0.05, 0.1) is None


def test_the_report_reads_the_reasons_its_producers_write(tmp_path):
    """The first screen counts why claims are not testable by matching the texts the conditions write
    (``report.REASONS``, ``LOSS_CHECK``, ``AT_START``): each producer's own failing text maps to its reason,
    so rewording a condition cannot silently drop it from the counts."""
    from longdoc.experiments import report
    from longdoc.experiments.verdicts import decided_at_start, enough_runs

    (tmp_path / "history.json").write_text(json.dumps({"history": history([10.0] * 5 + [9.2] * 5)}))
    system = System(
        "LT", FakeSpec({"score": 0.3, "probe": "dev probe"}, {"score": 0.2, "probe": "dev probe"}, tmp_path)
    )
    learned, _ = pretraining_works(ProbingStudy(), system)
    study = SimpleNamespace(
        results={
            "LT": SimpleNamespace(system=system, seeds=[0]),
            "plain": SimpleNamespace(system=System("plain", PlainSpec()), seeds=[0, 1]),
        },
        family=SimpleNamespace(chance=lambda study, measure: 0.05),
        table=lambda names, measures: pd.DataFrame({measures[0]: [0.04]}, index=names),
    )
    claim = Claim("pre-training helps", "LT", "plain", pretraining=True)
    (start,) = paper_start(study, claim)
    expected = {
        learned: report.LOSS_REASON,
        start: "pre-trained from a contrastive encoder, not the paper's start",
        above_chance(study, "LT", "MRR@100"): "a compared row at chance",
        enough_runs(study, claim): "a compared row ran one seed",
    }
    for condition, reason in expected.items():
        assert not condition.holds
        assert report.unmet_reasons(f"NOT met: {condition.what}") == [reason], condition.what
    assert report.closest_loss_miss(f"NOT met: {learned.what}") == (
        (False, 2.0),
        "MLM −8.0% of LT against the 10% bar (no other condition of that claim is unmet)",
    )
    assert report.AT_START in decided_at_start(0.2, 0.01, 0.05).what
