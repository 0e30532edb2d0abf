"""Claim cards: read from data/claims, filled from records or carried-over sections, drawn as forest plots."""

import pandas as pd
import pytest

from longdoc.analysis import claim_cards
from longdoc.data.registry import REPO_ROOT
from longdoc.experiments import report
from longdoc.experiments.backbones import is_mlm_built

CARD = pd.DataFrame(
    [
        {"notebook": "10_longtriever_main", "claim": "A beats B", "paper_delta": 0.03, "paper_source": "Table 2"},
        {"notebook": "20_sedr_main", "claim": "C beats D", "paper_delta": float("nan"), "paper_source": "Figure 6"},
        {"notebook": "40_nci_main", "claim": "E beats F", "paper_delta": 0.5, "paper_source": "Table 1"},
    ]
)
RECORD = {
    "metrics": {
        "findings": {
            "claims": [
                {
                    "claim": "A beats B",
                    "ours: Δ [95% CI]": "+0.012 [-0.004, +0.028]",
                    "verdict": "not shown at this scale",
                },
                {"claim": "A beats B + X", "ours: Δ [95% CI]": "+0.1 [+0.05, +0.15]", "verdict": "holds"},
            ]
        }
    }
}
CARRIED_TEXT = """## 20 · SeDR

### Findings

| claim | condition | measure | ours: Δ [95% CI] | p (paired t) | paper | verdict |
|---|---|---|---|---|---|---|
| C beats D (long form) |  | MRR@100 | -0.030 [-0.060, -0.001] | 0.04 | 0.4 vs 0.3 | reversed |
| C \\| pipe |  | MRR@100 | +0.1 [+0.0, +0.2] | 0.1 | x | holds |

### Other
"""


def test_a_card_reads_the_record_then_the_carried_section_and_marks_what_did_not_run():
    filled = claim_cards.fill(CARD, {"10_longtriever_main": RECORD}, {"20_sedr_main": {"text": CARRIED_TEXT}})
    assert list(filled["verdict"]) == ["not shown at this scale", "reversed", "not run"]
    assert filled.loc[0, "claim"] == "A beats B"  # the exact statement wins over a longer one it begins
    assert filled.loc[1, "claim"] == "C beats D (long form)"  # a prefix finds the full statement
    assert list(filled["read from"]) == ["record", "carried-over section", "—"]
    # the paper's Δ is the one the verdict read where the findings quote the paper's numbers (the carried
    # section's "0.4 vs 0.3"), else the card's
    assert list(filled["paper: Δ"]) == ["+0.03", "+0.1", "+0.5"]
    frame = claim_cards.forest_frame(filled)
    assert frame[["Δ", "low", "high"]].values.tolist() == [[0.012, -0.004, 0.028], [-0.03, -0.06, -0.001]]
    assert frame["paper Δ"].tolist() == pytest.approx([0.03, 0.1])


def test_a_card_shows_the_paper_difference_its_verdict_read():
    """Two collections: the verdict reads the larger difference (AAN104K's), so the card shows that one,
    not the card file's (issue 49's review: a card showed Wiki65K's +0.0531 beside a verdict that read
    AAN104K's +0.0811)."""
    import copy

    record = copy.deepcopy(RECORD)
    record["metrics"]["findings"]["claims"][0]["paper"] = "Wiki65K: 0.9585 vs 0.9054; AAN104K: 0.8536 vs 0.7725"
    filled = claim_cards.fill(CARD.iloc[:1].assign(paper_delta=0.0531), {"10_longtriever_main": record}, {})
    assert filled.loc[0, "paper: Δ"] == "+0.0811"


def test_another_profiles_card_shows_the_cpu_verdict_beside_its_own():
    import copy

    gpu = copy.deepcopy(RECORD)
    gpu["metrics"]["findings"]["claims"][0]["verdict"] = "holds"
    sedr = {"metrics": {"findings": {"claims": [{"claim": "C beats D", "verdict": "reversed"}]}}}
    records = {"10_longtriever_main": gpu, "20_sedr_main": sedr}  # the cpu profile did not run 20's claim
    filled = claim_cards.fill(CARD, records, {})
    cpu = {"10_longtriever_main": RECORD}
    beside = claim_cards.beside_reference(filled, CARD, cpu, "cpu")
    assert list(beside["verdict"]) == ["holds", "reversed", "not run"]
    assert list(beside["verdict at cpu"]) == ["not shown at this scale", "not run", "not run"]
    assert list(beside["vs cpu"]) == ["differs", "—", "—"]
    same = claim_cards.beside_reference(claim_cards.fill(CARD, cpu, {}), CARD, cpu, "cpu")
    assert list(same["vs cpu"]) == ["same", "—", "—"]


def test_an_ambiguous_card_claim_is_an_error_naming_it():
    claims = [{"claim": "A beats B one"}, {"claim": "A beats B two"}]
    with pytest.raises(ValueError, match="'A beats B' matches 2 claims of 10_x"):
        claim_cards.find_claim("A beats B", claims, "10_x")


def test_intervals_are_parsed_as_the_findings_print_them():
    assert claim_cards.interval("+0.123 [-0.0100, +0.2]") == (0.123, -0.01, 0.2)
    assert claim_cards.interval("-1.2e-05 [-3e-05, +4.1e-06]") == (-1.2e-05, -3e-05, 4.1e-06)
    assert claim_cards.interval("—") is None


def test_findings_rows_read_a_markdown_table_by_column_name_with_escaped_pipes():
    rows = claim_cards.findings_rows(CARRIED_TEXT)
    assert [r["claim"] for r in rows] == ["C beats D (long form)", "C | pipe"]
    assert rows[0]["verdict"] == "reversed" and rows[0]["ours: Δ [95% CI]"] == "-0.030 [-0.060, -0.001]"


def test_findings_rows_find_the_claim_column_wherever_it_stands():
    moved = CARRIED_TEXT.replace("| claim | condition |", "| MDD (80% power) | claim | condition |").replace(
        "|---|---|---|---|---|---|---|", "|---|---|---|---|---|---|---|---|"
    )
    moved = moved.replace("| C beats D", "| 0.05 | C beats D").replace("| C \\| pipe", "| 0.06 | C \\| pipe")
    rows = claim_cards.findings_rows(moved)
    assert [r["claim"] for r in rows] == ["C beats D (long form)", "C | pipe"]
    assert rows[0]["MDD (80% power)"] == "0.05" and rows[0]["verdict"] == "reversed"


def test_every_card_claim_is_a_claim_of_the_committed_report():
    """A card whose statement matches nothing (a typo, a renamed claim) would show "not run" for ever."""
    committed = (REPO_ROOT / "RESULTS.md").read_text()
    sections = report.carried_sections(committed, present=set())  # every section, as text
    for key, card in claim_cards.load_cards().items():
        filled = claim_cards.fill(card, {}, sections)
        missing = filled[filled["verdict"] == "not run"]
        assert missing.empty, f"data/claims/{key}.csv: {list(missing['claim'])} not in RESULTS.md"


def test_the_forest_plot_draws_a_card(tmp_path):
    frame = claim_cards.forest_frame(claim_cards.fill(CARD, {"10_longtriever_main": RECORD}, {}))
    from longdoc.plots import claim_forest

    path = claim_forest(frame, tmp_path / "card.png", "A paper")
    assert path.stat().st_size > 1000
    assert not frame["claim"].str.startswith("STALE").any()


def test_a_forest_plot_marks_a_row_read_from_a_stale_record(monkeypatch):
    """The card's table says "STALE record" beside such a row; its forest plot's label says so too."""
    monkeypatch.setattr(report, "stale", lambda record: "0123456789abcdef+0")
    filled = report.filled_card(CARD, {"10_longtriever_main": RECORD}, {})
    assert set(filled.loc[filled["verdict"] != "not run", "read from"]) == {claim_cards.STALE_ROW}
    frame = claim_cards.forest_frame(filled)
    assert len(frame) and frame["claim"].str.startswith("STALE: ").all()


def test_a_card_names_each_headline_claims_largest_budget_and_its_trend():
    from longdoc.analysis.claim_cards import LADDER_NOTEBOOK, ladder_lines

    claims = [
        {
            "paper": "SeDR",
            "claim": "SeDR beats STAR(MaxP)",
            "largest budget run": "2× (2 seeds)",
            "largest budget with a verdict": "2×",
            "ours there: Δ [95% CI]": "+0.031 [+0.004, +0.060]",
            "verdict": "holds",
            "Δ moves": "toward the paper's: +0.0286 at 1× → +0.031 at 2×",
        },
        {
            "paper": "NCI",
            "claim": "NCI beats BM25",
            "largest budget run": "2× (1 seed)",
            "largest budget with a verdict": "none",
            "verdict": "not testable at this scale",
            "Δ moves": "toward the paper's: -0.492 at 1× → -0.432 at 2×",
        },
    ]
    records = {LADDER_NOTEBOOK: {"metrics": {"findings": {"claims": claims}}}}
    sedr = ladder_lines("SeDR", records)
    assert sedr[0].startswith("With more fine-tuning") and sedr[2] == (
        "- SeDR beats STAR(MaxP): run up to 2× (2 seeds); holds at 2×, +0.031 [+0.004, +0.060]; "
        "Δ moved toward the paper's: +0.0286 at 1× → +0.031 at 2×."
    )
    assert "no budget gives a verdict (not testable at this scale)" in ladder_lines("NCI", records)[2]
    assert ladder_lines("SMITH", records) == [] and ladder_lines("SeDR", {}) == []
    records[LADDER_NOTEBOOK]["config"] = {"backbone": "minilm"}
    assert ladder_lines("SeDR", records)[0] == "With more fine-tuning (the budget ladder, notebook 90, from `minilm`):"
    # a stale ladder record says so beside what it says (issue 49's review: stale lines read as current)
    assert ladder_lines("SeDR", records, frozenset({LADDER_NOTEBOOK}))[0].endswith(claim_cards.STALE_MARK + ":")


def test_a_claim_posed_on_two_starts_has_a_row_for_each_naming_its_backbone():
    """The pre-training claims are posed on the MLM-only start built here beside the MiniLM rows: each
    card row names the backbone its record ran from, and the forest plot labels them apart."""
    card = pd.DataFrame(
        [
            {"notebook": "11_ablation", "claim": "A beats B", "paper_delta": 0.05, "paper_source": "Table 4"},
            {"notebook": "50_built", "claim": "A beats B", "paper_delta": 0.05, "paper_source": "Table 4"},
        ]
    )
    claim = {"claim": "A beats B", "ours: Δ [95% CI]": "+0.09 [+0.05, +0.13]", "verdict": "holds"}
    records = {
        "11_ablation": {"config": {"backbone": "minilm"}, "metrics": {"findings": {"claims": [claim]}}},
        "50_built": {"config": {"backbone": "manpages-mlm"}, "metrics": {"findings": {"claims": [claim]}}},
    }
    filled = claim_cards.fill(card, records, {})
    assert list(filled["start"]) == ["minilm", "manpages-mlm"]
    labels = list(claim_cards.forest_frame(filled)["claim"])
    assert labels == ["minilm: A beats B", "manpages-mlm: A beats B"]
    one_start = claim_cards.fill(card.iloc[:1], records, {})
    assert list(claim_cards.forest_frame(one_start)["claim"]) == ["A beats B"]  # nothing to tell apart
    assert list(claim_cards.fill(card, {}, {})["start"]) == ["—", "—"]  # not run: no start to name
    carried = {
        "12_other": {
            "text": "| claim | ours: Δ [95% CI] | verdict |\n|---|---|---|\n| A beats B | +0.1 [+0.0, +0.2] | holds |\n"
        }
    }
    mixed_card = pd.concat([card, card.iloc[[0]].assign(notebook="12_other")], ignore_index=True)
    mixed = claim_cards.fill(mixed_card, records, carried)
    assert list(mixed["start"]) == ["minilm", "manpages-mlm", "—"]  # a carried-over section names no start
    mixed_labels = list(claim_cards.forest_frame(mixed)["claim"])
    assert mixed_labels[-1] == "notebook 12: A beats B"  # ... so its notebook labels it
    no_config = {"11_ablation": records["11_ablation"] | {"config": None}}
    assert claim_cards.fill(card.iloc[:1], no_config, {})["start"].tolist() == ["—"]


def budget(steps: int, learns: bool) -> list[dict]:
    """One budget of a built-start notebook's search, as its record holds it (rows I and III)."""
    common = {"95% high": 0.2, "95% low": 0.01, "chance": 0.005, "seeds": 2, "train_steps": steps}
    multiple = f"{steps // 32}×"
    return [
        {**common, "row": "I", "MRR@100": 0.1, "learns": True, "budget": multiple},
        {**common, "row": "III", "MRR@100": 0.08 if learns else 0.02, "learns": learns, "budget": multiple},
    ]


def test_a_card_says_what_decided_the_claims_posed_on_the_built_start():
    card = pd.DataFrame(
        [
            {"notebook": "11_ablation", "claim": "A", "paper_delta": 0.05, "paper_source": "x"},
            {"notebook": "50_built", "claim": "A", "paper_delta": 0.05, "paper_source": "x"},
        ]
    )
    context = "question 1: the backbone learned language; question 4: every row learns at 128 steps"
    records = {
        "11_ablation": {"config": {"backbone": "minilm"}, "metrics": {"findings": {"context": "other"}}},
        "50_built": {
            "config": {"backbone": "manpages-mlm"},
            "metrics": {"findings": {"context": context}, "budgets": budget(32, False) + budget(128, True)},
        },
    }
    lines = claim_cards.built_start_lines(card, records, is_mlm_built)
    assert lines[0].startswith("From the MLM-only start built here")
    assert lines[2] == f'- notebook 50, from `manpages-mlm`, in its findings: "{context}"'
    assert lines[3] == "  - 1× (32 fine-tuning steps), test MRR@100: I 0.100, III 0.020 (not every row learns)"
    assert lines[4] == "  - 4× (128 fine-tuning steps), test MRR@100: I 0.100, III 0.080 (every row learns)"
    assert len(lines) == 6  # the MiniLM notebook's context is not a built start's
    assert claim_cards.built_start_lines(card, {"11_ablation": records["11_ablation"]}, is_mlm_built) == []
    random = {"50_built": {**records["50_built"], "config": {"backbone": "tiny-random-bert"}}}  # drawn, not MLM-trained
    assert claim_cards.built_start_lines(card, random, is_mlm_built) == []


def test_each_machines_time_is_read_against_the_profiles_limit():
    """Over the limit, within it, or within it so far when the machine ran only some notebooks (a lower
    bound); no line where the profile states no limit."""
    line = report.limit_lines({"EPYC": 7.5 * 3600, "Xeon": 600.0}, {"EPYC": 24, "Xeon": 1}, 25, 7.0)[0]
    assert "EPYC: 7.50 h for 24 of 25 notebooks, over the limit (a lower bound for the whole study)" in line
    assert "Xeon: 0.17 h for 1 of 25 notebooks, so far within the limit" in line
    assert "within the limit;" not in report.limit_lines({"EPYC": 3600.0}, {"EPYC": 2}, 2, 7.0)[0]
    assert (
        "EPYC: 1.00 h for 2 of 2 notebooks, within the limit."
        in report.limit_lines({"EPYC": 3600.0}, {"EPYC": 2}, 2, 7.0)[0]
    )
    assert report.limit_lines({"EPYC": 3600.0}, {"EPYC": 2}, 2, None) == []


def test_a_notebook_rerun_from_the_cache_counts_its_last_training_run_against_the_limit(tmp_path):
    """A rerun that found every fit cached (a verdicts' change) took minutes; the limit reads the time of
    that notebook's last run that trained, and says which notebooks it did this for."""
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "timings.tsv").write_text(
        "30_smith_main\t2877\tok\t2026-11-28T20:44:01Z\t29\n"
        "31_smith_length\t298\tok\t2026-11-28T20:48:59Z\t4\n"
        "30_smith_main\t120\tok\t2026-11-29T00:10:00Z\t0\n"
    )
    found = [
        {"notebook": n, "dataset": "manpages", "machine": {"cpu": "EPYC", "cores": 2}, "versions": {}}
        for n in ("30_smith_main", "31_smith_length")
    ]
    times, trained = report.timings("cpu", tmp_path), report.training_runs("cpu", tmp_path)
    assert times["30_smith_main"]["seconds"] == 120 and trained["30_smith_main"]["seconds"] == 2877
    text = "\n".join(report.time_lines(found, {}, times, 7.0, trained))
    assert "| **total** | | **7.0 min** |" in text  # the table: the last runs' wall times, as run
    assert (
        "0.88 h for 2 of 2 notebooks, within the limit. Notebooks 30 (2026-11-28, 2,877 s) last ran from the cache"
        in text
    )


def _timed(tmp_path, lines: str) -> tuple[dict, dict]:
    (tmp_path / "cpu").mkdir(exist_ok=True)
    (tmp_path / "cpu" / "timings.tsv").write_text(lines)
    return report.timings("cpu", tmp_path), report.training_runs("cpu", tmp_path)


def _records(*notebooks: str, config: dict | None = None) -> list[dict]:
    return [
        {
            "notebook": n,
            "dataset": "manpages",
            "machine": {"cpu": "EPYC", "cores": 2},
            "versions": {},
            "config": config or {},
        }
        for n in notebooks
    ]


def test_notebooks_outside_the_study_are_listed_and_timed_apart_from_the_limit(tmp_path):
    """The profile's ``outside_the_study`` notebooks keep their rows, marked; the limit counts the others only,
    and a line gives what the left-out ones cost (by their last run that trained)."""
    times, trained = _timed(
        tmp_path,
        "40_nci_main\t3600\tok\t2026-11-29T10:00:00Z\t17\n"
        "41_nci_ablation\t1800\tok\t2026-11-29T10:30:00Z\t13\n"
        "41_nci_ablation\t20\tok\t2026-11-29T11:30:00Z\t0\n",
    )
    found = _records("40_nci_main", "41_nci_ablation")
    text = "\n".join(report.time_lines(found, {}, times, 7.0, trained, ["41_nci_ablation"]))
    assert "| 41_nci_ablation (outside the study) |" in text
    assert "| **total** (the study) | | **60.0 min** |" in text
    assert "EPYC, 2 cores: 1.00 h for 1 of 1 notebooks, within the limit." in text
    assert "**Outside the study:** notebooks 41" in text and "(EPYC, 2 cores: 0.50 h more" in text
    assert "Outside the study" not in "\n".join(report.time_lines(found, {}, times, 7.0, trained))


def test_the_ladder_at_1x_counts_its_own_last_run_not_an_earlier_one_with_higher_rungs(tmp_path):
    """Notebook 90 with every rung at 1× reads notebooks 10-40's fits, so its run that trained nothing is its
    cost; with a higher rung it trains rungs of its own, and a run from the cache counts its last training run."""
    times, trained = _timed(
        tmp_path,
        "90_budget_ladder\t1819\tok\t2026-11-25T10:00:00Z\t12\n90_budget_ladder\t18\tok\t2026-11-29T10:00:00Z\t0\n",
    )
    at_1x = {"ladder_sedr": [1], "ladder_nci": [1], "ladder_two_seeds_until": 2}
    text = "\n".join(report.time_lines(_records("90_budget_ladder", config=at_1x), {}, times, 7.0, trained))
    assert "0.01 h for 1 of 1 notebooks" in text and "last ran from the cache" not in text
    higher = {**at_1x, "ladder_nci": [1, 2]}
    text = "\n".join(report.time_lines(_records("90_budget_ladder", config=higher), {}, times, 7.0, trained))
    assert (
        "0.51 h for 1 of 1 notebooks" in text and "Notebooks 90 (2026-11-25, 1,819 s) last ran from the cache" in text
    )


def test_a_carried_over_notebook_outside_the_study_keeps_its_row_and_stays_out_of_the_limit():
    """A previous report's row of a notebook outside the study (marked so) is carried with its time, and that
    time is given apart from the study's total, as a notebook with its record."""
    previous = (
        "## NCI ablation\n\n`41_nci_ablation` on manpages-300 ...\n\n"
        f"## {report.TIMES}\n\n| notebook | dataset | wall time (run_all.sh) | artefacts trained in that run | "
        "in-study time | peak memory (GiB) | machine |\n|---|---|---|---|---|---|---|\n"
        "| 41_nci_ablation (outside the study) | manpages-300 | 30.0 min | 13 | 29.8 min | 1.7 | EPYC, 2 cores |\n"
    )
    carried = report.carried_sections(previous, set())
    assert carried["41_nci_ablation"]["row"].startswith("| 41_nci_ablation | manpages-300 | 30.0 min |")
    found = _records("40_nci_main")
    times = {"40_nci_main": {"seconds": 3600, "status": "ok", "finished": "2026-11-29T10:00:00Z", "trained": 17}}
    text = "\n".join(report.time_lines(found, carried, times, 7.0, {}, ["41_nci_ablation"]))
    assert "| 41_nci_ablation (outside the study, carried over) | manpages-300 | 30.0 min |" in text
    assert "1.00 h for 1 of 1 notebooks, within the limit" in text
    assert "**Outside the study:** notebooks 41" in text and "(EPYC, 2 cores: 0.50 h more" in text


def test_a_row_carried_over_twice_outside_the_study_is_carried_again():
    previous = (
        "## NCI ablation\n\n`41_nci_ablation` on manpages-300 ...\n\n"
        f"## {report.TIMES}\n\n| notebook | dataset |\n|---|---|\n"
        "| 41_nci_ablation (outside the study, carried over) | manpages-300 | 30.0 min | 13 | 29.8 min | 1.7 | EPYC, 2 cores |\n"
    )
    row = report.carried_sections(previous, set())["41_nci_ablation"]["row"]
    assert row.startswith("| 41_nci_ablation | manpages-300 | 30.0 min |")
