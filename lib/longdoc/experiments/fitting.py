"""Fitting, written once for every family: the dev evaluation inside training, the cached fitted
artefact, and the one entry point that builds it.

- :class:`DevEvaluation`: called by the step loop (:func:`longdoc.train.steps.run_steps`) at every dev
  evaluation; a family's subclass only scores the model (its selection measure on dev) and says what
  to keep of that evaluation (runs, pair scores, a learning-curve point), so that the dev-best
  checkpoint's test outputs need no second pass. Kept outputs are saved with a training state, so a
  resumed run keeps them. Test judgements are never read.
- :class:`FineTuned`: a cached fitting: its directory (``model/`` inside), training history (one record
  per fitting iteration, and what the family adds) and the dev-best checkpoint's outputs.
- :func:`fine_tune`: the entry point: cached under a key of everything that determines the fit
  (:mod:`longdoc.experiments.cache`), built by the family's ``train(directory, resume)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from longdoc.experiments.cache import cached_directory
from longdoc.io import missing_checkpoint


class CheckpointMissing(FileNotFoundError):
    """A fit's model was asked for, but the fit was imported without its checkpoint."""


class DevEvaluation:
    """The dev evaluation of one fitting (a family subclasses :meth:`evaluate`)."""

    def __init__(self) -> None:
        self.kept: dict[int, Any] = {}  # what each evaluated step left (its runs, scores, curve point)

    def evaluate(self, model, step: int) -> tuple[float, Any]:
        """``(dev score, what to keep of this evaluation)``; higher scores are better."""
        raise NotImplementedError

    def __call__(self, model, step: int) -> float:
        score, kept = self.evaluate(model, step)
        self.kept[step] = kept
        return score

    def state_dict(self) -> dict:
        return {"kept": self.kept}

    def load_state_dict(self, state: dict) -> None:
        self.kept = {int(step): value for step, value in state["kept"].items()}


@dataclass
class FineTuned:
    """A cached fitting: directory, history and the outputs of its dev-best checkpoint."""

    directory: Path
    history: dict  # {"iterations": [one training record per iteration], **what the family adds}
    outputs: dict  # the dev-best checkpoint's outputs (retrieval: runs; matching: pair scores; NCI: none)
    loader: Callable[[Path], Any]  # the family's way to load ``directory / "model"``

    def model(self):
        """The fitted model; a fit imported without its checkpoint (``python -m longdoc.experiments.cache
        import``) serves its history and outputs only, and this says so by name."""
        if not (self.directory / "model").exists():
            raise CheckpointMissing(missing_checkpoint(self.directory / "model") or f"{self.directory}: no model")
        return self.loader(self.directory / "model")

    @property
    def last(self) -> dict:
        """The training record of the last (or only) iteration."""
        return self.history["iterations"][-1]

    @property
    def best_dev(self) -> float:
        return self.last["best_dev"]

    def summary(self, seed: int, extra: tuple[str, ...] = ()) -> dict:
        """The training summary of the record (the same keys for every family, no timing: the same seed
        gives the same record), with ``extra`` history fields; a trainer that logs named loss terms
        (NCI's) adds them per dev evaluation as ``train_terms``."""
        last = self.last
        terms = [[h["step"], {k: round(v, 4) for k, v in h["terms"].items()}] for h in last["history"] if "terms" in h]
        return {
            "seed": seed,
            "best_step": last["best_step"],
            "best_dev": last["best_dev"],
            "dev_curve": [[h["step"], round(h["dev"], 4)] for h in last["history"] if "dev" in h],
            "iterations": len(self.history["iterations"]),
            **({"patience": last["config"]["patience"]} if last.get("config", {}).get("patience") else {}),
            **({"stopped_early": last["stopped_early"]} if "stopped_early" in last else {}),
            **(
                {"epochs_at_best": round(last["best_step"] / last["steps_per_epoch"], 2)}
                if last.get("steps_per_epoch")
                else {}
            ),
            **({"train_terms": terms} if terms else {}),
            **{name: self.history[name] for name in extra if name in self.history},
        }


HISTORY, OUTPUTS = "history.json", "outputs.json"


def train_key(config) -> dict:
    """A training config as a cache determinant: fields added after caches existed (``patience``) enter
    the key only when set, so a run of the old settings keeps its key."""
    return {name: value for name, value in asdict(config).items() if name != "patience" or value}


def save_fit(directory: Path, history: dict, outputs: dict) -> None:
    """Write a fitting's history and outputs (the model is already in ``directory / "model"``)."""
    (Path(directory) / HISTORY).write_text(json.dumps(history, indent=2))
    (Path(directory) / OUTPUTS).write_text(json.dumps(outputs))


def load_fit(directory: Path, loader: Callable[[Path], Any]) -> FineTuned:
    return FineTuned(
        directory, json.loads((directory / HISTORY).read_text()), json.loads((directory / OUTPUTS).read_text()), loader
    )


def fine_tune(
    kind: str, train: Callable[[Path, Path], tuple[dict, dict] | None], loader: Callable[[Path], Any], /, **determinants
) -> FineTuned:
    """The cached fitting ``kind``/<key of ``determinants``>: ``train(directory, resume)`` saves the model
    into ``directory / "model"`` and returns ``(history, outputs)`` (or writes them itself with
    :func:`save_fit`, as the first of several training processes does); ``resume`` keeps training
    states across a killed build."""

    def build(directory: Path, resume: Path) -> None:
        written = train(directory, resume)
        if written is not None:
            save_fit(directory, *written)

    return load_fit(cached_directory(kind, build, **determinants), loader)
