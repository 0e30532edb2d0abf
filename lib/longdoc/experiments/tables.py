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


def format_number(value: float) -> str:
    """How every table shows a number: a whole number without decimals (a count stored as a float is
    still a count), otherwise three significant digits (0.545, 0.720, 0.0523, 7.10e-05; 12.3; 1,235)."""
    if value != value:
        return "—"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    if abs(value) >= 999.5:  # what rounds to four digits or more: a plain number with separators
        return f"{value:,.0f}"
    return f"{value:#.3g}".rstrip(".")  # '#': trailing zeros stay (0.720, not 0.72)


P_COLUMN = "p"  # a comparison's two-sided p: the bootstrap's over queries, the t test's over document pairs
P_COLUMNS = (P_COLUMN, "p (bootstrap)")  # and the name of a bootstrap-only p (older records, per-document tables)
P_FLOOR = "< 0.0001"  # a bootstrap p of 0: none of the 10,000 resamples (verdicts.BOOTSTRAP_SAMPLES) fell on the far side of zero


def p_cells(markdown: str) -> str:
    """A pipe table's p column (:data:`P_COLUMNS`) with its zeros as :data:`P_FLOOR` (tables of records
    made before :func:`markdown_table` wrote them so are mended when the report shows them)."""
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        named = [c for c in P_COLUMNS if c in cells]
        if line.startswith("| ") and named:
            column = cells.index(named[0])
            for j in range(i + 2, len(lines)):
                row = lines[j].strip().strip("|").split(" | ")
                if not lines[j].startswith("| ") or len(row) != len(cells):
                    break
                if row[column].strip() in ("0", "0.0", "0.000"):
                    row[column] = P_FLOOR
                    lines[j] = "| " + " | ".join(c.strip() for c in row) + " |"
    return "\n".join(lines)


def use_display_format() -> None:
    """Notebook tables show numbers as :func:`format_number` does (pandas' display option)."""
    pd.set_option("display.float_format", format_number)


def markdown_table(frame: pd.DataFrame, index: bool = False) -> str:
    """A pipe table (no extra dependency); ``index`` adds the frame's index as the first column
    (headed by its name, or left blank: never pandas' "index" / "level_1")."""
    if index:
        names = [" " * i if name is None else name for i, name in enumerate(frame.index.names)]  # blank, distinct
        frame = frame.reset_index(names=names, allow_duplicates=True)
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    named = [c for c in P_COLUMNS if c in frame.columns]
    p_column = list(frame.columns).index(named[0]) if named else -1
    body = [
        "| " + " | ".join(P_FLOOR if i == p_column and v == 0 else _cell(v) for i, v in enumerate(row)) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body])


def _cell(value) -> str:
    if isinstance(value, float) and value == value:
        return format_number(value)
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return "—" if text == "nan" else text  # NaN: nothing reported
