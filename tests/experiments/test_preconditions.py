"""Preconditions of a claim: pre-training works (its losses fell and its start beats the plain start
on the dev probe) and the system is above chance; wired into every study."""

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from longdoc.experiments.families.retrieval import BM25, Dense
from longdoc.experiments.papers.longtriever import longtriever, pretrain_config
from longdoc.experiments.preconditions import above_chance, losses_fell, pretraining_works
from longdoc.experiments.systems import System
from longdoc.experiments.verdicts import NOT_TESTABLE, Claim, assess


def history(mlm, lmae=None):
    return [
        {"phase": "full", "step": i, "mlm": m, **({} if lmae is None else {"lmae": lmae[i]})} for i, m in enumerate(mlm)
    ]


def test_every_pretraining_loss_must_fall_by_a_tenth():
    assert losses_fell(history([10.0] * 10 + [8.0] * 10))[0]
    fell, text = losses_fell(history([10.0] * 20, [10.0] * 10 + [8.0] * 10))
    assert not fell and text == "MLM +0%, LMAE −20%"
    assert not losses_fell([{"phase": "head", "step": 0, "mlm": 1.0}])[0]


class FakeSpec:
    def __init__(self, probe, plain_probe, directory):
        self.probe, self.plain_probe, self.directory = probe, plain_probe, directory

    def without_pretraining(self):
        return SimpleNamespace(start_probe=lambda study: self.plain_probe, start_key=lambda: "plain")

    def start_probe(self, study):
        return self.probe

    def start_key(self):
        return "pre-trained"

    def pretraining_steps(self, study):
        return json.loads((self.directory / "history.json").read_text())["history"]


class ProbingStudy:
    def start_probe(self, spec):
        return spec.start_probe(self)


@pytest.mark.parametrize(
    ("losses", "probe", "holds"),
    [
        ([10.0] * 5 + [5.0] * 5, {"score": 0.3, "loss": 2.0}, True),
        ([10.0] * 10, {"score": 0.3, "loss": 2.0}, False),  # the losses did not fall
        ([10.0] * 5 + [5.0] * 5, {"score": 0.3, "loss": 3.0}, False),  # a higher loss on the probe
        ([10.0] * 5 + [5.0] * 5, {"score": 0.1, "loss": 2.0}, False),  # a lower score: erased the backbone
    ],
)
def test_pretraining_works_only_when_losses_fell_and_the_start_beats_the_plain_one(tmp_path, losses, probe, holds):
    (tmp_path / "history.json").write_text(json.dumps({"history": history(losses)}))
    plain = {"score": 0.2, "loss": 2.5, "probe": "dev probe"}
    system = System("LT", FakeSpec({**probe, "probe": "dev probe"}, plain, tmp_path))
    condition = pretraining_works(ProbingStudy(), system)
    assert condition.holds is holds and condition.what.startswith("pre-training of LT works")
    assert f"{probe['score']:.3f} vs 0.200" in condition.what


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
    first, chance = study.preconditions("LT", "MRR@100")
    plain = study.start_probe(row.spec.without_pretraining())
    assert plain is study.start_probe(Dense("Longtriever", row.spec.encoder))  # one probe per start
    assert f"vs {plain['score']:.3f}" in first.what and "MLM " in first.what and "LMAE " in first.what
    expected = study.table(["LT"], ["MRR@100"])["MRR@100"].iloc[0] > study.family.chance(study, "MRR@100")
    assert chance.routine and chance.holds == expected
    row_verdict = assess(study, [Claim("LT beats BM25", "LT", "BM25")]).iloc[0]
    assert row_verdict["verdict"] == NOT_TESTABLE  # one seed, and whatever the pre-training did
    assert f"{'met' if first.holds else 'NOT met'}: pre-training of LT works" in row_verdict["condition"]


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
    assert condition.what == "DSI reached its dev plateau (dev-best step [240, 120] of [240, 240] trained, per seed)"
