"""What must hold of a system before a claim about it can be tested, checked for every claim that
names it, in every notebook (:meth:`longdoc.experiments.study.Study.preconditions`):

- **above chance**: its mean test measure beats a system without skill (:meth:`Family.chance`: a
  random ranking, a constant label); a model below chance learned nothing a comparison could read;
- **at its dev plateau** (a family whose rows train to their plateau, NCI's): every run's dev-best
  evaluation came before its last, so the comparison is not one of budgets (a row still improving at
  the cap, beside rows that had levelled off, would measure epochs);
- **pre-training works** (a pre-trained row): every pre-training loss fell by :data:`LOSS_FALL`, and
  its start beats the same model's start without pre-training on the family's dev probe
  (:meth:`Spec.start_probe`: higher score, and lower loss where the probe has one). A row whose
  pre-training erased the backbone at this budget does not speak for the paper's pre-trained model.

An unmet precondition turns the verdict into "not testable at this scale", with the reason
(:func:`longdoc.experiments.verdicts.assess`).
"""

from __future__ import annotations

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
    text = ", ".join(f"{loss.upper()} {0.0 - fall:+.0%}".replace("-", "−") for loss, fall in falls.items())
    return bool(falls) and all(fall >= LOSS_FALL for fall in falls.values()), text


def beats(probe: dict, plain: dict) -> bool:
    """A start beats another on the probe: a higher score and, where measured, a lower loss."""
    better = probe["score"] > plain["score"]
    if "loss" in probe and "loss" in plain:
        better = better and probe["loss"] < plain["loss"]
    return bool(better)


def pretraining_works(study, system) -> Precondition | None:
    """The pre-trained row's precondition (None: the row is not pre-trained or its family has no probe)."""
    plain_spec = system.spec.without_pretraining()
    if plain_spec is None:
        return None
    probe, plain = study.start_probe(system.spec), study.start_probe(plain_spec)
    if probe is None or plain is None:
        return None
    fell, falls = losses_fell(system.spec.pretraining_steps(study))
    loss = f", loss {probe['loss']:.3f} vs {plain['loss']:.3f}" if "loss" in probe and "loss" in plain else ""
    return Precondition(
        fell and beats(probe, plain),
        f"pre-training of {system.name} works (every loss down {LOSS_FALL:.0%} from its first tenth of steps to its "
        f"last: {falls}; its start beats the start "
        f"without pre-training on the {probe['probe']}: {probe['score']:.3f} vs {plain['score']:.3f}{loss})",
    )


def above_chance(study, name: str, measure: str) -> Precondition | None:
    """The system's mean test ``measure`` against the family's chance level (None: chance unknown)."""
    chance = study.family.chance(study, measure)
    if chance is None:
        return None
    mean = study.table([name], [measure])[measure].iloc[0]
    return Precondition(
        bool(mean > chance), f"{name} above chance ({measure} {mean:.3f} vs {chance:.3f})", routine=True
    )


def reached_plateau(study, name: str) -> Precondition | None:
    """Whether every run of a trained row that trains to its dev plateau (a plateau-training family, or
    runs with early stopping, ``patience``) peaked before its last dev evaluation (None: neither, or the
    row is not trained)."""
    result = study.results[name]
    to_plateau = result.system.family.trains_to_plateau or any(t.get("patience") for t in result.training)
    if not to_plateau or not result.training:  # the row's family (FirstP in NCI's table: none)
        return None
    best = [t["best_step"] for t in result.training]
    last = [t["dev_curve"][-1][0] for t in result.training]
    return Precondition(
        all(b < end for b, end in zip(best, last)),
        f"{name} reached its dev plateau (dev-best step {best} of {last} trained, per seed)",
        routine=True,
    )
