"""What must hold of a system before a claim about it can be tested, checked for every claim that
names it, in every notebook (:meth:`longdoc.experiments.study.Study.preconditions`). None restates a
claim: each is a fact about one row or its start, never a comparison of the two rows a claim compares.

- **above chance**: its mean test measure beats a system without skill (:meth:`Family.chance`: a
  random ranking, a constant label); a model below chance learned nothing a comparison could read;
- **at its dev plateau** (a family whose rows train to their plateau, NCI's): every run's dev-best
  evaluation came before its last, so the comparison is not one of budgets (a row still improving at
  the cap, beside rows that had levelled off, would measure epochs);
- **pre-training learned** (a pre-trained row): every pre-training loss fell by :data:`LOSS_FALL`. Its
  start's dev probe beside the same model's start without pre-training (:meth:`Spec.start_probe`) is
  reported as a diagnostic and gates nothing, so a pre-training claim can come out reversed;
- **the start the paper assumes** (a claim that compares pre-training: ``Claim.pretraining``, or two rows of
  which one is pre-trained and the other not; checked per claim by :func:`paper_start`): every pre-trained
  row it compares continues from an MLM-trained encoder (BERT, as the papers; a backbone built here) or from
  random weights. From a contrastive sentence encoder (the packaged MiniLM, which has no trained MLM head)
  such claims are not testable.

Two seeds of each trained row (:func:`longdoc.experiments.verdicts.enough_runs`) and each row above
chance complete a pre-training claim's conditions. An unmet precondition turns the verdict into "not
testable at this scale", with the reason (:func:`longdoc.experiments.verdicts.assess`).
"""

from __future__ import annotations

import math

from longdoc.experiments.backbones import MLM_TRAINED, backbone_training
from longdoc.experiments.verdicts import Precondition

LOSS_FALL = 0.10  # pre-training "clearly" lowers a loss: its last tenth of steps is 10% below its first tenth
PRETRAINING_LOSSES = ("mlm", "lmae", "sp")  # Longtriever's MLM and LMAE, SMITH's masked words and blocks


def losses_fell(history: list[dict]) -> tuple[bool, str]:
    """Whether every loss of a pre-training's full phase (``history``: one record per step) fell by
    ``LOSS_FALL`` from its first tenth of steps to its last, and the falls as text."""
    full = [r for r in history if r["phase"] == "full"]
    if not full:
        return False, "no full pre-training step"
    window = max(1, len(full) // 10)
    falls = {}
    for loss in PRETRAINING_LOSSES:
        if loss in full[0]:
            first = sum(r[loss] for r in full[:window]) / window
            last = sum(r[loss] for r in full[-window:]) / window
            falls[loss] = (first - last) / first
    # each fall cut (not rounded) to a tenth of a percent: a fall just short of the bar never prints at it
    text = ", ".join(
        f"{loss.upper()} {0.0 - math.floor(fall * 1000 + 1e-9) / 1000:+.1%}".replace("-", "−")
        for loss, fall in falls.items()
    )
    return bool(falls) and all(fall >= LOSS_FALL for fall in falls.values()), text


def pretraining_works(study, system) -> list[Precondition]:
    """The pre-trained row's conditions ([]: the row is not pre-trained): its losses fell (a gate), and its
    start's dev probe beside the start without pre-training (a diagnostic, where the family has a probe)."""
    plain_spec = system.spec.without_pretraining()
    if plain_spec is None:
        return []
    fell, falls = losses_fell(system.spec.pretraining_steps(study))
    found = [
        Precondition(
            fell,
            f"pre-training of {system.name} learned (every loss down {LOSS_FALL:.0%} from its first tenth of "
            f"steps to its last: {falls})",
        )
    ]
    probe, plain = study.start_probe(system.spec), study.start_probe(plain_spec)
    if probe is not None and plain is not None:
        loss = f", loss {probe['loss']:.3f} vs {plain['loss']:.3f}" if "loss" in probe and "loss" in plain else ""
        found.append(
            Precondition(
                True,
                f"{system.name}'s start against its start without pre-training on the {probe['probe']}: "
                f"{probe['score']:.3f} vs {plain['score']:.3f}{loss}",
                diagnostic=True,
            )
        )
    return found


def start_trained_as(spec) -> str:
    """What a pre-trained row's pre-training continues from: "random weights", or the training of its
    encoder's backbone (:func:`longdoc.experiments.backbones.backbone_training`)."""
    encoder = getattr(spec, "pretrain_encoder", None) or spec.encoder
    if getattr(spec, "random_init", False) or getattr(encoder, "random_init", False):  # SMITH's config holds it
        return RANDOM
    return backbone_training(encoder.backbone)


RANDOM = "random weights"


def pretrained(study, name: str) -> bool:
    """Whether row ``name`` is pre-trained before fine-tuning (its spec has a version without)."""
    return study.results[name].system.spec.without_pretraining() is not None


def compares_pretraining(study, claim) -> bool:
    """A pre-training claim, or one whose two rows differ in pre-training (one pre-trained, the other not:
    SMITH-WP+SP against MatchBERT compares pre-training too, whatever else it compares). Two rows both
    pre-trained (a sweep of one pre-trained model) do not."""
    return claim.pretraining or pretrained(study, claim.system) != pretrained(study, claim.against)


def paper_start(study, claim) -> list[Precondition]:
    """The start rule of a claim that compares pre-training (:func:`compares_pretraining`): each pre-trained
    row it compares continues from an MLM-trained encoder or from random weights, the starts the papers
    pre-train from ([]: a claim that does not compare pre-training). Issue 49's review: the rule read
    pre-training claims only, so SMITH-WP+SP pre-trained from MiniLM decided two claims about length."""
    if not compares_pretraining(study, claim):
        return []
    what = "a pre-training claim" if claim.pretraining else "a claim whose rows differ in pre-training"
    found = []
    for name in (claim.system, claim.against):
        if not pretrained(study, name):
            continue
        start = start_trained_as(study.results[name].system.spec)
        found.append(
            Precondition(
                start == RANDOM or start.startswith(MLM_TRAINED),
                f"{name} is pre-trained from {start}, the start the paper assumes (an MLM-trained encoder or "
                f"random weights; from a contrastive sentence encoder {what} is not testable)",
            )
        )
    return found


def above_chance(study, name: str, measure: str) -> Precondition | None:
    """The system's mean test ``measure`` against the family's chance level (None: chance unknown)."""
    chance = study.family.chance(study, measure)
    if chance is None:
        return None
    mean = study.table([name], [measure])[measure].iloc[0]
    return Precondition(
        bool(mean > chance), f"{name} above chance ({measure} {mean:.3f} vs {chance:.3f})", routine=True
    )


def stopped_at_plateau(training: dict) -> bool:
    """Whether one run stopped at its dev plateau: a run with a stopping rule (``patience``) stopped by it
    (``stopped_early``: ``patience`` dev evaluations in a row without a new best), not at the step cap; a
    run that ran to its cap has not plateaued, whenever its best came. A run without the rule (patience
    0), or a record without the flag (made before it was kept), falls back to its dev-best evaluation
    coming before its last."""
    if training.get("patience") and "stopped_early" in training:
        return bool(training["stopped_early"])
    return training["best_step"] < training["dev_curve"][-1][0]


def reached_plateau(study, name: str) -> Precondition | None:
    """Whether every run of a trained row that trains to its dev plateau (a plateau-training family, or
    runs with early stopping, ``patience``) stopped there (:func:`stopped_at_plateau`); for an ensemble,
    every run of every member (None: neither, or nothing trained)."""
    result = study.results[name]
    members = getattr(getattr(result.system, "spec", None), "members", None)  # an ensemble's rows
    runs = {m.name: study.results[m.name].training for m in members} if members else {name: result.training}
    to_plateau = result.system.family.trains_to_plateau or any(t.get("patience") for r in runs.values() for t in r)
    if not to_plateau or not any(runs.values()):  # the row's family (FirstP in NCI's table: none)
        return None
    each = "; ".join(
        f"{member + ': ' if members else ''}dev-best step {[t['best_step'] for t in training]} of {[t['dev_curve'][-1][0] for t in training]} "
        f"trained, stopped by its rule {[stopped_at_plateau(t) for t in training]}"
        for member, training in runs.items()
        if training
    )
    return Precondition(
        all(stopped_at_plateau(t) for training in runs.values() for t in training),
        f"{name} reached its dev plateau (per seed{'; ' if members else ': '}{each})",
        routine=True,
    )
