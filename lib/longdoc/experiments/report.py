"""The results report: every notebook's record of one profile rendered as Markdown.

``./run_all.sh`` ends with ``python -m longdoc.experiments.report --profile <p>``; for the ``cpu``
profile it writes ``RESULTS.md`` at the top of the repository (committed with ``figures/cpu``), for
any other profile ``results/<profile>/RESULTS.md``. Everything in it comes from the records
(``results/<profile>/<dataset>/<notebook>/metrics.json``) and from ``results/<profile>/timings.tsv``
(wall time of each notebook, written by ``run_all.sh``); nothing is typed by hand.

Records live in ``results/`` (not committed). A notebook whose record is not on the machine that
regenerates the report keeps its section, its time row and its claim counts from the report being
replaced (``carried_sections``), marked as carried over with the commit that made it, so that
running some notebooks never erases the others' committed results.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.records import RESULTS_DIR
from longdoc.experiments.verdicts import Findings

COMMITTED_PROFILE = "cpu"  # its report is RESULTS.md at the top of the repository


def records(profile: str, root: Path = RESULTS_DIR) -> list[dict]:
    """Every record of ``profile``, ordered by notebook then dataset."""
    found = []
    for path in sorted((root / profile).glob("*/*/metrics.json")):
        record = json.loads(path.read_text())
        record["_path"] = path
        found.append(record)
    return sorted(found, key=lambda r: (r["notebook"], r.get("dataset", "")))


def timings(profile: str, root: Path = RESULTS_DIR) -> dict[str, dict]:
    """The last ``run_all.sh`` timing of each notebook: ``{notebook: {"seconds", "status", "finished"}}``."""
    path = root / profile / "timings.tsv"
    found = {}
    if path.exists():
        for line in path.read_text().splitlines():
            notebook, seconds, status, finished = line.split("\t")
            found[notebook] = {"seconds": int(seconds), "status": status, "finished": finished}
    return found


def notebook_title(notebook: str) -> str:
    path = REPO_ROOT / "notebooks" / f"{notebook}.ipynb"
    if path.exists():
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                return "".join(cell["source"]).splitlines()[0].lstrip("# ").strip()
    return notebook


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


CARRIED = "*Carried over from the previous report"
SECTION = re.compile(r"^## (?P<title>.+)\n\n(?:\*Carried over[^\n]*\n)?`(?P<notebook>[^`]+)` on ", re.M)


def carried_sections(previous: str, present: set[str]) -> dict[str, dict]:
    """From a previous report: per notebook absent from ``present``, its section text, its row of the
    time table, its claim counts and the commit the previous report names."""
    commit = re.search(r"^- code: (.+)$", previous, re.M)
    starts = list(SECTION.finditer(previous))
    carried = {}
    for i, match in enumerate(starts):
        notebook = match["notebook"]
        if notebook in present:
            continue
        end = starts[i + 1].start() if i + 1 < len(starts) else len(previous)
        text = previous[match.start() : end].rstrip()
        made_by = commit.group(1) if commit else "an earlier commit"
        mark = re.search(rf"^{re.escape(CARRIED)} \((.+?)\): .*$\n?", text, re.M)
        if mark:  # carried twice: keep the commit that made it, drop the old mark
            made_by, text = mark.group(1), text[: mark.start()] + text[mark.end() :]
        row = re.search(rf"^\| {re.escape(notebook)}(?: \(carried over\))? \|.*$", previous, re.M)
        counts = re.search(r"\*\*(\d+) claim\(s\) of the paper: (.+?)\.\*\*", text)
        carried[notebook] = {
            "text": text,
            "row": row.group(0).replace(" (carried over)", "") if row else None,
            "claims": (int(counts.group(1)), counts.group(2)) if counts else None,
            "commit": made_by,
        }
    return carried


def render(profile: str, root: Path = RESULTS_DIR, link_base: Path = REPO_ROOT, out: Path | None = None) -> str:
    found = records(profile, root)
    if not found:
        raise FileNotFoundError(f"no records under {root / profile}; run ./run_all.sh --profile {profile} first")
    previous_path = out or link_base / "RESULTS.md"
    carried = (
        carried_sections(previous_path.read_text(), {r["notebook"] for r in found}) if previous_path.exists() else {}
    )
    times = timings(profile, root)
    commits = sorted(
        {(r["versions"].get("git_commit", "unknown"), r["versions"].get("git_dirty", False)) for r in found}
    )
    machines = sorted(
        {
            f"{r['machine']['cpu']}, {r['machine']['cores']} cores"
            + (f", {r['machine']['gpu']}" if "gpu" in r["machine"] else "")
            for r in found
            if "machine" in r
        }
    )
    datasets = sorted({(r.get("dataset", "?"), r["data_checksum"][:16]) for r in found})
    base = (out or link_base / "RESULTS.md").parent
    lines = [
        f"# Results of the `{profile}` profile",
        "",
        f"Generated by `python -m longdoc.experiments.report --profile {profile}` from the records in "
        f"`results/{profile}/` (the end of `./run_all.sh --profile {profile}`); every number below is read from them.",
        "",
        "- code: "
        + "; ".join(f"commit `{c[:12]}`" + (" with uncommitted changes" if dirty else "") for c, dirty in commits),
        "- machine: " + "; ".join(machines),
        "- data: " + "; ".join(f"{name} (checksum `{checksum}`)" for name, checksum in datasets),
        "- code fingerprint of the artefacts: "
        + ", ".join(sorted({f"`{r.get('code_fingerprint', '?')}`" for r in found})),
        "",
        "## Time and memory per notebook",
        "",
        "| notebook | dataset | wall time (run_all.sh) | in-study time | peak memory (GiB) |",
        "|---|---|---|---|---|",
    ]
    total = sum(
        timing["seconds"] for notebook, timing in times.items() if any(r["notebook"] == notebook for r in found)
    )
    rows = {}
    for r in found:
        timing = times.get(r["notebook"])
        usage = r.get("usage", {})
        rows[(r["notebook"], r.get("dataset", ""))] = (
            f"| {r['notebook']} | {r.get('dataset', '')} | {_minutes(timing['seconds']) if timing else '—'} | "
            f"{_minutes(usage['seconds']) if 'seconds' in usage else '—'} | {usage.get('peak_rss_gib', '—')} |"
        )
    for notebook, section in carried.items():
        if section["row"]:
            rows[(notebook, "")] = section["row"].replace(f"| {notebook} |", f"| {notebook} (carried over) |", 1)
            minutes = re.search(r"\| ([\d.]+) min \|", section["row"])
            total += float(minutes.group(1)) * 60 if minutes else 0
    lines += [rows[key] for key in sorted(rows)]
    lines += [f"| **total** | | **{_minutes(total)}** | | |", ""]
    lines += verdict_summary(found, carried)
    sections = {}
    for r in found:
        part = [
            f"## {notebook_title(r['notebook'])}",
            "",
            f"`{r['notebook']}` on {r.get('dataset', '')}; {seeds_used(r)}; record "
            f"`{Path(r['_path']).relative_to(root.parent).as_posix() if root.parent in Path(r['_path']).parents else r['_path']}`.",
            "",
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
            body = re.sub(r"(?<=\| )nan(?= \|)", "—", table["markdown"])  # records made before NaN showed as —
            part += [f"### {table['title']}", ""] + ([table["note"], ""] if table["note"] else []) + [body, ""]
        for figure in metrics.get("figures", []):
            target = link_base / figure
            link = Path(_relative(target, base))
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
    for key in sorted(sections):
        lines += sections[key]
    return "\n".join(lines).rstrip() + "\n"


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


VERDICT_ORDER = ("holds", "not shown at this scale", "reversed", "not testable at this scale")


def verdict_summary(found: list[dict], carried: dict | None = None) -> list[str]:
    """The paper claims of every record at a glance: how many hold, are not shown, reversed, untestable
    (a carried-over section: its own count line)."""
    rows = []
    for notebook, section in sorted((carried or {}).items()):
        if section["claims"]:
            total, text = section["claims"]
            counts = dict((v, int(n)) for n, v in re.findall(r"(\d+) ([^,]+)", text))
            rows.append(
                f"| {notebook} (carried over) | {total} | "
                + " | ".join(str(counts.get(v, 0)) for v in VERDICT_ORDER)
                + " |"
            )
    for r in found:
        claims = (r["metrics"].get("findings") or {}).get("claims") or []
        if claims:
            counts = [sum(c.get("verdict") == v for c in claims) for v in VERDICT_ORDER]
            rows.append(f"| {r['notebook']} | {len(claims)} | " + " | ".join(map(str, counts)) + " |")
    if not rows:
        return []
    return [
        "## Paper claims at a glance",
        "",
        "| notebook | claims | " + " | ".join(VERDICT_ORDER) + " |",
        "|---|---|" + "---|" * len(VERDICT_ORDER),
        *rows,
        "",
    ]


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


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
    from longdoc.io import atomic_write

    with atomic_write(out) as handle:
        handle.write(text)
    print(f"report: {out}")
    return out


if __name__ == "__main__":
    main()
