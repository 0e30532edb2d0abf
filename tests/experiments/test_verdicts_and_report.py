"""Verdicts come from intervals and preconditions; the report is rendered from the records alone."""

import json
import shutil
import subprocess
from types import SimpleNamespace

import pandas as pd
import pytest

from longdoc.data.registry import REPO_ROOT
from longdoc.experiments import report
from longdoc.experiments.tables import markdown_table
from longdoc.experiments.verdicts import (
    HOLDS,
    MDD,
    NOT_SHOWN,
    NOT_TESTABLE,
    REVERSED,
    UNDERPOWERED,
    Claim,
    Findings,
    Precondition,
    assess,
    paper_difference,
    verdict,
)


def test_verdicts_follow_the_interval_and_the_precondition():
    assert verdict(0.01, 0.05) == HOLDS and verdict(-0.05, -0.01) == REVERSED and verdict(-0.01, 0.02) == NOT_SHOWN
    assert verdict(0.01, 0.05, Precondition(False, "pre-training did not move the start")) == NOT_TESTABLE
    assert verdict(0.01, 0.05, Precondition(True, "it did")) == HOLDS


def test_a_claim_of_no_difference_holds_only_inside_its_margin():
    assert verdict(-0.004, 0.006, margin=0.01) == HOLDS
    assert verdict(-0.03, 0.02, margin=0.01) == NOT_SHOWN  # too wide to show equivalence
    assert verdict(0.002, 0.008, margin=0.01) == HOLDS  # a difference inside the margin is "near"
    assert verdict(0.005, 0.03, margin=0.01) == NOT_SHOWN  # may or may not exceed the margin
    assert verdict(0.02, 0.05, margin=0.01) == REVERSED  # wholly beyond it


def test_an_interval_across_zero_is_underpowered_where_the_papers_difference_is_below_the_detectable_one():
    """Underpowered only when "not shown" was bound to come: the paper's own Δ is positive and smaller
    than our minimum detectable difference; an interval clear of zero keeps its verdict."""
    assert verdict(-0.02, 0.03, detectable=0.04, paper_delta=0.015) == UNDERPOWERED
    assert verdict(-0.02, 0.03, detectable=0.04, paper_delta=0.05) == NOT_SHOWN  # we could have seen it
    assert verdict(-0.02, 0.03, detectable=0.04, paper_delta=None) == NOT_SHOWN  # no number to compare
    assert verdict(-0.02, 0.03, detectable=0.04, paper_delta=-0.01) == NOT_SHOWN  # the paper's own reversal
    assert verdict(0.001, 0.03, detectable=0.04, paper_delta=0.015) == HOLDS
    assert verdict(-0.02, 0.03, detectable=0.04, paper_delta=0.015, margin=0.01) == NOT_SHOWN


@pytest.mark.parametrize(
    ("paper", "delta"),
    [
        ("0.329 vs 0.296 (Table 2)", 0.033),
        ("Wiki65K: 0.9585 vs 0.9492; AAN104K: 0.8536 vs 0.8400", 0.0136),  # the larger collection's
        ("NQ320k: 73.12 vs 44.47 MRR@100", 0.2865),  # percentages
        ("NQ320k: M3 = 2: 72.83 vs M3 = 0: 70.56 MRR@100", 0.0227),
        ("0.409 vs STAR 0.390 (our warm start is In-Batch Neg's recipe: 0.320)", 0.019),
        ("0.434 (Table 1: 3 iterations after MS MARCO passage fine-tuning) vs 0.329 (Table 2)", 0.105),
        ("Table 6: 0.9589 / 0.9594 vs 0.9537 (Wiki65K dev)", 0.0057),
        ("Figure 3b: peak at 0.5", None),
        ("", None),
    ],
)
def test_the_papers_difference_is_read_from_its_quoted_numbers(paper, delta):
    found = paper_difference(paper)
    assert found == pytest.approx(delta) if delta is not None else found is None


class FakeStudy:
    def __init__(self, intervals, seeds=None, conditions=None, detectable=0.01):
        self.intervals, self.detectable = intervals, detectable
        names = {name for pair in intervals for name in pair}
        self.results = {name: SimpleNamespace(seeds=(seeds or {}).get(name, [0, 1, 2])) for name in names}
        self.conditions = conditions or {}

    def preconditions(self, name, measure):
        return self.conditions.get(name, [])

    def start_difference(self, claim):
        return None

    def start_conditions(self, claim):
        return []

    def compares_pretraining(self, claim):
        return claim.pretraining

    def compare(self, pairs, measure):
        ((a, b),) = pairs
        low, high = self.intervals[(a, b)]
        row = {"Δ": (low + high) / 2, "95% CI low": low, "95% CI high": high, "p": 0.01}
        return pd.DataFrame([{**row, MDD: self.detectable}])


def test_assess_labels_a_claim_underpowered_and_shows_the_detectable_difference():
    study = FakeStudy({("A", "B"): (-0.02, 0.03), ("A", "C"): (-0.02, 0.03)}, detectable=0.04)
    table = assess(study, [Claim("A beats B", "A", "B", "0.310 vs 0.300"), Claim("A beats C", "A", "C", "0.4 vs 0.3")])
    assert list(table.verdict) == [UNDERPOWERED, NOT_SHOWN] and list(table[MDD]) == [0.04, 0.04]


def test_assess_gives_one_row_per_claim_with_its_interval():
    study = FakeStudy({("A", "B"): (0.01, 0.03), ("B", "C"): (-0.04, -0.02), ("A", "C"): (0.02, 0.06)})
    claims = [
        Claim("A beats B", "A", "B", "0.3 vs 0.2"),
        Claim("B beats C", "B", "C"),
        Claim("A beats C", "A", "C", precondition=Precondition(False, "probe of A 0.1 vs C 0.2")),
    ]
    table = assess(study, claims)
    assert list(table.verdict) == [HOLDS, REVERSED, NOT_TESTABLE]
    assert (
        table.loc[0, "ours: Δ [95% CI]"] == "+0.0200 [+0.0100, +0.0300]"
    )  # three significant digits, trailing zeros kept
    assert "NOT met: probe of A" in table.loc[2, "condition"]
    text = Findings(table, "context line").markdown()
    assert "3 claim(s) of the paper: 1 holds, 1 reversed, 1 not testable at this scale." in text
    assert "2 claim(s) tested by a 95% interval" in text and "about 0.05 would hold" in text
    assert text.count("\n| ") >= 4


def test_a_trained_system_with_one_run_gets_no_verdict():
    """One run: the interval covers the items only, not the seed spread; a deterministic system (no seeds)
    needs none. An interval that only touches zero shows it at three significant digits."""
    study = FakeStudy({("A", "BM25"): (0.00004, 0.05), ("A", "B"): (0.01, 0.03)}, seeds={"BM25": [None], "B": [0]})
    table = assess(study, [Claim("A beats BM25", "A", "BM25"), Claim("A beats B", "A", "B")])
    assert list(table.verdict) == [HOLDS, NOT_TESTABLE]
    assert table.loc[0, "ours: Δ [95% CI]"] == "+0.0250 [+4.00e-05, +0.0500]" and table.loc[0, "condition"] == ""
    assert table.loc[1, "condition"] == "NOT met: one seed of B: a trained system needs two runs or more"


def test_a_system_whose_precondition_fails_makes_every_claim_naming_it_not_testable():
    """Whichever side of a claim the system stands on; a routine check (above chance) that is met stays
    out of the condition column, a failed one names the reason."""
    study = FakeStudy(
        {("A", "B"): (0.01, 0.03), ("B", "C"): (-0.04, -0.02), ("C", "D"): (0.01, 0.02)},
        conditions={
            "B": [Precondition(False, "pre-training of B works (probe 0.008 vs 0.156)")],
            "C": [Precondition(True, "C above chance", routine=True)],
            "D": [Precondition(False, "D above chance (MRR@100 0.001 vs 0.004)", routine=True)],
        },
    )
    table = assess(study, [Claim("A beats B", "A", "B"), Claim("B beats C", "B", "C"), Claim("C beats D", "C", "D")])
    assert list(table.verdict) == [NOT_TESTABLE] * 3
    assert table.loc[0, "condition"] == "NOT met: pre-training of B works (probe 0.008 vs 0.156)"
    assert table.loc[2, "condition"] == "NOT met: D above chance (MRR@100 0.001 vs 0.004)"
    assert verdict_when_met(study) == HOLDS


def verdict_when_met(study):
    study.conditions = {"B": [Precondition(True, "pre-training of B works")]}
    row = assess(study, [Claim("A beats B", "A", "B")]).iloc[0]
    assert row["condition"] == "met: pre-training of B works"
    return row["verdict"]


def test_markdown_table_escapes_pipes_and_formats_numbers():
    text = markdown_table(pd.DataFrame({"a": ["x|y"], "b": [0.12345], "c": [0.00001], "d": [float("nan")]}))
    assert "x\\|y" in text and "| 0.123 |" in text and "| 1.00e-05 |" in text and "| — |" in text


def test_tables_show_counts_as_integers_three_significant_digits_and_no_index_leftovers():
    from longdoc.experiments.tables import format_number

    assert [format_number(v) for v in (1100.0, 173.0, 0.0, 125627793408.0, 1234.5, 12.345, 0.0523, 0.000723)] == [
        "1100",
        "173",
        "0",
        "125,627,793,408",
        "1,234",
        "12.3",
        "0.0523",
        "0.000723",
    ]
    assert format_number(0.0007) == "0.000700"  # a small p value is not "0.000"
    assert format_number(0.72) == "0.720" and format_number(100.5) == "100"  # three digits, no dangling point
    assert format_number(999.6) == "1,000"  # not 1.00e+03
    from longdoc.experiments.verdicts import p_text

    assert p_text(0.0) == "< 0.0001" and p_text(0.0007) == "0.000700"  # p = 0 is below one resample in 10,000
    frame = pd.DataFrame({"n": [1100.0], "p": [0.0007]}, index=pd.MultiIndex.from_tuples([("a", "b")]))
    header = markdown_table(frame, index=True).splitlines()[0]
    assert "index" not in header and "level_" not in header and header.endswith("| n | p |")
    assert "| a | b | 1100 | 0.000700 |" in markdown_table(frame, index=True)
    named = pd.DataFrame({"n": [1.0]}, index=pd.Index(["x"], name="system"))
    assert markdown_table(named, index=True).startswith("| system | n |")


def test_a_condition_column_empty_in_every_row_is_not_shown():
    table = pd.DataFrame([{"claim": "A > B", "verdict": "holds", "condition": ""}])
    assert "condition" not in Findings(table).markdown()
    table.loc[0, "condition"] = "NOT met: one seed"
    assert "| condition |" in Findings(table).markdown()


def write_record(root, notebook, dataset="manpages", findings=None):
    directory = root / "cpu" / dataset / notebook
    directory.mkdir(parents=True)
    record = {
        "notebook": notebook,
        "profile": "cpu",
        "dataset": dataset,
        "seeds": [0, 1, 2],
        "data_checksum": "abc" * 8,
        "versions": {"git_commit": "f" * 40, "git_dirty": False},
        "code_fingerprint": "0123456789abcdef",
        "machine": {"cpu": "Test CPU", "cores": 2},
        "usage": {"seconds": 61.0, "peak_rss_gib": 1.5},
        "metrics": {
            "tables": [{"title": "Main", "note": "", "markdown": "| a |\n|---|\n| 1 |"}],
            "figures": [f"figures/cpu/{dataset}/{notebook}.png"],
            "findings": findings,
        },
    }
    (directory / "metrics.json").write_text(json.dumps(record))


def test_the_report_is_rendered_from_the_records(tmp_path):
    root = tmp_path / "results"
    claims = [{"claim": "A beats B", "paper": "0.3 vs 0.2", "verdict": HOLDS}]
    write_record(root, "10_longtriever_main", findings={"context": "", "claims": claims})
    write_record(root, "14_efficiency", dataset="random-weights")
    (root / "cpu" / "timings.tsv").write_text("10_longtriever_main\t100\tok\tT\n10_longtriever_main\t120\tok\tT2\n")
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md")
    assert "commit `ffffffffffff`" in text and "Test CPU, 2 cores" in text
    assert "| 10_longtriever_main | manpages | 2.0 min |" in text  # the last timing of a notebook counts
    assert "| A beats B | 0.3 vs 0.2 | holds |" in text and "### Main" in text
    assert "### Findings\n\n**1 claim(s) of the paper: 1 holds.**" in text  # the verdict count, no empty context line
    assert "](figures/cpu/manpages/10_longtriever_main.png)" in text
    assert (
        "| 10_longtriever_main (STALE) | 1 | 1 | 0 | 0 | 0 | 0 |" in text
    )  # the claims at a glance (a planted fingerprint)
    assert "| 14_efficiency |" not in text.split("## Paper claims at a glance")[1].split("##")[0]  # no claims, no row
    with pytest.raises(FileNotFoundError, match="run_all.sh --profile smoke"):
        report.render("smoke", root=root)


def test_the_report_marks_a_planted_stale_record_on_its_first_screen_and_in_its_section(tmp_path, monkeypatch):
    """A record made by other code than the checkout's (its artefacts' code, or only the code that computes
    its verdicts) is named before the claim cards and flagged in its own section; a current one is not; a
    record older than the verdicts' fingerprint is judged by its code fingerprint."""
    monkeypatch.setattr("longdoc.experiments.cache.code_fingerprint", lambda: "0123456789abcdef")
    monkeypatch.setattr("longdoc.experiments.cache.record_fingerprint", lambda: "0123456789abcdef+aaaa")
    root = tmp_path / "results"
    for notebook in ("10_longtriever_main", "20_sedr_main", "30_smith_main"):
        write_record(root, notebook)
    path = {n: root / "cpu" / "manpages" / n / "metrics.json" for n in ("10_longtriever_main", "20_sedr_main")}

    def fingerprint(notebook, value):
        record = json.loads(path[notebook].read_text())
        path[notebook].write_text(json.dumps(record | {"record_fingerprint": value}))

    fingerprint("10_longtriever_main", "0123456789abcdef+aaaa")  # current
    fingerprint("20_sedr_main", "0123456789abcdef+bbbb")  # the same fits, verdicts computed by other code
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md")
    first_screen = text.split("## Claim cards")[0]
    assert "**STALE: 1 of 3 records was made by other code than this checkout's**" in first_screen
    assert "notebooks 20 by `0123456789abcdef+bbbb`" in first_screen and "`0123456789abcdef+aaaa`" in first_screen
    section = {n: text.split(f"`{n}` on")[1].split("\n## ")[0] for n in ("10_longtriever_main", "20_sedr_main")}
    assert "**STALE:** made by code `0123456789abcdef+bbbb`" in section["20_sedr_main"]
    assert "STALE" not in section["10_longtriever_main"]
    assert "made by this checkout's code (`0123456789abcdef+aaaa`)" in section["10_longtriever_main"]
    assert "made by this checkout's code" not in section["20_sedr_main"]  # a stale section names its own code
    smith = root / "cpu" / "manpages" / "30_smith_main" / "metrics.json"  # no verdicts' fingerprint: its code's
    smith.write_text(smith.read_text().replace("0123456789abcdef", "feedfacefeedface"))
    fingerprint("20_sedr_main", "0123456789abcdef+aaaa")
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md")
    assert "**STALE: 1 of 3 records" in text and "notebooks 30 by `feedfacefeedface`" in text
    smith.write_text(smith.read_text().replace("feedfacefeedface", "0123456789abcdef"))
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md")
    assert "**Current.** Every record was made by this checkout's code" in text and "STALE" not in text


def test_the_first_screen_counts_verdicts_per_paper_with_why_claims_are_not_testable(tmp_path):
    root = tmp_path / "results"
    claims = [
        {"claim": "a", "verdict": HOLDS, "condition": ""},
        {"claim": "b", "verdict": UNDERPOWERED, "condition": ""},
        {"claim": "c", "verdict": NOT_TESTABLE, "condition": "NOT met: one seed of B: a trained system needs two runs"},
        {
            "claim": "d",
            "verdict": NOT_TESTABLE,
            "condition": "met: x; NOT met: I is pre-trained from minilm, without "
            "a trained MLM head (a contrastive sentence encoder, as the packaged MiniLM), the start the paper assumes",
        },
        {  # two unmet conditions: counted under each, not only under its first
            "claim": "f",
            "verdict": NOT_TESTABLE,
            "condition": "NOT met: pre-training of I learned (every loss down 10% to its last: MLM −17%, LMAE −9%); NOT met: I is "
            "pre-trained from minilm, without a trained MLM head (a contrastive sentence encoder)",
        },
    ]
    write_record(root, "11_longtriever_ablation", findings={"context": "", "claims": claims})
    write_record(root, "50_built_start", findings={"context": "", "claims": claims[:1]})
    own_wording = [{"claim": "e", "verdict": "not met / reversed", "condition": ""}]  # the efficiency benchmark's
    write_record(root, "14_efficiency", findings={"context": "", "claims": own_wording})
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md").split("## Claim cards")[0]
    assert (
        "- **Longtriever**: 7 claims: 2 holds, 1 underpowered here, 3 not testable at this scale, 1 not met / "
        "reversed (why not testable, every unmet condition counted: 2 pre-trained from a contrastive encoder, not "
        "the paper's start (notebook 11); 1 a compared row ran one seed (notebook 11); 1 a pre-training failed its "
        "check (notebook 11; nearest to passing it: LMAE −9% of I against the 10% bar (that claim also fails: "
        "pre-trained from a contrastive encoder, not the paper's start))); 7 from STALE records." in text
    )  # the planted records' fingerprint is not the code's: stale


def test_a_claims_miss_of_the_loss_check_is_its_loss_furthest_below_the_bar():
    """A claim passes the loss check only when every loss clears the bar, so its distance from passing is
    its worst loss; of several claims the nearest is the one whose worst loss is nearest the bar."""
    condition = (
        "met: x; NOT met: pre-training of A learned (every loss down 10% from its first tenth of steps to its "
        "last: MLM −5%, LMAE +1%); NOT met: pre-training of B learned (every loss down 10% from its first tenth "
        "of steps to its last: MLM −17%, SP −8%)"
    )
    assert report.closest_loss_miss(condition) == (
        (False, 11),
        "LMAE +1% of A against the 10% bar, and 2 other losses below it (no other condition of that claim is unmet)",
    )
    one_row = (
        "NOT met: pre-training of B learned (every loss down 10% from its first tenth of steps to its last: SP −9.6%)"
    )
    assert report.closest_loss_miss(one_row) == (
        (False, pytest.approx(0.4)),
        "SP −9.6% of B against the 10% bar (no other condition of that claim is unmet)",
    )
    other = "NOT met: one seed of B: a trained system needs two runs; " + one_row
    assert report.closest_loss_miss(other) == (
        (True, pytest.approx(0.4)),
        "SP −9.6% of B against the 10% bar (that claim also fails: a compared row ran one seed)",
    )
    # of two claims the one nearest to passing comes first, a claim with another unmet condition after it
    claims = [condition, other, one_row.replace("−9.6%", "−9.0%")]
    assert min(report.closest_loss_miss(c) for c in claims)[1].startswith("SP −9.0% of B")
    assert report.closest_loss_miss("met: pre-training of A learned (every loss down 10% ...: MLM −15%)") is None


def test_the_first_screen_counts_untestable_claims_whose_interval_lies_against_the_claim(tmp_path):
    root = tmp_path / "results"
    unmet = "NOT met: one seed of B: a trained system needs two runs"
    claims = [
        {"claim": "a", "verdict": NOT_TESTABLE, "condition": unmet, "ours: Δ [95% CI]": "-0.161 [-0.233, -0.0895]"},
        {"claim": "b", "verdict": NOT_TESTABLE, "condition": unmet, "ours: Δ [95% CI]": "-0.02 [-0.06, +0.02]"},
        {"claim": "c", "verdict": NOT_TESTABLE, "condition": unmet, "ours: Δ [95% CI]": "+0.05 [+0.01, +0.09]"},
        {  # a claim of no difference reads its interval against its margin, not zero
            "claim": "d",
            "verdict": NOT_TESTABLE,
            "condition": unmet,
            "ours: Δ [95% CI]": "-0.3 [-0.4, -0.2]",
            "margin": 0.05,
        },
        {"claim": "e", "verdict": REVERSED, "condition": "", "ours: Δ [95% CI]": "-0.3 [-0.4, -0.2]"},
    ]
    write_record(root, "11_longtriever_ablation", findings={"context": "", "claims": claims})
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md").split("## Claim cards")[0]
    assert "; 1 of the 4 not testable lie wholly against the claim" in text


def test_the_limit_line_adds_the_build_of_a_backbone_made_here():
    build = [{"backbone": "manpages-mlm", "machine": "EPYC", "minutes": 42.1, "notebook": "50"}]
    line = report.limit_lines({"EPYC": 6.5 * 3600}, {"EPYC": 25}, 25, 7.0, builds=build)[0]
    assert "EPYC: 6.50 h for 25 of 25 notebooks, within the limit." in line
    assert (
        "manpages-mlm trained in 42.1 min on EPYC" in line
        and "with it, EPYC: 7.20 h for 25 of 25 notebooks, over" in line
    )
    table = "| backbone | built here | minutes |\n|---|---|---|\n| manpages-mlm | True | 42.1 |\n| minilm | False | — |"
    record = {
        "notebook": "50_built_start",
        "machine": {"cpu": "EPYC", "cores": 2},
        "versions": {},
        "metrics": {"tables": [{"title": "The backbone (question 1)", "markdown": table, "note": ""}]},
    }
    assert report.backbone_builds([record, {**record, "notebook": "51_built_start_smith"}]) == [
        {"backbone": "manpages-mlm", "machine": report._machine(record), "minutes": 42.1, "notebook": "50"}
    ]


def test_the_report_redraws_each_notebooks_claims_figure_from_its_record(tmp_path):
    """A notebook's claims figure is redrawn from the findings in its record (no training), at the path
    the record lists, with one row per claim that has an interval."""
    root = tmp_path / "results"
    claims = [
        {"claim": "A beats B", "paper": "0.3 vs 0.2", "ours: Δ [95% CI]": "+0.05 [+0.01, +0.09]", "verdict": HOLDS},
        {"claim": "a trend", "paper": "Figure 3", "ours: Δ [95% CI]": "—", "verdict": NOT_TESTABLE},
    ]
    write_record(root, "20_sedr_main", findings={"context": "", "claims": claims})
    record = root / "cpu" / "manpages" / "20_sedr_main" / "metrics.json"
    data = json.loads(record.read_text())
    data["metrics"]["figures"].append("figures/cpu/manpages/20_sedr_main_claims.png")
    record.write_text(json.dumps(data))
    write_record(root, "10_longtriever_main", findings={"context": "", "claims": claims})  # lists no claims figure
    written = report.write_notebook_claim_figures("cpu", root=root, link_base=tmp_path)
    assert written == [tmp_path / "figures/cpu/manpages/20_sedr_main_claims.png"] and written[0].stat().st_size > 1000


def test_a_notebook_without_its_record_keeps_its_section_from_the_previous_report(tmp_path):
    root = tmp_path / "results"
    claims = [{"claim": "A beats B", "paper": "0.3 vs 0.2", "verdict": HOLDS}]
    write_record(root, "10_longtriever_main", findings={"context": "", "claims": claims})
    write_record(root, "20_sedr_main", findings={"context": "", "claims": claims})
    (root / "cpu" / "timings.tsv").write_text("10_longtriever_main\t120\tok\tT\n20_sedr_main\t60\tok\tT\n")
    out = tmp_path / "RESULTS.md"
    out.write_text(report.render("cpu", root=root, link_base=tmp_path, out=out))
    shutil.rmtree(root / "cpu" / "manpages" / "10_longtriever_main")  # another machine: only 20's record
    for record in (root / "cpu" / "manpages" / "20_sedr_main" / "metrics.json",):
        record.write_text(record.read_text().replace("f" * 40, "e" * 40))
    again = report.render("cpu", root=root, link_base=tmp_path, out=out)
    assert "| 10_longtriever_main (carried over) | manpages | 2.0 min |" in again and "**3.0 min**" in again
    assert "*Carried over from the previous report (commit `ffffffffffff`)" in again  # the commit that made it
    assert again.index("`10_longtriever_main` on") < again.index("`20_sedr_main` on")  # notebook order kept
    assert "| 10_longtriever_main (carried over) | 1 | 1 | 0 | 0 | 0 |" in again
    out.write_text(again)
    assert report.render("cpu", root=root, link_base=tmp_path, out=out) == again  # carrying twice changes nothing


def test_the_time_table_says_how_many_artefacts_a_run_trained_and_links_the_executed_notebook(tmp_path):
    root = tmp_path / "results"
    write_record(root, "10_longtriever_main")
    write_record(root, "20_sedr_main")
    (root / "cpu" / "timings.tsv").write_text("10_longtriever_main\t120\tok\tT\t7\n20_sedr_main\t60\tok\tT\n")
    (root / "cpu" / "executed").mkdir()
    (root / "cpu" / "executed" / "10_longtriever_main.ipynb").write_text("{}")
    out = tmp_path / "RESULTS.md"
    text = report.render("cpu", root=root, link_base=tmp_path, out=out)
    assert "| 10_longtriever_main | manpages | 2.0 min | 7 | 1.0 min | 1.5 | Test CPU, 2 cores |" in text
    assert (
        "| 20_sedr_main | manpages | 1.0 min | — | 1.0 min | 1.5 | Test CPU, 2 cores |" in text
    )  # written before the count
    assert "Executed notebook: [10_longtriever_main.ipynb](results/cpu/executed/10_longtriever_main.ipynb)." in text
    assert (
        "`20_sedr_main` on manpages; seeds [0, 1, 2]; record `results/cpu/manpages/20_sedr_main/metrics.json`.\n"
        in text
    )
    older = text.replace(
        "| 2.0 min | 7 | 1.0 min | 1.5 | Test CPU, 2 cores |", "| 2.0 min | 1.0 min | 1.5 |"
    )  # 5 columns
    out.write_text(older)
    shutil.rmtree(root / "cpu" / "manpages" / "10_longtriever_main")
    again = report.render("cpu", root=root, link_base=tmp_path, out=out)
    # the machine of a row without one is the one the older report's provenance names
    assert (
        "| 10_longtriever_main (carried over) | manpages | 2.0 min | — | 1.0 min | 1.5 | Test CPU, 2 cores |" in again
    )


def test_a_record_of_other_data_under_the_profile_never_stands_in_for_its_own(tmp_path):
    """A cpu run on another dataset (its own folder, its executed notebook and timing filed apart by
    run_all.sh) gets its own section; the claim cards, times and executed notebook of the profile's own
    record stay its own."""
    root = tmp_path / "results"
    ours = [{"claim": "A beats B", "paper": "0.3 vs 0.2", "verdict": HOLDS}]
    theirs = [{"claim": "A beats B", "paper": "0.3 vs 0.2", "verdict": REVERSED}]
    write_record(root, "10_longtriever_main", findings={"context": "", "claims": ours})
    write_record(root, "10_longtriever_main", dataset="zz-mine", findings={"context": "", "claims": theirs})
    found = report.records("cpu", root)
    assert [report.own_record(r) for r in found] == [True, False]  # sorted by dataset: the other one last
    assert report.by_notebook_own_last(found)["10_longtriever_main"]["dataset"] == "manpages"
    assert report.by_notebook_own_last(found[::-1])["10_longtriever_main"]["dataset"] == "manpages"
    (root / "cpu" / "timings.tsv").write_text(
        "10_longtriever_main\t120\tok\tT\nzz-mine/10_longtriever_main\t60\tok\tT\n"
    )
    (root / "cpu" / "executed" / "zz-mine").mkdir(parents=True)
    (root / "cpu" / "executed" / "zz-mine" / "10_longtriever_main.ipynb").write_text("{}")
    assert report.executed_notebook(root, "cpu", found[0]) is None  # never the other run's notebook
    assert report.executed_notebook(root, "cpu", found[1]).parent.name == "zz-mine"
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md")
    assert (
        "| 10_longtriever_main | manpages | 2.0 min |" in text and "| 10_longtriever_main | zz-mine | 1.0 min |" in text
    )


def test_times_from_different_machines_are_totalled_apart(tmp_path):
    root = tmp_path / "results"
    write_record(root, "10_longtriever_main")
    write_record(root, "20_sedr_main")
    record = root / "cpu" / "manpages" / "20_sedr_main" / "metrics.json"
    record.write_text(record.read_text().replace("Test CPU", "Other CPU"))
    (root / "cpu" / "timings.tsv").write_text("10_longtriever_main\t120\tok\tT\n20_sedr_main\t60\tok\tT\n")
    text = report.render("cpu", root=root, link_base=tmp_path, out=tmp_path / "RESULTS.md")
    assert "| **total** | | **2.0 min** | | | | Test CPU, 2 cores |" in text
    assert "| **total** | | **1.0 min** | | | | Other CPU, 2 cores |" in text
    assert "**3.0 min**" not in text


def test_a_malformed_timings_line_is_named(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "timings.tsv").write_text("10_longtriever_main\t120\tok\tT\n10_longtriever_main 120\n")
    with pytest.raises(ValueError, match=r"timings.tsv:2: expected 4 or 5 tab-separated fields, got 1"):
        report.timings("cpu", root=tmp_path)


def test_the_committed_report_is_what_the_committed_records_render(tmp_path):
    """RESULTS.md is rendered from the tracked cpu records alone: a record or a change to the report
    code without a regenerated RESULTS.md fails here (the files are copied, nothing tracked is written)."""
    try:
        tracked = subprocess.run(
            ["git", "ls-files", "RESULTS.md", "results/cpu"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    if not any(path.endswith("metrics.json") for path in tracked):
        pytest.skip("no cpu record is committed")
    for path in tracked:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / path, tmp_path / path)
    committed = (tmp_path / "RESULTS.md").read_text()
    rendered = report.render("cpu", root=tmp_path / "results", link_base=tmp_path, out=tmp_path / "RESULTS.md")
    assert rendered == committed, (
        "RESULTS.md is stale (a record, the report's code, or code in the fingerprint changed, which its first "
        "screen names): python -m longdoc.experiments.report --profile cpu"
    )


def test_the_report_header_names_the_seeds_each_row_ran():
    from longdoc.experiments.report import seeds_used

    one = {"seeds": [0, 1, 2], "metrics": {"systems": {"BM25": {"seeds": [None]}, "A": {"seeds": [0, 1, 2]}}}}
    assert seeds_used(one) == "seeds [0, 1, 2] (every trained row)"
    mixed = {
        "seeds": [0, 1, 2],
        "metrics": {"systems": {"A": {"seeds": [0, 1, 2]}, "B": {"seeds": [0]}, "C": {"seeds": [0]}}},
    }
    assert seeds_used(mixed) == "seeds [0, 1, 2]: A; [0]: B, C"
    assert seeds_used({"seeds": [0], "metrics": {}}) == "seeds [0]"


def test_the_claims_at_a_glance_follow_notebook_order_carried_over_or_not():
    found = [
        {"notebook": "01_baselines", "metrics": {"findings": {"claims": [{"verdict": HOLDS}]}}},
        {
            "notebook": "14_efficiency",
            "metrics": {"findings": {"claims": [{"verdict": HOLDS}, {"verdict": "not met"}]}},
        },
    ]
    carried = {"10_longtriever_main": {"claims": ("3", "1 holds, 1 reversed, 1 not met")}}
    rows = [line for line in report.verdict_summary(found, carried) if line.startswith("| 0") or line.startswith("| 1")]
    assert rows == [  # every claim counted: one of a notebook's own wording under the last column
        "| 01_baselines | 1 | 1 | 0 | 0 | 0 | 0 | 0 |",
        "| 10_longtriever_main (carried over) | 3 | 1 | 0 | 0 | 1 | 0 | 1 |",
        "| 14_efficiency | 2 | 1 | 0 | 0 | 0 | 0 | 1 |",
    ]


def test_only_claims_decided_by_an_interval_count_toward_chance_holds():
    from longdoc.experiments.verdicts import chance_line

    intervals = pd.DataFrame(
        {
            "ours: Δ [95% CI]": ["+0.0200 [+0.0100, +0.0300]", "—", "-0.0100 [-0.0300, +0.0100]"],
            "verdict": [HOLDS, NOT_TESTABLE, NOT_SHOWN],
        }
    )
    assert chance_line(intervals).startswith("2 claim(s) tested by a 95% interval") and "about 0.05 would hold" in (
        chance_line(intervals)
    )
    ratios = pd.DataFrame({"ours": ["0.88×", "1.02"], "verdict": [HOLDS, HOLDS]})  # a benchmark's measured ratios
    assert chance_line(ratios) == ""


def test_provenance_names_the_notebooks_behind_each_checksum_and_what_differed_from_the_commit():
    def record(notebook, checksum, versions):
        return {
            "notebook": notebook,
            "dataset": "manpages",
            "data_checksum": checksum,
            "versions": versions,
            "code_fingerprint": "f",
        }

    lines = report.provenance_lines(
        [
            record("10_a", "a" * 40, {"git_commit": "1" * 40, "git_dirty": True, "git_dirty_code": False}),
            record("30_b", "b" * 40, {"git_commit": "1" * 40, "git_dirty": True, "git_dirty_code": False}),
            record("40_c", "a" * 40, {"git_commit": "2" * 40, "git_dirty": True, "git_dirty_code": True}),
            record("41_d", "a" * 40, {"git_commit": "3" * 40, "git_dirty": True}),  # an older record
        ]
    )
    text = "\n".join(lines)
    assert f"manpages, checksum `{'a' * 16}` (10, 40, 41)" in text and f"manpages, checksum `{'b' * 16}` (30)" in text
    assert f"commit `{'1' * 12}` (10, 30)" in text  # only the study's outputs differed: not a code change
    assert f"commit `{'2' * 12}` with uncommitted code changes (40)" in text
    assert f"commit `{'3' * 12}` with uncommitted changes¹ (41)" in text and "\n¹ Code, or only" in text


def test_a_record_does_not_call_the_studys_own_outputs_a_code_change(tmp_path, monkeypatch):
    from longdoc.experiments import records

    calls = []
    monkeypatch.setattr(
        records, "_git", lambda *args: calls.append(args) or ("M RESULTS.md" if len(calls) == 2 else "")
    )
    state = records._git_state()
    assert state["git_dirty"] is True and state["git_dirty_code"] is False
    assert calls[2][-3:] == (":(exclude)results", ":(exclude)figures", ":(exclude)RESULTS.md")


def test_a_bootstrap_p_of_zero_reads_below_one_in_the_resamples_in_every_table():
    from longdoc.experiments.tables import markdown_table, p_cells

    frame = pd.DataFrame({"system": ["A", "B"], "Δ": [0.2, 0.0], "p": [0.0, 0.0312]})
    table = markdown_table(frame)
    assert "| A | 0.200 | < 0.0001 |" in table and "| B | 0 | 0.0312 |" in table  # Δ = 0 stays 0
    older = "| system | Δ | p |\n|---|---|---|\n| A | 0.200 | 0 |\n| B | 0 | 0.0312 |\n\nafter | 0 |"
    assert p_cells(older) == table + "\n\nafter | 0 |"  # a record written before the rule is mended
    named = older.replace("| p |", "| p (bootstrap) |")  # the column's older name, and per-document tables'
    assert p_cells(named) == table.replace("| p |", "| p (bootstrap) |") + "\n\nafter | 0 |"
    assert p_cells("| a | b |\n|---|---|\n| 0 | 0 |") == "| a | b |\n|---|---|\n| 0 | 0 |"  # no p column


def test_the_scale_line_names_the_notebooks_that_started_from_another_backbone():
    found = [
        {"notebook": "10_longtriever_main", "config": {"backbone": "minilm"}},
        {"notebook": "50_built_start", "config": {"backbone": "manpages-mlm"}},
        {"notebook": "51_built_start_smith", "config": {"backbone": "manpages-mlm"}},
        {"notebook": "60_other", "config": {"backbone": "bert-base-uncased"}},
        {"notebook": "61_no_config"},
    ]
    clause = report.other_starts(found, "minilm")
    assert clause == (
        ', except notebooks 50, 51 from `manpages-mlm` (an MLM-only BERT built here: README, "A start built '
        'here"); notebook 60 from `bert-base-uncased`'
    )
    assert report.other_starts(found[:1], "minilm") == ""


def test_a_records_findings_show_the_claim_first_whatever_its_key_order():
    """A record keeps a claim's fields sorted by key ("MDD ..." before "claim"); the report shows them in the
    notebook's order, so a reader (and the claim cards reading the report) finds the claim first."""
    sorted_keys = {
        "MDD (80% power)": 0.07,
        "against": "B",
        "claim": "A beats B",
        "condition": "",
        "extra": 1,
        "measure": "MRR@100",
        "ours: Δ [95% CI]": "+0.1 [+0.0, +0.2]",
        "p (bootstrap)": 0.04,  # a record made before the column's rename
        "paper": "0.4 vs 0.3",
        "system": "A",
        "verdict": "holds",
    }
    frame = report._frame([sorted_keys])
    assert list(frame.columns) == [
        "claim",
        "paper",
        "measure",
        "system",
        "against",
        "ours: Δ [95% CI]",
        "p",
        "MDD (80% power)",
        "verdict",
        "condition",
        "extra",
    ]
