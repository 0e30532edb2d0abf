"""The papers' reported numbers, kept as data in ``data/paper_results/`` (one CSV per paper or table
family), and the two ways a table uses them: one value (a claim's "paper" column) and the values beside
our rows."""

from __future__ import annotations

import functools

import pandas as pd

from longdoc.data.registry import REPO_ROOT

PAPER_RESULTS = REPO_ROOT / "data" / "paper_results"


@functools.cache
def _read(name: str) -> pd.DataFrame:
    path = PAPER_RESULTS / f"{name}.csv"
    if not path.exists():
        have = sorted(p.stem for p in PAPER_RESULTS.glob("*.csv"))
        raise FileNotFoundError(f"no paper results table {name!r} ({path}); have {have}")
    return pd.read_csv(path)


def paper_results(name: str, **where) -> pd.DataFrame:
    """The rows of ``data/paper_results/<name>.csv`` whose columns equal ``where`` (e.g.
    ``table="Table 1", dataset="NQ320k"``)."""
    rows = _read(name).copy()
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return rows


_RAISE = object()


def paper_value(name: str, measure: str = "MRR@100", default=_RAISE, **where) -> float:
    """One reported value: ``measure`` of the first row matching ``where``, e.g. ``paper_value("sedr",
    system="SeDR")`` or ``paper_value("nci", our_name="NCI", table="Table 3")``; a ``KeyError`` naming the
    file and the filter when no row matches, unless a ``default`` is given (NaN: "the paper does not
    report it")."""
    rows = paper_results(name, **where)
    if len(rows):
        return float(rows.iloc[0][measure])
    if default is _RAISE:
        raise KeyError(f"data/paper_results/{name}.csv has no row with {where}")
    return default


def paper_beside(
    names: dict[str, str],
    rows: pd.DataFrame,
    measures: list[str],
    unit: float = 1.0,
    label: str = "{measure}",
    keep_missing: bool = True,
) -> pd.DataFrame:
    """The reported ``measures`` for our rows: ``names`` maps our row name to its ``our_name`` in
    ``rows`` (a system's ``paper_name``); values divided by ``unit`` (100 for percentages), columns named
    by ``label``. Rows the paper does not report are NaN (``keep_missing``) or left out."""
    reported = rows.dropna(subset=["our_name"]).drop_duplicates("our_name").set_index("our_name")
    ours = [name for name, key in names.items() if keep_missing or key in reported.index]
    if not ours:
        return pd.DataFrame(dtype=float)
    return pd.DataFrame(
        {
            label.format(measure=m): [
                float(reported.loc[names[n], m]) / unit if names[n] in reported.index else float("nan") for n in ours
            ]
            for m in measures
        },
        index=ours,
        dtype=float,
    )


def paper_beside_by_collection(
    table: pd.DataFrame,
    names: dict[str, str],
    paper: str,
    paper_table: str,
    measures: dict[str, list[str]],
    unit: float = 1.0,
) -> pd.DataFrame:
    """``table`` with the paper's values as columns ``paper <measure> (<collection>)``: for each collection
    of ``measures`` (collection → measures), the rows of ``paper_table``; ``names`` maps each of
    ``table``'s rows, in order, to its ``our_name`` in the paper's rows."""
    out = table.copy()
    for dataset, wanted in measures.items():
        values = paper_beside(
            names,
            paper_results(paper, table=paper_table, dataset=dataset),
            wanted,
            unit,
            label=f"paper {{measure}} ({dataset})",
        )
        for column in values:
            out[column] = values[column].to_numpy()
    return out
