"""Every notebook's table (:class:`~longdoc.experiments.systems.Table`), from the paper modules that
define them: the one source the GPU-hour planner, the explorer's catalogue and the budget ladder read.
A new notebook adds its table to its paper module's ``TABLES``."""

from __future__ import annotations

from longdoc.experiments.papers import baselines, built_start, longtriever, nci, sedr, smith
from longdoc.experiments.systems import Headline, Table

PAPER_MODULES = (baselines, longtriever, sedr, smith, nci, built_start)


def _by_notebook() -> dict[str, Table]:
    tables: dict[str, Table] = {}
    for module in PAPER_MODULES:
        for table in module.TABLES:
            if table.notebook in tables:
                raise ValueError(f"two tables for notebook {table.notebook} ({module.__name__})")
            tables[table.notebook] = table
    return dict(sorted(tables.items()))  # run_all.sh's order: by notebook number


TABLES: dict[str, Table] = _by_notebook()
HEADLINES: tuple[Headline, ...] = tuple(t.headline for t in TABLES.values() if t.headline is not None)


def table(notebook: str) -> Table:
    """The table of ``notebook`` (its file name without ``.ipynb``); an unknown one is named."""
    if notebook not in TABLES:
        raise KeyError(f"no table for notebook {notebook!r}; tables: {sorted(TABLES)}")
    return TABLES[notebook]
