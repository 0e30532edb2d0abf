"""Claim cards: each paper's headline claims on the first screen of the results report.

The cards are data (``data/claims/<paper>.csv``: notebook, the start of the claim's statement, the
paper's own difference and where it is reported), so any profile's records fill the same cards. Our
difference, its 95% interval and the verdict are read from the notebook's record, or from its section
of the previous report where the record is absent (a carried-over section).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from longdoc.data.registry import REPO_ROOT
from longdoc.eval.paper_numbers import paper_difference

CARDS_DIR = REPO_ROOT / "data" / "claims"
PAPERS = {"longtriever": "Longtriever", "sedr": "SeDR", "smith": "SMITH", "nci": "NCI"}  # card order and titles
OURS = "ours: Δ [95% CI]"
STALE_ROW = "STALE record"  # a card row's "read from" where its record is stale (:func:`forest_frame` marks it)
STALE_MARK = " (STALE record: made by other code than this checkout's)"  # beside what a stale record says
NUMBER = r"([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)"
INTERVAL = re.compile(rf"^{NUMBER} \[{NUMBER}, {NUMBER}\]$")


@dataclass(frozen=True)
class Found:
    statement: str
    ours: str  # Δ [95% CI] as the findings print it, or "—"
    verdict: str
    source: str  # "record" or "carried-over section"
    paper: str = ""  # the paper's numbers the verdict read ("" where the findings do not show them)


def record_backbone(record: dict | None) -> str:
    """The backbone a record's rows started from (its config's ``backbone``; "" where it names none)."""
    return ((record or {}).get("config") or {}).get("backbone") or ""


def load_cards(cards_dir: Path = CARDS_DIR) -> dict[str, pd.DataFrame]:
    """Every paper's card, in :data:`PAPERS` order; a file with a missing column is an error naming it."""
    cards = {}
    for key in PAPERS:
        path = cards_dir / f"{key}.csv"
        card = pd.read_csv(path, dtype={"paper_delta": float})
        missing = {"notebook", "claim", "paper_delta", "paper_source"} - set(card.columns)
        if missing:
            raise ValueError(f"{path}: missing column(s) {sorted(missing)}")
        cards[key] = card
    return cards


def findings_rows(section_text: str) -> list[dict]:
    """The rows of the findings table (the one with a ``claim`` column) in a report section's Markdown,
    by column name."""
    lines = section_text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and "claim" in _cells(line):
            header = _cells(line)
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, _cells(row))))
            return rows
    return []


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def find_claim(prefix: str, claims: list[dict], notebook: str) -> dict | None:
    """The claim whose statement is ``prefix``, else the one that starts with it; two are an error (the
    card is ambiguous)."""
    hits = [c for c in claims if c.get("claim") == prefix] or [
        c for c in claims if str(c.get("claim", "")).startswith(prefix)
    ]
    if len(hits) > 1:
        raise ValueError(f"data/claims: {prefix!r} matches {len(hits)} claims of {notebook}; make it longer")
    return hits[0] if hits else None


def fill(card: pd.DataFrame, records: dict[str, dict], carried: dict[str, dict]) -> pd.DataFrame:
    """One row per card claim: the paper's difference beside ours, the verdict (``—`` where the
    notebook has neither a record nor a carried-over section, or no such claim) and the backbone its
    rows started from (the record's ``backbone``: a claim posed on two starts has a row for each)."""
    rows = []
    for entry in card.itertuples(index=False):
        found, start = None, "—"
        if entry.notebook in records:
            claims = ((records[entry.notebook]["metrics"].get("findings")) or {}).get("claims") or []
            hit = find_claim(entry.claim, claims, entry.notebook)
            found = hit and Found(hit["claim"], hit.get(OURS, "—"), hit["verdict"], "record", hit.get("paper", ""))
            start = record_backbone(records[entry.notebook]) or "—"
        elif entry.notebook in carried:
            hit = find_claim(entry.claim, findings_rows(carried[entry.notebook]["text"]), entry.notebook)
            found = hit and Found(
                hit["claim"], hit.get(OURS, "—"), hit["verdict"], "carried-over section", hit.get("paper", "")
            )
        delta = used_paper_delta(entry, found)
        rows.append(
            {
                "claim": found.statement if found else entry.claim,
                "notebook": entry.notebook[:2],
                "start": start,
                "paper: Δ": "—" if pd.isna(delta) else f"{delta:+.3g}",
                "paper's numbers": entry.paper_source,
                OURS: found.ours if found else "—",
                "verdict": found.verdict if found else "not run",
                "read from": found.source if found else "—",
            }
        )
    return pd.DataFrame(rows)


def used_paper_delta(entry, found: Found | None) -> float:
    """The paper's Δ a card row shows: the one its verdict read (the largest of the paper's collections,
    :func:`paper_delta`) where the findings quote the paper's numbers, else the card's ``paper_delta``."""
    delta = paper_delta(found.paper) if found and found.paper else float("nan")
    return entry.paper_delta if pd.isna(delta) else delta


def beside_reference(filled: pd.DataFrame, card: pd.DataFrame, reference: dict[str, dict], name: str) -> pd.DataFrame:
    """``filled`` with the verdict of each claim under another profile (``reference``: its records by
    notebook) and whether the two agree; ``—`` where either did not run the claim."""
    theirs = fill(card, reference, {})["verdict"]
    ran = (filled["verdict"] != "not run") & (theirs != "not run")
    agree = (filled["verdict"] == theirs).map({True: "same", False: "differs"})
    return filled.assign(**{f"verdict at {name}": theirs, f"vs {name}": agree.where(ran, "—")})


def start_label(row: dict) -> str:
    """A card row's start as a label: its backbone, or its notebook where no record names one (a
    carried-over section)."""
    return row["start"] if row.get("start", "—") != "—" else f"notebook {row['notebook']}"


def built_start_lines(
    card: pd.DataFrame, records: dict[str, dict], is_built: Callable[[str], bool], stale: frozenset = frozenset()
) -> list[str]:
    """Under a paper's card, for each of its notebooks whose rows started from a backbone built here
    (``is_built``: ``manpages-mlm``), the rule that decided whether its claims are posed on that start and
    what it decided (the findings' context: did the backbone learn language, at what fine-tuning budget
    every row learns). Empty where no card notebook ran from a built backbone. A notebook in ``stale`` is
    marked (:data:`STALE_MARK`)."""
    lines = []
    for notebook in dict.fromkeys(card["notebook"]):
        record = records.get(notebook) or {}
        backbone = record_backbone(record)
        context = ((record.get("metrics") or {}).get("findings") or {}).get("context", "")
        if is_built(backbone) and context:
            mark = STALE_MARK if notebook in stale else ""
            lines.append(f'- notebook {notebook[:2]}{mark}, from `{backbone}`, in its findings: "{context}"')
            lines += budget_lines((record.get("metrics") or {}).get("budgets") or [])
    if not lines:
        return []
    return ['From the MLM-only start built here (README, "A start built here"):', "", *lines, ""]


def budget_lines(budgets: list[dict]) -> list[str]:
    """The budget search of a built-start notebook (its record's ``budgets``: one entry per budget and
    row) as one indented line per budget: each row's mean test measure (the pre-training claims' rows
    at growing fine-tuning, as the ladder shows the headline claims)."""
    measures = [k for k in (budgets[0] if budgets else {}) if k not in BUDGET_KEYS]
    if len(measures) != 1:  # none searched, or a record this reader does not know
        return []
    measure, lines = measures[0], []
    for steps in dict.fromkeys(b["train_steps"] for b in budgets):
        rows = [b for b in budgets if b["train_steps"] == steps]
        means = ", ".join(f"{b['row']} {b[measure]:.3f}" for b in rows)
        learns = "every row learns" if all(b["learns"] for b in rows) else "not every row learns"
        lines.append(f"  - {rows[0]['budget']} ({steps} fine-tuning steps), test {measure}: {means} ({learns})")
    return lines


BUDGET_KEYS = {"95% high", "95% low", "budget", "chance", "learns", "row", "seeds", "train_steps"}
LADDER_NOTEBOOK = "90_budget_ladder"


def ladder_lines(paper: str, records: dict[str, dict], stale: frozenset = frozenset()) -> list[str]:
    """Under a paper's card, its headline claims on the budget ladder (notebook 90's record): the largest
    budget run, the verdict at the largest budget that has one, and where the difference moved. Empty
    without a ladder record or a claim of ``paper`` in it; marked (:data:`STALE_MARK`) where the ladder's
    record is in ``stale``."""
    record = records.get(LADDER_NOTEBOOK)
    claims = ((record or {}).get("metrics", {}).get("findings") or {}).get("claims") or []
    mine = [c for c in claims if c.get("paper") == paper]
    if not mine:
        return []
    backbone = record_backbone(record)
    start = f", from `{backbone}`" if backbone else ""
    mark = STALE_MARK if LADDER_NOTEBOOK in stale else ""
    lines = [f"With more fine-tuning (the budget ladder, notebook {LADDER_NOTEBOOK[:2]}{start}){mark}:", ""]
    for claim in mine:
        largest = claim.get("largest budget with a verdict", "none")
        verdict = (
            f"{claim['verdict']} at {largest}, {claim.get('ours there: Δ [95% CI]', '—')}"
            if largest != "none"
            else f"no budget gives a verdict ({claim['verdict']})"
        )
        lines.append(
            f"- {claim['claim']}: run up to {claim.get('largest budget run', '?')}; {verdict}; "
            f"Δ moved {claim.get('Δ moves', '—')}."
        )
    return lines + [""]


def interval(text: str) -> tuple[float, float, float] | None:
    """(Δ, low, high) from the findings' ``+0.123 [-0.010, +0.200]``; None for ``—``."""
    match = INTERVAL.match(str(text).strip())
    return tuple(float(g) for g in match.groups()) if match else None


FOREST_COLUMNS = ["claim", "Δ", "low", "high", "paper Δ", "verdict"]


def _forest(rows, paper_deltas) -> pd.DataFrame:
    """Rows of (claim, ours, verdict) with their paper Δ as the forest plot draws them; a claim without
    an interval (a note, "—") is left out."""
    drawn = []
    for row, paper in zip(rows, paper_deltas):
        ours = interval(row.get(OURS, ""))
        if ours:
            drawn.append(dict(zip(FOREST_COLUMNS, (row["claim"], *ours, paper, row["verdict"]))))
    return pd.DataFrame(drawn, columns=FOREST_COLUMNS)


def forest_frame(filled: pd.DataFrame) -> pd.DataFrame:
    """The numbers a card's forest plot draws: label, ours (Δ, low, high), the paper's Δ and the verdict;
    on a card whose claims ran from more than one backbone, each label begins with its row's start, and a
    row read from a stale record (:data:`STALE_ROW`) with "STALE"."""
    rows = filled.to_dict("records")
    if len({row["start"] for row in rows if row.get("start", "—") != "—"}) > 1:
        rows = [row | {"claim": f"{start_label(row)}: {row['claim']}"} for row in rows]
    rows = [row | {"claim": f"STALE: {row['claim']}"} if row.get("read from") == STALE_ROW else row for row in rows]
    return _forest(rows, [float(r["paper: Δ"]) if r["paper: Δ"] != "—" else float("nan") for r in rows])


def paper_delta(text: str) -> float:
    """The paper's own difference from a claim's numbers, as the verdict reads it
    (:func:`~longdoc.eval.paper_numbers.paper_difference`: the largest of its collections'), NaN where
    the paper gives no values."""
    delta = paper_difference(str(text).replace("−", "-"))
    return float("nan") if delta is None else delta


def notebook_claims_title(notebook: str) -> str:
    """The title of a notebook's claims figure (drawn by the notebook, redrawn by the report)."""
    return f"{notebook}: our Δ (95% interval) and the paper's"


def findings_frame(table: pd.DataFrame) -> pd.DataFrame:
    """A notebook's findings as the forest plot draws them (:func:`forest_frame`'s columns), the paper's
    Δ read from each claim's numbers (:func:`paper_delta`)."""
    rows = table.to_dict("records")
    return _forest(rows, [paper_delta(row.get("paper", "")) for row in rows])
