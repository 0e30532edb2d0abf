"""The budget ladder: each paper's headline comparison rerun at several multiples of the profile's
fine-tuning budget, so a reader can tell a budget artefact from a refutation (notebook 90).

A :class:`~longdoc.experiments.systems.Headline` (on a paper's main table, in its paper module) names
the headline rows and claims, the notebook whose parameters it runs with (that notebook's values under the profile, its own
``notebooks:`` entry included) and the parameters that make its budget. A rung multiplies those by
``k``; every row of a comparison gets the same rung, dev selection runs as in the headline notebook,
and the rung's runs are cached like every other fit (the 1× rung *is* the headline notebook's runs).

- **What scales.** Fine-tuning steps (``train_steps``; NCI: its step cap ``nci_train_steps`` and its
  dev evaluations ``nci_dev_evals``, so NCI still stops at its own dev plateau, evaluated as often).
  Pre-training keeps the profile's budget: the ladder asks what more fine-tuning does, and each
  pre-trained row's precondition still says whether its pre-training worked.
- **Seeds.** The 1× rung keeps the headline notebook's seeds (its verdict is that notebook's); larger
  rungs up to ``ladder_two_seeds_until`` run its first two seeds, and rungs above it one seed: they
  show the trend, and :func:`~longdoc.experiments.verdicts.enough_runs` gives them no verdict.
- **Verdict against budget.** Per claim, the largest rung with a verdict, the verdict there, and
  whether the difference moved toward the paper's direction from the first rung.
"""

from __future__ import annotations

import time

import pandas as pd

from longdoc.experiments.papers import catalogue
from longdoc.experiments.profiles import (
    NOTEBOOKS_DIR,
    PROFILES_DIR,
    load_profile,
    notebook_parameter_names,
)
from longdoc.experiments.settings import from_parameters, scaled_budget, settings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import Headline
from longdoc.experiments.verdicts import NOT_TESTABLE, assess

LADDER_NOTEBOOK = "90_budget_ladder"
TARGET_MULTIPLIERS = (1, 4, 16)  # the ladder the study asks for; a profile that stops below it says where


@settings
class LadderSettings:
    ladder_longtriever: list  # budget multipliers of Longtriever's headline comparisons
    ladder_sedr: list
    ladder_smith: list
    ladder_nci: list
    ladder_two_seeds_until: int  # rungs up to this multiplier run two seeds; larger ones one (trend only)

    def multipliers(self, key: str) -> list[int]:
        return sorted(set(getattr(self, f"ladder_{key}")))


def ladder_settings(params: dict) -> LadderSettings:
    return from_parameters(LadderSettings, params, LADDER_NOTEBOOK)


HEADLINES = catalogue.HEADLINES  # each paper's headline comparison, from its table (papers/*.py)


# -- rungs ----------------------------------------------------------------------------------------------
def profile_entries(profile: str) -> dict:
    """The profile's ``notebooks:`` entries, if the profile is a file of ``notebooks/profiles/`` (where
    ``run_all.sh`` reads it; a copy elsewhere is looked up here by its name)."""
    path = PROFILES_DIR / f"{profile}.yaml"
    return load_profile(path)["notebooks"] if path.exists() else {}


def rung_parameters(params: dict, headline: Headline, multiplier: int, two_seeds_until: int) -> dict:
    """The headline notebook's parameters as ``run_all.sh`` gives them to it (the ladder's values, then the
    profile's own values for that notebook, except those the command line set: ``command_line``) with its
    budget multiplied by ``multiplier`` and its seeds at 1×, its first two up to ``two_seeds_until`` and
    one above. So the 1× rung reads the headline notebook's own runs, ``--set`` or not; a profile entry
    for the ladder itself that sets what the headline reads is refused (the two would differ)."""
    names = notebook_parameter_names(NOTEBOOKS_DIR / f"{headline.notebook}.ipynb")
    from_command_line = set(params.get("command_line", []))
    entries = profile_entries(params["profile"])
    clash = sorted((set(entries.get(LADDER_NOTEBOOK, {})) & {*names, "datasets"}) - from_command_line)
    if clash:
        raise ValueError(
            f"profile {params['profile']}: notebooks.{LADDER_NOTEBOOK} sets {clash}, which {headline.notebook} "
            f"reads: the ladder's 1× rung would not be {headline.notebook}'s runs (set them for every notebook, "
            "in the headline notebooks' entries, or with --set)"
        )
    own = {name: value for name, value in entries.get(headline.notebook, {}).items() if name not in from_command_line}
    values = {**params, **own}
    role_dataset = params.get("datasets", {}).get(headline.family.role)
    if role_dataset and "dataset" not in own and "dataset" not in from_command_line:
        values["dataset"] = role_dataset  # the headline reads its role's dataset (run_all.sh --data)
    missing = [n for n in names if n not in values]
    if missing:
        raise ValueError(f"{LADDER_NOTEBOOK} must declare {missing}: {headline.notebook} reads them")
    rung = {n: values[n] for n in names}
    for name in headline.budget:
        rung |= scaled_budget(rung, name, multiplier)
    if multiplier > 1:
        rung["seeds"] = list(rung["seeds"][: 2 if multiplier <= two_seeds_until else 1])
    return rung


def rung_study(params: dict, headline: Headline, multiplier: int, two_seeds_until: int, progress: bool) -> Study:
    """The headline's study at one rung (never recorded: the ladder's record holds its numbers)."""
    rung = rung_parameters(params, headline, multiplier, two_seeds_until)
    return Study(f"{LADDER_NOTEBOOK}-{headline.key}-{multiplier}x", rung, headline.family, progress)


def run_rung(study: Study, headline: Headline, multiplier: int) -> pd.DataFrame:
    """Fit the headline's rows at this rung and assess its claims: one row per claim."""
    systems = headline.rows(study)
    study.run_all(systems)
    claims = headline.claims(study, systems)
    verdicts = assess(study, claims)
    steps = study.params[headline.budget[0]]
    rows = []
    for claim, (_, verdict) in zip(claims, verdicts.iterrows()):
        stats = study.compare([(claim.system, claim.against)], claim.measure).iloc[0]
        rows.append(
            {
                "paper": headline.paper,
                "claim": claim.statement,
                "system": claim.system,
                "against": claim.against,
                "measure": claim.measure,
                "multiplier": multiplier,
                "training examples": steps * study.params[headline.items_per_step],
                "steps run": steps_run(study, [claim.system, claim.against])
                if headline.family.trains_to_plateau
                else "",
                "seeds": len(study.seeds),
                "Δ": stats["Δ"],
                "95% CI low": stats["95% CI low"],
                "95% CI high": stats["95% CI high"],
                "ours: Δ [95% CI]": verdict["ours: Δ [95% CI]"],
                "verdict": verdict["verdict"],
                "condition": verdict["condition"],
                "paper's numbers": claim.paper,
                "dataset": study.dataset_name,
                "data checksum": study.data.checksum,
            }
        )
    return pd.DataFrame(rows)


def steps_run(study: Study, names: list[str]) -> str:
    """The steps each compared trained row ran per seed (its last dev evaluation): a family that trains
    to its dev plateau stops below the rung's cap where it peaked early."""
    parts = []
    for name in names:
        training = study.results[name].training
        if training:
            parts.append(f"{name}: {', '.join(str(t['dev_curve'][-1][0]) for t in training)}")
    return "; ".join(parts)


def plan(params: dict, headlines: tuple[Headline, ...] = HEADLINES) -> pd.DataFrame:
    """The rungs to run, before any fit: each headline's steps, training examples and seeds per rung."""
    ladder = ladder_settings(params)
    rows = []
    for headline in headlines:
        for multiplier in ladder.multipliers(headline.key):
            rung = rung_parameters(params, headline, multiplier, ladder.ladder_two_seeds_until)
            steps = rung[headline.budget[0]]
            rows.append(
                {
                    "paper": headline.paper,
                    "budget (× profile)": multiplier,
                    "steps per run": f"{steps} at most" if headline.family.trains_to_plateau else str(steps),
                    "training examples": steps * rung[headline.items_per_step],
                    "seeds": ", ".join(str(s) for s in rung["seeds"]),
                    "dataset": f"{rung['dataset']}" + (f", {rung['max_docs']} documents" if rung["max_docs"] else ""),
                }
            )
    return pd.DataFrame(rows)


def climb(params: dict, progress: bool = True, headlines: tuple[Headline, ...] = HEADLINES) -> pd.DataFrame:
    """Every headline at each of its rungs: one row per (claim, rung), with the rung's wall-clock minutes
    (near zero where its runs were cached: the 1× rung after the headline notebook). Every rung's
    parameters are checked before the first fit."""
    check_rungs(params, headlines)
    ladder = ladder_settings(params)
    frames = []
    for headline in headlines:
        for multiplier in ladder.multipliers(headline.key):
            study = rung_study(params, headline, multiplier, ladder.ladder_two_seeds_until, progress)
            if progress:
                print(
                    f"{headline.paper} at {multiplier}× ({study.params[headline.budget[0]]} steps, seeds {study.seeds})"
                )
            start = time.perf_counter()
            frame = run_rung(study, headline, multiplier)
            frames.append(frame.assign(**{"rung minutes": round((time.perf_counter() - start) / 60, 1)}))
    return pd.concat(frames, ignore_index=True)


def check_rungs(params: dict, headlines: tuple[Headline, ...] = HEADLINES) -> None:
    """Every rung's parameters, checked (a missing parameter, a budget out of range or a cross-parameter
    error stops the notebook before any fit)."""
    ladder = ladder_settings(params)
    for headline in headlines:
        for multiplier in ladder.multipliers(headline.key):
            rung = rung_parameters(params, headline, multiplier, ladder.ladder_two_seeds_until)
            if rung[headline.budget[0]] == 0:  # its tables and figure read budgets in steps
                raise ValueError(
                    f"{LADDER_NOTEBOOK}: {headline.notebook}'s {headline.budget[0]} is 0 (a budget in passes); the "
                    f"ladder counts budgets in steps: --set {headline.budget[0]}=N, or leave {LADDER_NOTEBOOK} out"
                )
            Study(
                f"{LADDER_NOTEBOOK}-{headline.key}-{multiplier}x",
                rung,
                headline.family,
                progress=False,
            )


# -- verdict against budget --------------------------------------------------------------------------------
def trend(frame: pd.DataFrame) -> pd.DataFrame:
    """Per claim: the largest rung with a verdict (two seeds, preconditions met), its verdict and
    interval, and whether Δ moved toward the paper's direction (up: every headline claim says "A beats
    B") from the first rung to the largest one run."""
    rows = []
    for (paper, claim), runs in frame.groupby(["paper", "claim"], sort=False):
        runs = runs.sort_values("multiplier")
        tested = runs[runs["verdict"] != NOT_TESTABLE]
        first, last = runs.iloc[0], runs.iloc[-1]
        change = last["Δ"] - first["Δ"]
        if len(runs) < 2:
            moves = "one rung only"
        else:
            direction = "toward" if change > 0 else "away from" if change < 0 else "no change to"
            moves = (
                f"{direction} the paper's: {first['Δ']:+.3g} at {first['multiplier']}× → "
                f"{last['Δ']:+.3g} at {last['multiplier']}×"
            )
        top = tested.iloc[-1] if len(tested) else None
        rows.append(
            {
                "paper": paper,
                "claim": claim,
                "largest budget run": f"{last['multiplier']}× ({last['seeds']} seed{'s' if last['seeds'] > 1 else ''})",
                "largest budget with a verdict": f"{top['multiplier']}×" if top is not None else "none",
                "ours there: Δ [95% CI]": top["ours: Δ [95% CI]"] if top is not None else "—",
                "verdict": top["verdict"] if top is not None else NOT_TESTABLE,
                "Δ moves": moves,
                "why no verdict": "" if top is not None else last["condition"],
            }
        )
    return pd.DataFrame(rows)


def stopped_short(params: dict, headlines: tuple[Headline, ...] = HEADLINES) -> list[str]:
    """The headlines whose rungs stop below :data:`TARGET_MULTIPLIERS`' largest, with their largest rung
    and how many seeds it runs."""
    ladder = ladder_settings(params)
    stops = []
    for h in headlines:
        top = max(ladder.multipliers(h.key))
        if top < max(TARGET_MULTIPLIERS):
            seeds = len(rung_parameters(params, h, top, ladder.ladder_two_seeds_until)["seeds"])
            stops.append(f"{h.paper} stops at {top}× ({seeds} seed{'s' if seeds > 1 else ''})")
    return stops


def ladder_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The rungs as a reader scans them: claim × budget, Δ with its interval and verdict."""
    columns = ["paper", "claim", "multiplier", "training examples", "seeds", "ours: Δ [95% CI]", "verdict"]
    return frame[columns].rename(columns={"multiplier": "budget (× profile)"})


def rung_minutes(frame: pd.DataFrame) -> pd.DataFrame:
    """Wall-clock minutes per headline and rung (kept out of :func:`ladder_table`, whose outputs are
    checked: a time differs from run to run)."""
    minutes = frame.drop_duplicates(["paper", "multiplier"])[["paper", "multiplier", "seeds", "rung minutes"]]
    return minutes.rename(columns={"multiplier": "budget (× profile)"}).reset_index(drop=True)
