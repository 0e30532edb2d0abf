"""Every interval of the committed records, recomputed from their per-item scores.

Each record folder holds ``scores.json.gz`` beside ``metrics.json``: every system's per-item test values
(a query's reciprocal rank, a pair's correctness) per seed and measure, written by
:meth:`~longdoc.experiments.study.Study.write_runs`. A claim of the record's findings names the two rows
it compares (``system``, ``against``); its Δ, 95% interval and minimum detectable difference are
recomputed here by the same function (:func:`~longdoc.eval.significance.seed_query_bootstrap`, its
default seed: a bootstrap over queries, a t interval over document pairs with a dyadic-robust SE), and
its verdict from them (:func:`recomputed_verdict`), and compared with what the record says::

    python -m longdoc.experiments.recompute                  # every cpu record; exit 1 on any mismatch
    python -m longdoc.experiments.recompute --profile gpu results/gpu/manpages/20_sedr_main

A claim without an interval (a check such as notebook 45's, a bucket without queries) is listed as having
none (14's benchmarks too); a claim with an interval that names no two rows (notebook 24's per-bucket and
23's per-document comparisons, computed from a bucket of the queries or from the models' segment vectors)
is listed as not recomputable from the scores: its notebook recomputes it. The budget ladder (90) keeps
no scores of its own: its 1× intervals are those of notebooks 10, 20, 30 and 40, recomputed in their records.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

from longdoc.eval.paper_numbers import paper_difference
from longdoc.eval.significance import seed_query_bootstrap
from longdoc.experiments.records import RESULTS_DIR, stale
from longdoc.experiments.verdicts import INTERVAL, MDD, Precondition, interval_text, verdict

SCORES = "scores.json.gz"


def write_scores(folder: Path, scores: dict) -> Path:
    """``folder/scores.json.gz``: ``scores`` (:meth:`~longdoc.experiments.study.Study.per_item_scores`) at
    full precision (a rounded value could move an interval across a printed digit), written without a
    timestamp so an unchanged run writes the same bytes."""
    exact = {
        name: {
            "seeds": entry["seeds"],
            "measures": {
                measure: [{item: float(v) for item, v in sorted(seed.items())} for seed in per_seed]
                for measure, per_seed in entry["measures"].items()
            },
        }
        for name, entry in scores.items()
    }
    path = Path(folder) / SCORES
    with gzip.GzipFile(path, "wb", mtime=0) as handle:
        handle.write(json.dumps(exact, sort_keys=True, separators=(",", ":")).encode())
    return path


def read_scores(folder: Path) -> dict | None:
    path = Path(folder) / SCORES
    if not path.is_file():
        return None
    with gzip.open(path, "rb") as handle:
        return json.loads(handle.read())


def recompute_claim(scores: dict, claim: dict) -> dict | None:
    """The claim's Δ [95% CI] and minimum detectable difference from ``scores`` as the findings print them
    (None: the claim does not name two rows with per-item scores on its measure)."""
    system, against, measure = claim.get("system"), claim.get("against"), claim.get("measure")
    if system not in scores or against not in scores:
        return None
    if measure not in scores[system]["measures"] or measure not in scores[against]["measures"]:
        return None
    stats = seed_query_bootstrap(scores[system]["measures"][measure], scores[against]["measures"][measure])
    detectable = stats["minimum_detectable_difference"]
    return {
        INTERVAL: interval_text(stats["mean_difference"], stats["ci_low"], stats["ci_high"]),
        MDD: float(f"{detectable:.3g}"),
        "verdict": recomputed_verdict(claim, stats["ci_low"], stats["ci_high"], detectable),
    }


MARGIN = re.compile(r"\|Δ\| < ([0-9.]+)")  # a record made before claims kept their margin: its statement names it


def recomputed_verdict(claim: dict, low: float, high: float, detectable: float) -> str:
    """The verdict :func:`~longdoc.experiments.verdicts.verdict` gives the recomputed interval: the
    record's conditions as recorded (any "NOT met" makes it not testable; the conditions read training
    histories, not the scores), the paper's Δ from the claim's numbers and an equivalence claim's margin
    as recorded."""
    failed = Precondition(False, "recorded") if "NOT met" in str(claim.get("condition", "")) else None
    return verdict(low, high, failed, recorded_margin(claim), detectable, paper_difference(claim.get("paper")))


def recorded_margin(claim: dict) -> float | None:
    """An equivalence claim's margin (None: a claim that one row beats the other)."""
    if "margin" in claim:
        return None if claim["margin"] is None or claim["margin"] != claim["margin"] else float(claim["margin"])
    found = MARGIN.search(str(claim.get("claim", "")))
    return float(found.group(1)) if found else None


def recorded_interval(claim: dict):
    """A claim's recorded Δ [95% CI]: under :data:`INTERVAL`, or under a column that names where it was read
    (the budget ladder's "ours there: Δ [95% CI]"); None where it has none."""
    if INTERVAL in claim:
        return claim[INTERVAL]
    return next((value for key, value in claim.items() if str(key).endswith("Δ [95% CI]")), None)


def has_interval(text) -> bool:
    """Whether a claim's recorded Δ [95% CI] is an interval (not None, "—" or a NaN)."""
    return isinstance(text, str) and "[" in text and "nan" not in text.lower()


def check_record(folder: Path) -> list[dict]:
    """One row per claim of the record in ``folder``: what the record says, what the scores give, and
    whether they agree (``None``: not recomputable from the scores)."""
    record = json.loads((Path(folder) / "metrics.json").read_text())
    claims = ((record.get("metrics") or {}).get("findings") or {}).get("claims") or []
    scores = read_scores(folder)
    rows = []
    for claim in claims:
        found = recompute_claim(scores, claim) if scores is not None else None
        rows.append(
            {
                "notebook": record["notebook"],
                "claim": claim.get("claim"),
                "recorded": recorded_interval(claim),
                "recomputed": found[INTERVAL] if found else None,
                "recorded verdict": claim.get("verdict"),
                "recomputed verdict": found["verdict"] if found else None,
                "recorded MDD": claim.get(MDD),
                "recomputed MDD": found[MDD] if found else None,
                "agrees": None
                if found is None
                else found[INTERVAL] == claim.get(INTERVAL)
                and (MDD not in claim or found[MDD] == claim[MDD])
                and found["verdict"] == claim.get("verdict"),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m longdoc.experiments.recompute", description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="record folders (default: every record of the profile)")
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args(argv)
    folders = args.folders or sorted(p.parent for p in (RESULTS_DIR / args.profile).glob("*/*/metrics.json"))
    missing = [f for f in folders if not (Path(f) / "metrics.json").is_file()]
    if missing:
        parser.error(f"no metrics.json in {', '.join(map(str, missing))}")
    mismatches = 0
    for folder in folders:
        rows = check_record(folder)
        if not rows:
            continue
        agreed = sum(r["agrees"] is True for r in rows)
        skipped = [r for r in rows if r["agrees"] is None]
        wrong = [r for r in rows if r["agrees"] is False]
        mismatches += len(wrong)
        note = "" if (Path(folder) / SCORES).is_file() else f" (no {SCORES})"
        made_by = stale(json.loads((Path(folder) / "metrics.json").read_text()))
        if made_by:
            note += f" (STALE record, made by {made_by}: recomputed by this checkout's code)"
        without = sum(not has_interval(r["recorded"]) for r in rows)
        none = f" ({without} of its {len(rows)} claims {'has' if without == 1 else 'have'} none)" if without else ""
        print(f"{folder}: {agreed} of {len(rows) - without} intervals and verdicts recomputed and equal{none}{note}")
        for r in wrong:
            print(
                f"  DIFFERS: {r['claim']}: recorded {r['recorded']} ({r['recorded verdict']}; MDD {r['recorded MDD']}), "
                f"recomputed {r['recomputed']} ({r['recomputed verdict']}; MDD {r['recomputed MDD']})"
            )
        for r in skipped:
            if has_interval(r["recorded"]) and not (Path(folder) / SCORES).is_file():
                print(f"  not recomputable here (no per-item scores beside this record): {r['claim']}")
            elif has_interval(r["recorded"]):
                print(
                    f"  not recomputable from the scores (it names no two rows; its notebook recomputes it): {r['claim']}"
                )
            else:
                print(f"  no interval to recompute: {r['claim']}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
