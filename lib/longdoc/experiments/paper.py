"""The papers' reported numbers, kept as data in ``data/paper_results/`` (one CSV per table family)."""

from __future__ import annotations

import pandas as pd

from longdoc.data.registry import REPO_ROOT

PAPER_RESULTS = REPO_ROOT / "data" / "paper_results"


def paper_results(name: str) -> pd.DataFrame:
    path = PAPER_RESULTS / f"{name}.csv"
    if not path.exists():
        raise FileNotFoundError(f"no paper results table {name!r} ({path}); have {sorted(p.stem for p in PAPER_RESULTS.glob('*.csv'))}")
    return pd.read_csv(path)
