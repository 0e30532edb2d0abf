"""A deadline for a study run in pieces: no fit chain starts that the estimate says cannot finish in time.

A chain is one row's fit plan at one learning rate and seed (:meth:`~longdoc.experiments.systems.Spec.fits`:
its pre-training, its iterations, a miner's negatives; a warm start is a chain of its own, run first,
and priced to the end of the longest chain that starts from it, since an export carries no model; a
later dependent chain can still be refused, and then the next piece needs that warm start's model:
it stops with :class:`~longdoc.experiments.fitting.CheckpointMissing` naming it).
``LONGDOC_DEADLINE`` (a Unix time, or an ISO 8601 time with its zone) sets the deadline; ``run_all.sh
--deadline MINUTES`` sets it and, before each notebook, writes the notebook's fit prices
(``python -m longdoc.bench.gpu_hours --fit-prices``: for each fit, the priced seconds from it to the end
of its chain, at its ceiling) into the file ``LONGDOC_FIT_PRICES`` names. When a chain is about to
build its first uncached artefact (:func:`longdoc.experiments.cache.build_guard`), it starts only if
that much time is left; otherwise :class:`DeadlineReached` stops the notebook there, and what it built
so far stays in the cache (export it: ``python -m longdoc.experiments.cache export``). A chain whose
fits are all cached builds nothing and is never stopped; a fit the price file does not know is priced
at zero (only a passed deadline stops it).
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import time
from pathlib import Path

DEADLINE_VARIABLE = "LONGDOC_DEADLINE"
PRICES_VARIABLE = "LONGDOC_FIT_PRICES"


class DeadlineReached(RuntimeError):
    """A fit chain was not started: the estimate says it cannot finish before the deadline."""


def parse_deadline(value: str) -> float:
    """A Unix time from ``value`` (seconds, or ISO 8601 with its zone); anything else is refused by name."""
    try:
        moment = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(moment):
            raise ValueError(f"{DEADLINE_VARIABLE}={value!r}: expected a Unix time (a finite number)")
        return moment
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{DEADLINE_VARIABLE}={value!r}: expected a Unix time or an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise ValueError(f"{DEADLINE_VARIABLE}={value!r}: give the time's zone (e.g. 2026-11-27T06:00+00:00)")
    return moment.timestamp()


def deadline() -> float | None:
    """The deadline of this process (None: none set)."""
    value = os.environ.get(DEADLINE_VARIABLE, "").strip()
    return parse_deadline(value) if value else None


@functools.lru_cache(maxsize=4)
def _read_prices(path: str, modified: float) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(Path(path).read_text())["chain_seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(
            f"{PRICES_VARIABLE}={path}: not a fit-price file of longdoc.bench.gpu_hours ({error})"
        ) from None


def fit_prices(notebook: str | None = None) -> dict[str, float]:
    """``price_key(fit) -> seconds`` from that fit to the end of its chain ({}: no price file); a file
    written for another notebook than ``notebook`` is refused."""
    path = os.environ.get(PRICES_VARIABLE, "").strip()
    if not path:
        return {}
    if not Path(path).is_file():
        raise ValueError(f"{PRICES_VARIABLE}={path}: no such file")
    written_for = _notebook_of(path, Path(path).stat().st_mtime)
    if notebook is not None and written_for not in (None, notebook):
        raise ValueError(f"{PRICES_VARIABLE}={path}: the prices of {written_for}, not of {notebook}")
    return _read_prices(path, Path(path).stat().st_mtime)


@functools.lru_cache(maxsize=4)
def _notebook_of(path: str, modified: float) -> str | None:
    try:
        return json.loads(Path(path).read_text()).get("notebook")
    except (OSError, ValueError, AttributeError) as error:
        raise ValueError(
            f"{PRICES_VARIABLE}={path}: not a fit-price file of longdoc.bench.gpu_hours ({error})"
        ) from None


def price_key(key: tuple) -> str:
    """How a fit's plan key (its cache determinants, as :meth:`Spec.fits` states them) names its price."""
    return repr(key)


class ChainGuard:
    """One chain's check, made when it is about to build its first artefact (and only then)."""

    def __init__(self, notebook: str):
        self.notebook = notebook
        self.started = False

    def check(self, key: tuple) -> None:
        if self.started:
            return
        ends = deadline()
        if ends is not None:
            left = ends - time.time()
            needs = fit_prices(self.notebook).get(price_key(key), 0.0)
            if needs > left or left <= 0:
                raise DeadlineReached(
                    f"{self.notebook}: the fit chain from {key!r} was not started: it is priced at {needs:,.0f} s "
                    f"to its end, and {max(left, 0):,.0f} s are left before {DEADLINE_VARIABLE}. What finished is "
                    "in the cache (python -m longdoc.experiments.cache export FILE takes its small files along)"
                )
        self.started = True
