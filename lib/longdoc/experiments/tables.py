"""How the study's numbers are shown: ``mean ± sd`` per measure, Markdown pipe tables, the reading of
an interval."""

from __future__ import annotations

import pandas as pd


def summary_table(table: pd.DataFrame, measures: list[str] | None = None, digits: int = 3) -> pd.DataFrame:
    """``mean ± sd`` strings per measure of :meth:`Study.table` (every measure it holds, or ``measures``;
    a seed count of 0 marks a deterministic system)."""
    measures = measures or [c for c in table.columns if f"{c} sd" in table.columns]
    out = pd.DataFrame(index=table.index)
    for m in measures:
        out[m] = [
            f"{row[m]:.{digits}f}" + (f" ± {row[f'{m} sd']:.{digits}f}" if row["seeds"] > 1 else "")
            for _, row in table.iterrows()
        ]
    out["seeds"] = table["seeds"].map(lambda n: str(n) if n else "—")
    return out


def difference_label(low: float, high: float) -> str:
    if low > 0:
        return "higher"
    if high < 0:
        return "lower"
    return "no difference (interval includes 0)"


def markdown_table(frame: pd.DataFrame, index: bool = False) -> str:
    """A pipe table (no extra dependency); ``index`` adds the frame's index as the first column."""
    frame = frame.reset_index() if index else frame
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def _cell(value) -> str:
    if isinstance(value, float) and value == value:
        return f"{value:.3f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.1e}"
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return "—" if text == "nan" else text  # NaN: nothing reported
