"""The experiment on the start built here (notebooks 50 and 51): the rule by which a row learns, the budget
search that stops at the first budget where every row does, and a search whose record is the notebook's."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from longdoc.experiments.papers import built_start
from longdoc.experiments.papers.built_start import LONGTRIEVER, SMITH, StartBudgets, StartExperiment


class FakeStudy:
    """What the search reads of a study: its notebook, budget, searched multiples and fitted rows."""

    def __init__(self, steps: int, budgets: list[int], fitted: list[int]):
        self.notebook, self.params, self.budgets, self.fitted = (
            LONGTRIEVER.table.notebook,
            {"train_steps": steps},
            budgets,
            fitted,
        )

    def settings(self, kind):
        assert kind is StartBudgets
        return StartBudgets(start_budgets=self.budgets)

    def with_parameters(self, **changes):
        return FakeStudy(changes["train_steps"], self.budgets, self.fitted)

    def run_table(self, table):
        assert table is LONGTRIEVER.table
        self.fitted.append(self.params["train_steps"])
        return [SimpleNamespace(name=n) for n in ("I", "II", "III")]


def learning_from(steps: int):
    def learns(study, names, experiment):
        ok = study.params["train_steps"] >= steps
        return pd.DataFrame({"train_steps": study.params["train_steps"], "row": names, "learns": [ok, ok, True]})

    return learns


def test_the_search_stops_at_the_first_budget_where_every_row_learns(monkeypatch):
    fitted = []
    monkeypatch.setattr(built_start, "learns", learning_from(8))
    search = built_start.budget_search(FakeStudy(4, [4, 1, 2], fitted))
    assert fitted == [4, 8] and search.study.params["train_steps"] == 8 and search.found
    assert list(search.budgets["budget"].unique()) == ["1×", "2×"]


def test_a_search_where_no_budget_learns_ends_at_the_largest_and_says_so(monkeypatch):
    fitted = []
    monkeypatch.setattr(built_start, "learns", learning_from(1000))
    search = built_start.budget_search(FakeStudy(4, [1, 2, 4], fitted))
    assert fitted == [4, 8, 16] and not search.found
    backbone = pd.DataFrame([{"backbone": "bert", "built here": False, "MLM head": True, "learned language": True}])
    text = built_start.decision(backbone, search)
    assert "at 16 steps, the largest budget tried (4, 8, 16), I, II still fail the rule" in text
    assert "stay not testable" in text and not built_start.start_precondition(backbone, search).holds


def test_claims_are_posed_only_on_an_mlm_start_whose_rows_learn(monkeypatch):
    monkeypatch.setattr(built_start, "learns", learning_from(4))
    search = built_start.budget_search(FakeStudy(4, [1, 2], []))
    mlm = pd.DataFrame([{"backbone": "bert", "built here": False, "MLM head": True, "learned language": True}])
    minilm = pd.DataFrame([{"backbone": "minilm", "built here": False, "MLM head": False, "learned language": False}])
    assert built_start.start_precondition(mlm, search).holds and "are posed on it" in built_start.decision(mlm, search)
    assert not built_start.start_precondition(minilm, search).holds
    assert "has no trained MLM head" in built_start.decision(minilm, search)


def test_the_packaged_minilm_has_no_trained_mlm_head_and_a_saved_mlm_has_one(tmp_path, tokenizer):
    from transformers import BertConfig, BertForMaskedLM

    from longdoc.models.backbone import resolve_backbone

    assert not built_start.mlm_head_trained(resolve_backbone("minilm"))
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    BertForMaskedLM(config).save_pretrained(tmp_path / "mlm")
    assert built_start.mlm_head_trained(str(tmp_path / "mlm"))


class FakeTable:
    def __init__(self, chance: float, rows: dict[str, tuple[float, float]]):
        self.family = SimpleNamespace(chance=lambda study, measure, split: chance if split == "dev" else None)
        self.params = {"train_steps": 32}
        self.rows = rows

    def table(self, names, measures, split, intervals):
        assert split == "dev"  # the budget is chosen on dev, never on the test split its verdicts read
        (m,) = measures
        return pd.DataFrame(
            {
                m: [self.rows[n][0] for n in names],
                f"{m} 95% low": [self.rows[n][1] for n in names],
                f"{m} 95% high": [2 * self.rows[n][0] - self.rows[n][1] for n in names],
                "seeds": 2,
            },
            index=names,
        )


@pytest.mark.parametrize(
    "experiment, chance, row, learns",
    [
        (LONGTRIEVER, 0.006, (0.06, 0.03), True),
        (LONGTRIEVER, 0.006, (0.04, 0.03), False),  # under the floor of 0.05
        (LONGTRIEVER, 0.006, (0.06, 0.005), False),  # its interval reaches chance
        (SMITH, 0.5, (0.70, 0.56), True),
        (SMITH, 0.5, (0.70, 0.54), False),  # not 0.05 above the majority label
    ],
)
def test_a_row_learns_by_its_experiment_s_rule(experiment: StartExperiment, chance, row, learns):
    study = FakeTable(chance, {"row": (*row,)})
    frame = built_start.learns(study, ["row"], experiment)
    assert bool(frame["learns"].iloc[0]) is learns and frame["chance"].iloc[0] == chance


def test_a_searched_budget_is_recorded_in_the_notebook_s_slot_with_what_it_ran_at(
    tiny_dataset, tiny_backbone, isolated_outputs
):
    from conftest import build_tiny_study

    study = build_tiny_study(tiny_dataset, tiny_backbone)
    rung = study.with_parameters(train_steps=8)
    assert rung.params["train_steps"] == 8 and rung.filed_params["train_steps"] == 4
    assert rung.shown is study.shown and rung.started == study.started
    folder = rung.record({"budgets": []})
    written = json.loads((folder / "metrics.json").read_text())
    assert written["config"]["train_steps"] == 4 and written["ran_with"] == {"train_steps": 8}


def test_every_experiment_names_its_notebook_and_a_table_the_catalogue_knows():
    from longdoc.data.registry import REPO_ROOT
    from longdoc.experiments.papers import catalogue

    for notebook, experiment in built_start.EXPERIMENTS.items():
        assert catalogue.table(notebook) is experiment.table
        assert (REPO_ROOT / "notebooks" / f"{notebook}.ipynb").is_file()
