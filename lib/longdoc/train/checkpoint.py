"""Resumable training: the whole state of a run (model, optimizer, scheduler, every random generator,
the position in the data order, the loop's own bookkeeping) saved atomically, so a run killed at any
moment (SIGKILL included) continues from its last save to the same final weights and metrics as an
uninterrupted run (tested with a killed subprocess).

Saving is the caller's choice of moments (:class:`Checkpointer`): every ``every`` steps, and/or at the
first step ``minutes`` after the last save (a save costs a write of the model and optimizer, so
fine-tuning saves by the clock rather than at every dev evaluation). Where the saves fall never
changes the result.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from longdoc.io import atomic_write
from longdoc.sharding import from_first, rank, world_size

STATE_FILE = "training_state.pt"
SAVE_MINUTES = 10.0  # the studies' training runs save their state at most this often


def rng_states() -> dict:
    """The global generators: Python's, NumPy's, torch's CPU and (when present) CUDA ones."""
    states = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


@dataclass
class Checkpointer:
    """Where and how often a run saves its state (``directory=None``: never).

    Each process writes its own state file per saved step (``training_state.rank<r>.step<s>.pt``, its
    generators and data position are its own) and keeps its two newest; the moment to save is the
    first process's decision, and a resumed run continues from the newest step that *every* process
    saved, so a kill between two processes' writes never pairs different steps."""

    directory: Path | None = None
    every: int = 0  # steps between saves (0: none by step count)
    minutes: float = 0.0  # > 0: also save at the first step this long after the last save
    _last: float = field(default_factory=time.monotonic, repr=False)

    def _path(self, step: int, process: int | None = None) -> Path:
        number = rank() if process is None else process
        return Path(self.directory) / STATE_FILE.replace(".pt", f".rank{number}.step{step}.pt")

    def _saved_steps(self) -> list[int]:
        if self.directory is None or not Path(self.directory).is_dir():
            return []
        prefix = STATE_FILE.replace(".pt", f".rank{rank()}.step")
        return sorted(int(p.name[len(prefix) : -3]) for p in Path(self.directory).glob(f"{prefix}*.pt"))

    def due(self, step: int) -> bool:
        if self.directory is None:
            return False
        by_steps = self.every > 0 and step % self.every == 0
        if by_steps or self.minutes <= 0:  # the same on every process: nothing to agree on
            return by_steps
        return bool(from_first(time.monotonic() - self._last >= 60 * self.minutes))  # the first process's clock

    def save(self, state: dict) -> None:
        step = state["step"]
        with atomic_write(self._path(step), "wb") as handle:
            torch.save({**state, "rng": rng_states()}, handle)
        for older in self._saved_steps()[:-2]:
            self._path(older).unlink(missing_ok=True)
        self._last = time.monotonic()

    def load(self) -> dict | None:
        """The state of the newest step every process saved (global generators already restored), or
        None when there is none."""
        if self.directory is None:
            return None
        steps = set(self._saved_steps())
        if world_size() > 1:
            import torch.distributed as dist

            everyone: list = [None] * world_size()
            dist.all_gather_object(everyone, sorted(steps))
            steps = set.intersection(*(set(s) for s in everyone))
        if not steps:
            return None
        state = torch.load(self._path(max(steps)), map_location="cpu", weights_only=False)
        restore_rng_states(state.pop("rng"))
        return state
