"""The budget ladder (notebook 90): rungs multiply the headline notebook's budget under the profile,
the first rung is the headline's own runs, a one-seed rung gets no verdict, and the trend is read
from the numbers."""

import pandas as pd
import pytest

from longdoc.experiments.families.retrieval import RETRIEVAL
from longdoc.experiments.papers import catalogue, ladder
from longdoc.experiments.papers.baselines import baseline_names, passage_baselines, passage_claims
from longdoc.experiments.profiles import parameters_for
from longdoc.experiments.systems import Headline
from longdoc.experiments.verdicts import NOT_TESTABLE, Claim, claims_comparing

CPU = parameters_for(ladder.PROFILES_DIR / "cpu.yaml", ladder.NOTEBOOKS_DIR / "90_budget_ladder.ipynb")
HEADLINES = {h.key: h for h in ladder.HEADLINES}


def test_a_rung_multiplies_the_headline_notebooks_budget_under_the_profile():
    smith = ladder.rung_parameters(CPU, HEADLINES["smith"], 4, two_seeds_until=4)
    assert smith["train_steps"] == 24 * 4  # the profile's own value for 30_smith_main, times 4
    assert smith["seeds"] == [0, 1]
    nci = ladder.rung_parameters(CPU, HEADLINES["nci"], 2, two_seeds_until=1)
    assert nci["max_docs"] == 300 and nci["nci_train_steps"] == CPU["nci_train_steps"] * 2
    assert nci["nci_dev_evals"] == CPU["nci_dev_evals"] * 2  # evaluated as often: the plateau rule is the same
    assert nci["seeds"] == [0]  # above two_seeds_until: one seed
    lt = ladder.rung_parameters(CPU, HEADLINES["longtriever"], 1, two_seeds_until=4)
    assert lt["train_steps"] == CPU["train_steps"] and lt["pretrain_steps"] == CPU["pretrain_steps"]
    assert lt["seeds"] == CPU["seeds"] == [0, 1]  # 1×: the headline notebook's own seeds and verdict


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu", "paper"])
@pytest.mark.parametrize(
    "command_line",
    [
        {},
        {"train_steps": 6, "dev_evals": 3, "seeds": [3, 4]},  # gpu and cpu also set train_steps for 30 alone
        {"dataset": "elsewhere"},
        {"datasets": {"matching": "pairs-here", "nci": "nq-here"}},
        {"dataset": "elsewhere", "datasets": {"retrieval": "docs-here"}},
    ],
    ids=["none", "budget", "dataset", "roles", "dataset and a role"],
)
def test_the_1x_rung_has_the_values_run_all_gives_the_headline_notebook(profile, command_line):
    """With or without a command line, each headline's 1× rung reads exactly its notebook's parameters
    (a profile's own entry for the headline notebook does not beat ``--set``)."""
    path = ladder.PROFILES_DIR / f"{profile}.yaml"
    params = parameters_for(path, ladder.NOTEBOOKS_DIR / "90_budget_ladder.ipynb", command_line)
    assert params["command_line"] == sorted(command_line)  # each value changes what some notebook gets
    for headline in ladder.HEADLINES:
        rung = ladder.rung_parameters(params, headline, 1, two_seeds_until=4)
        assert rung == parameters_for(path, ladder.NOTEBOOKS_DIR / f"{headline.notebook}.ipynb", command_line)


def profile_copy(tmp_path, monkeypatch, entries: dict):
    """The cpu profile with other ``notebooks:`` entries, beside copies of the notebooks, where the ladder
    looks profiles up."""
    import yaml

    folder = tmp_path / "notebooks"
    (folder / "profiles").mkdir(parents=True)
    for notebook in ladder.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"):
        (folder / notebook.name).write_text(notebook.read_text())
    values = yaml.safe_load((ladder.PROFILES_DIR / "cpu.yaml").read_text()) | {"notebooks": entries}
    (folder / "profiles" / "cpu.yaml").write_text(yaml.safe_dump(values))
    monkeypatch.setattr(ladder, "PROFILES_DIR", folder / "profiles")
    return folder / "profiles" / "cpu.yaml"


def test_a_headline_entry_for_the_dataset_and_a_ladder_only_entry_keep_the_1x_rung_equal(tmp_path, monkeypatch):
    entries = {"10_longtriever_main": {"dataset": "own-docs"}, "90_budget_ladder": {"ladder_two_seeds_until": 1}}
    path = profile_copy(tmp_path, monkeypatch, entries)
    for command_line in ({}, {"datasets": {"retrieval": "docs-here"}}, {"dataset": "elsewhere"}):
        params = parameters_for(path, ladder.NOTEBOOKS_DIR / "90_budget_ladder.ipynb", command_line)
        for headline in ladder.HEADLINES:
            rung = ladder.rung_parameters(params, headline, 1, two_seeds_until=1)
            assert rung == parameters_for(path, ladder.NOTEBOOKS_DIR / f"{headline.notebook}.ipynb", command_line)


@pytest.mark.parametrize("entry", [{"train_steps": 5}, {"seeds": [0]}, {"datasets": {"matching": "m"}}])
def test_a_ladder_entry_that_sets_what_a_headline_reads_is_refused_unless_the_command_line_sets_it(
    tmp_path, monkeypatch, entry
):
    path = profile_copy(tmp_path, monkeypatch, {"90_budget_ladder": entry})
    params = parameters_for(path, ladder.NOTEBOOKS_DIR / "90_budget_ladder.ipynb")
    with pytest.raises(
        ValueError, match=rf"notebooks.90_budget_ladder sets \['{next(iter(entry))}'\], which 30_smith_main"
    ):
        ladder.rung_parameters(params, HEADLINES["smith"], 1, two_seeds_until=1)
    with pytest.raises(ValueError, match="90_budget_ladder sets"):
        ladder.check_rungs(params)  # at the top of notebook 90, before any fit
    params = parameters_for(path, ladder.NOTEBOOKS_DIR / "90_budget_ladder.ipynb", entry)
    assert ladder.rung_parameters(params, HEADLINES["smith"], 1, two_seeds_until=1) == parameters_for(
        path, ladder.NOTEBOOKS_DIR / "30_smith_main.ipynb", entry
    )


def test_a_profile_that_stops_below_16x_says_where_and_with_how_many_seeds():
    params = CPU | {"ladder_longtriever": [1, 4], "ladder_sedr": [1, 16], "ladder_two_seeds_until": 2}
    stops = ladder.stopped_short(params)
    assert "Longtriever stops at 4× (1 seed)" in stops
    assert not any(s.startswith("SeDR") for s in stops)


def test_a_parameter_the_headline_needs_and_the_ladder_lacks_is_named():
    params = {k: v for k, v in CPU.items() if k != "scratch_learning_rates"}
    with pytest.raises(ValueError, match="scratch_learning_rates"):
        ladder.rung_parameters(params, HEADLINES["smith"], 1, two_seeds_until=1)


def test_the_plan_lists_every_rung_before_any_fit():
    plan = ladder.plan(CPU)
    assert len(plan) == sum(len(set(CPU[f"ladder_{h.key}"])) for h in ladder.HEADLINES)
    nci = plan[plan["paper"] == "NCI"]
    assert nci["steps per run"].str.endswith("at most").all()  # NCI stops at its dev plateau


def test_a_headline_refuses_a_pair_without_its_claim():
    claims = [Claim("a beats b", "a", "b"), Claim("a beats c", "a", "c")]
    assert claims_comparing(claims, {("a", "c")}) == [claims[1]]
    with pytest.raises(ValueError, match="'a', 'd'"):
        claims_comparing(claims, {("a", "d")})


def test_each_headline_is_its_paper_tables_and_its_claims_compare_its_rows():
    """The ladder's headlines come from the papers' main tables: notebook and family are the table's,
    and every claim compares two of the headline's rows (NCI's claims are left out: their precondition
    trains a query generator, too slow here; its pairs are checked when the ladder runs)."""
    assert [h.notebook for h in ladder.HEADLINES] == [
        "10_longtriever_main", "20_sedr_main", "30_smith_main", "40_nci_main"
    ]  # fmt: skip
    for headline in ladder.HEADLINES:
        assert catalogue.table(headline.notebook).family is headline.family
        study = ladder.rung_study(CPU, headline, 1, 1, progress=False)
        rows = headline.rows(study)
        names = {s.name for s in rows}
        table_names = {s.name for s in catalogue.table(headline.notebook).rows(study)}
        assert names <= table_names, headline.key
        for claim in headline.claims(study, rows) if headline.key != "nci" else []:
            assert {claim.system, claim.against} <= names, (headline.key, claim)


def rung(claim, multiplier, delta, verdict, seeds=2, condition=""):
    return {
        "paper": "P",
        "claim": claim,
        "multiplier": multiplier,
        "seeds": seeds,
        "Δ": delta,
        "ours: Δ [95% CI]": f"{delta:+.3g} [...]",
        "verdict": verdict,
        "condition": condition,
    }


def test_the_trend_takes_the_largest_rung_with_a_verdict_and_the_direction_of_the_change():
    frame = pd.DataFrame(
        [
            rung("x", 1, -0.05, "reversed"),
            rung("x", 4, 0.02, "not shown at this scale"),
            rung("x", 16, 0.06, NOT_TESTABLE, seeds=1, condition="NOT met: one seed"),
            rung("y", 1, 0.03, NOT_TESTABLE, condition="NOT met: pre-training"),
            rung("y", 4, 0.01, NOT_TESTABLE, condition="NOT met: pre-training"),
        ]
    )
    trend = ladder.trend(frame).set_index("claim")
    assert trend.loc["x", "largest budget with a verdict"] == "4×"
    assert trend.loc["x", "verdict"] == "not shown at this scale"
    assert trend.loc["x", "largest budget run"] == "16× (1 seed)"
    assert trend.loc["x", "Δ moves"].startswith("toward the paper's: -0.05 at 1× → +0.06 at 16×")
    assert trend.loc["y", "verdict"] == NOT_TESTABLE and trend.loc["y", "largest budget with a verdict"] == "none"
    assert trend.loc["y", "Δ moves"].startswith("away from the paper's")
    assert "pre-training" in trend.loc["y", "why no verdict"]


def test_the_first_rung_is_the_headline_run_and_a_larger_one_trains_longer(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    headline_study = tiny_study(tiny_dataset, tiny_backbone, learning_rates=[1e-3], n_devices=1)
    names = baseline_names(headline_study)
    pair = (names["maxp"], names["first_block"])

    def rows(study):
        return [s for s in passage_baselines(study) if s.name in pair]

    toy = Headline(
        "sedr",
        "Baselines",
        ("train_steps",),
        "batch_size",
        rows,
        lambda study, systems: claims_comparing(passage_claims(study), {pair}),
        notebook="01_baselines",
        family=RETRIEVAL,
    )
    params = headline_study.params | {
        "ladder_longtriever": [1],
        "ladder_sedr": [1, 2],
        "ladder_smith": [1],
        "ladder_nci": [1],
        "ladder_two_seeds_until": 1,
    }
    frame = ladder.climb(params, progress=False, headlines=(toy,))
    assert list(frame["multiplier"]) == [1, 2] and list(frame["seeds"]) == [2, 1]
    assert list(frame["training examples"]) == [16, 32]
    assert frame.loc[1, "verdict"] == NOT_TESTABLE and "one seed" in frame.loc[1, "condition"]
    minutes = ladder.rung_minutes(frame)  # one row per rung, apart from the checked table
    assert list(minutes["budget (× profile)"]) == [1, 2] and (minutes["rung minutes"] >= 0).all()
    assert "rung minutes" not in ladder.ladder_table(frame)

    headline_study.run_all(rows(headline_study))  # the headline notebook's own runs: the 1× rung's numbers
    same = headline_study.compare([pair]).iloc[0]
    assert frame.loc[0, "Δ"] == pytest.approx(same["Δ"]) and frame.loc[0, "95% CI low"] == pytest.approx(
        same["95% CI low"]
    )

    double = ladder.rung_study(params, toy, 2, two_seeds_until=1, progress=False)
    double.run_all(rows(double))
    assert all(t["dev_curve"][-1][0] == 8 for t in double.results[pair[0]].training)  # 2 × 4 steps


def test_a_budget_in_passes_is_refused_before_any_fit_and_the_paper_study_leaves_the_ladder_out():
    """The ladder's tables and figure count budgets in steps: a headline given in passes (``train_steps: 0``)
    stops notebook 90 at its top, naming the parameter; ``paper`` (budgets in passes) leaves 90 out."""
    from longdoc.experiments.profiles import outside_the_study

    params = parameters_for(
        ladder.PROFILES_DIR / "cpu.yaml", ladder.NOTEBOOKS_DIR / "90_budget_ladder.ipynb", {"train_steps": 0}
    )
    with pytest.raises(ValueError, match="train_steps is 0 \\(a budget in passes\\)"):
        ladder.check_rungs(params)
    assert "90_budget_ladder" in outside_the_study(ladder.PROFILES_DIR / "paper.yaml")
