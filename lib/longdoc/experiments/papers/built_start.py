"""The experiment on the start built here (README, "The experiment on it, stated before it was run"):
do the papers' pre-training claims become testable from an MLM-only backbone (notebook 50)?

The rows are notebook 11's first three (Table 4's I LMAE + MLM, II MLM only, III no pre-training), read
from the study's backbone (``backbone: manpages-mlm`` in the ``cpu`` profile's entry for the notebook:
:mod:`longdoc.experiments.backbones`). The questions, in the README's numbering:

2. **Does LMAE + MLM lift the start?** The rows' dev in-batch probes (:func:`start_probes`), a diagnostic.
3. **Does it survive fine-tuning?** Table 4's claims I > III, I > II, II > III at the budget found below,
   with their preconditions (:mod:`longdoc.experiments.preconditions`).
4. **Do the rows learn?** A row learns when its mean test measure reaches :data:`LEARNS_AT` and its 95%
   interval over queries and seeds lies above chance (:func:`learns`). The fine-tuning budget is searched
   upward (:func:`budget_search`: ``train_steps`` times each of ``start_budgets``) and stops at the first
   budget where every row learns; every budget tried is in the record with its rows' figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from longdoc.experiments.papers.longtriever import ablation_claims, ablation_systems
from longdoc.experiments.settings import EncoderSettings, settings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import System
from longdoc.experiments.verdicts import Claim

NOTEBOOK = "50_built_start"
LEARNS_AT = 0.05  # mean test MRR@100: eight times a random ranking's 0.006 on the 1,100 pages
LANGUAGE_MARGIN = 0.10  # question 1: held-out MLM accuracy this far above always guessing the commonest token


@settings
class StartBudgets:
    start_budgets: list  # multiples of train_steps tried in order until every row learns


@dataclass(frozen=True)
class BudgetSearch:
    """The search's outcome: the study at the budget it stopped at (its runs are the notebook's table),
    and one row per (budget, row) tried."""

    study: Study
    budgets: pd.DataFrame

    @property
    def found(self) -> bool:
        last = self.budgets[self.budgets["train_steps"] == self.study.params["train_steps"]]
        return bool(last["learns"].all())


def backbone_learned(study: Study) -> pd.DataFrame:
    """Question 1 from the backbone's own record (``mlm-backbone.json``): its size, steps, wall time and
    held-out MLM accuracy against always guessing the commonest masked token; one row, empty figures and
    no verdict for a backbone not built here (the packaged MiniLM has no MLM head to measure)."""
    from longdoc.models.backbone import resolve_backbone
    from longdoc.train.mlm_backbone import RECORD

    backbone = study.params["backbone"]
    record_file = Path(resolve_backbone(study.settings(EncoderSettings).backbone)) / RECORD
    if not record_file.is_file():
        return pd.DataFrame([{"backbone": backbone, "built here": False, "learned language": None}])
    record = json.loads(record_file.read_text(encoding="utf-8"))
    held, config = record["held_out"], record["config"]
    return pd.DataFrame(
        [
            {
                "backbone": backbone,
                "built here": True,
                "shape": f"{config['layers']} × {config['hidden']}",
                "parameters": record["parameters"],
                "steps": config["steps"],
                "tokens seen": record["tokens_seen"],
                "minutes": round(record["seconds"] / 60, 1),
                "held-out pages": record["pages"]["held_out"],
                "held-out accuracy": held["accuracy"],
                "majority accuracy": held["majority_accuracy"],
                "held-out loss": held["loss"],
                "learned language": held["accuracy"] >= held["majority_accuracy"] + LANGUAGE_MARGIN,
            }
        ]
    )


def rows(study: Study) -> list[System]:
    """Table 4's rows I–III from the study's backbone (II and III keep I's dev-chosen learning rate)."""
    return ablation_systems(study)[:3]


def claims(study: Study, systems: list[System]) -> list[Claim]:
    """Table 4's pre-training claims: I > III, I > II, II > III."""
    names = {s.name for s in systems}
    return [c for c in ablation_claims() if c.system in names and c.against in names]


def learns(study: Study, names: list[str], measure: str = "MRR@100") -> pd.DataFrame:
    """Question 4 per row: mean test ``measure`` with its 95% interval over queries and seeds, the family's
    chance level, and whether the row learns (mean at least :data:`LEARNS_AT`, interval above chance)."""
    chance = study.family.chance(study, measure)
    table = study.table(names, [measure], intervals=True)
    frame = pd.DataFrame(
        {
            "train_steps": study.params["train_steps"],
            "row": names,
            "seeds": table["seeds"].to_numpy(),
            measure: table[measure].to_numpy(dtype=float),
            "95% low": table[f"{measure} 95% low"].to_numpy(dtype=float),
            "95% high": table[f"{measure} 95% high"].to_numpy(dtype=float),
            "chance": chance,
        }
    )
    frame["learns"] = (frame[measure] >= LEARNS_AT) & (frame["95% low"] > chance)
    return frame


def budget_search(study: Study) -> BudgetSearch:
    """Fit :func:`rows` at ``train_steps`` × each of ``start_budgets`` in order (every rung with the study's
    seeds and its own dev selection, cached like every fit) and stop at the first budget where every row
    learns (:func:`learns`); the last budget tried when none does. Each rung is a study of this notebook
    whose ``train_steps`` is the rung's, so the study returned records the budget its table was run at."""
    budgets = sorted(set(study.settings(StartBudgets).start_budgets))
    if not budgets or budgets[0] < 1:
        raise ValueError(f"start_budgets={budgets}: multiples of train_steps, each at least 1")
    frames = []
    rung = study
    for multiple in budgets:
        steps = study.params["train_steps"] * multiple
        rung = study if multiple == 1 else study.with_parameters(train_steps=steps)
        systems = rows(rung)
        rung.run_all(systems)
        frames.append(learns(rung, [s.name for s in systems]).assign(budget=f"{multiple}×"))
        if frames[-1]["learns"].all():
            break
    return BudgetSearch(rung, pd.concat(frames, ignore_index=True))


def decision(backbone: pd.DataFrame, search: BudgetSearch) -> str:
    """Questions 1 and 4 in words, and what they decide for the Longtriever rows (README's rule: the
    pre-training claims are posed on this start only if its rows learn; SMITH's rows are notebook 51's)."""
    first = backbone.iloc[0]
    if not first["built here"]:
        language = f"question 1 does not apply: {first['backbone']} was not built here (no MLM record)"
    else:
        language = (
            f"question 1: held-out MLM accuracy {first['held-out accuracy']:.3f} against "
            f"{first['majority accuracy']:.3f} for the commonest token: "
            + ("the backbone learned language" if first["learned language"] else "it did not learn language")
        )
    steps = search.study.params["train_steps"]
    last = search.budgets[search.budgets["train_steps"] == steps]
    tried = ", ".join(str(s) for s in dict.fromkeys(search.budgets["train_steps"]))
    if search.found:
        learning = f"question 4: every row learns at {steps} fine-tuning steps (budgets tried: {tried})"
    else:
        failing = ", ".join(last.loc[~last["learns"], "row"])
        learning = f"question 4: at {steps} steps, the largest budget tried ({tried}), {failing} still fail the rule"
    learned = search.found and (not first["built here"] or bool(first["learned language"]))
    verdict = (
        "the rows learn from this start, so Table 4's pre-training claims below are posed on it"
        if learned
        else "the rows do not all learn from this start, so the pre-training claims stay not testable on it"
    )
    return f"{language}; {learning}; {verdict}."
