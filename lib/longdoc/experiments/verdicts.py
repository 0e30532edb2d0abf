"""Findings computed from the numbers: each paper claim gets a verdict from our interval.

A :class:`Claim` says "``system`` beats ``against``" (on a measure), as the paper reports. Its verdict
comes from the 95% interval of our difference over items (queries by bootstrap; document pairs, which
share documents, with a dyadic-robust standard error) and seeds (:meth:`Study.compare`):

- **holds**: the interval lies above zero;
- **reversed**: the interval lies below zero;
- **not shown at this scale**: the interval includes zero (our runs cannot tell the two apart);
- a claim of *no* difference ("C = 100 performs near C = 50") names a ``margin``: it **holds** when the
  interval lies inside ±margin, is **reversed** when it lies wholly beyond the margin, and is **not
  shown at this scale** otherwise (an interval wider than the margin cannot show equivalence);
- **underpowered here**: the interval includes zero and the paper's own difference is below our minimum
  detectable difference at 80% power (:data:`MDD`): "not shown" was the expected outcome whatever the
  truth, so the comparison says nothing either way (a claim read off a figure has no paper Δ, so it
  cannot be: its paper column says :data:`FIGURE_ONLY`);
- **not testable at this scale**: a stated precondition failed (e.g. the pre-training claims' rows start
  from a contrastive sentence encoder, not the MLM-trained or random start the paper assumes), so the
  comparison cannot speak to the claim.

No sentence here is written by hand after the fact: the notebook's last cell and the results report
show exactly what :func:`assess` computed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from longdoc.eval.paper_numbers import paper_difference
from longdoc.experiments.tables import P_COLUMN, P_FLOOR, format_number, markdown_table

HOLDS, REVERSED, NOT_SHOWN, NOT_TESTABLE = "holds", "reversed", "not shown at this scale", "not testable at this scale"
UNDERPOWERED = "underpowered here"
VERDICTS = (HOLDS, NOT_SHOWN, UNDERPOWERED, REVERSED, NOT_TESTABLE)  # every verdict, in the order tables count them
MDD = "MDD (80% power)"  # the findings column of the minimum detectable difference
INTERVAL = "ours: Δ [95% CI]"  # the findings column of a claim's difference and its interval
FIGURE_ONLY = "(plotted without values: no paper Δ)"  # a claim read off a figure cannot be "underpowered here"
COMPARED = ("system", "against")  # the rows a claim compares: in the record (recomputed from it), not shown
HIDDEN = (*COMPARED, "margin")  # in the record (what recomputes a verdict), not in the shown table
# a claim's fields in the order :func:`assess` writes them (a record keeps them in key order)
FINDINGS_COLUMNS = ("claim", "paper", "measure", *HIDDEN, INTERVAL, P_COLUMN, MDD, "verdict", "condition")


@dataclass(frozen=True)
class Precondition:
    """What must be true for a comparison to test a claim, and whether it is."""

    holds: bool
    what: str  # e.g. "every pre-training loss fell by 10% (MLM −19%, SP −29%)"
    routine: bool = False  # a check every system passes when sound (above chance): shown only when it fails
    diagnostic: bool = False  # a measurement shown beside the verdict that never gates it (the start probe)


@dataclass(frozen=True)
class Claim:
    statement: str  # the paper's claim, in a few words
    system: str  # the system the paper finds better ...
    against: str  # ... than this one
    paper: str = ""  # the paper's numbers behind it
    measure: str = "MRR@100"
    precondition: Precondition | None = None
    margin: float | None = None  # set: the claim is that the two are within ±margin of each other
    pretraining: bool = False  # a claim about pre-training: its rows need the start the paper assumes


def claim_builder(build: Callable[..., list[Claim]]) -> Callable[..., list[Claim]]:
    """Marks a paper module's function that only words its claims (statements, compared rows, the paper's
    numbers): its source is left out of the artefacts' key and hashed into the verdicts' fingerprint
    (:func:`longdoc.experiments.cache.split_source`), so rewording a claim keeps every cached fit and
    marks the records it worded stale. Its own code builds no row, runs no model, times nothing and makes
    no cached artefact (``tests/test_architecture.py``); what it calls (a table's rows, the generated-query
    check) stays in the code fingerprint, and where a table runs two seeds for its claimed rows
    (``seeds="claimed"``) the builder decides which fits exist, never what a fit is. What it returns is
    checked to be claims."""

    @functools.wraps(build)
    def checked(*args, **kwargs) -> list[Claim]:
        claims = build(*args, **kwargs)
        strays = [type(c).__name__ for c in claims if not isinstance(c, Claim)]
        if strays:
            raise TypeError(f"{build.__qualname__}: a claim builder returned {strays}, not claims")
        return claims

    return checked


def claims_comparing(claims: list[Claim], pairs: set[tuple[str, str]]) -> list[Claim]:
    """The claims comparing ``pairs`` (system, against); a pair without its claim is an error, so a
    renamed row cannot drop a comparison silently (the budget ladder's headline claims)."""
    found = [c for c in claims if (c.system, c.against) in pairs]
    missing = sorted(pairs - {(c.system, c.against) for c in found})
    if missing:
        raise ValueError(f"no claim compares {missing} (claims: {[(c.system, c.against) for c in claims]})")
    return found


def verdict(
    low: float,
    high: float,
    precondition: Precondition | None = None,
    margin: float | None = None,
    detectable: float | None = None,
    paper_delta: float | None = None,
) -> str:
    """The verdict of an interval [low, high] (module docstring); ``detectable``: the comparison's minimum
    detectable difference, ``paper_delta``: the paper's own (an interval across zero is "underpowered here"
    when 0 < paper_delta < detectable)."""
    if precondition is not None and not precondition.holds:
        return NOT_TESTABLE
    if margin is not None:
        if -margin < low and high < margin:
            return HOLDS
        return REVERSED if low > margin or high < -margin else NOT_SHOWN
    if low > 0:
        return HOLDS
    if high < 0:
        return REVERSED
    if detectable is not None and paper_delta is not None and 0 < paper_delta < detectable:
        return UNDERPOWERED
    return NOT_SHOWN


def interval_text(delta: float, low: float, high: float) -> str:
    """Δ and its interval to three significant digits, so an interval that touches zero shows it ("—":
    not computed)."""
    if any(value != value for value in (delta, low, high)):
        return "—"
    return f"{_signed(delta)} [{_signed(low)}, {_signed(high)}]"


def _signed(value: float) -> str:
    """Three significant digits with a sign, trailing zeros kept (-0.140, not -0.14)."""
    return f"{value:+#.3g}".rstrip(".")


def enough_runs(study, claim: Claim) -> Precondition | None:
    """A trained system compared on one run gets no verdict: its interval would cover the items only,
    not the seed-to-seed spread (a deterministic system, BM25, has no seeds and needs none)."""
    single = [
        name
        for name in (claim.system, claim.against)
        if study.results[name].seeds not in ([None],) and len(study.results[name].seeds) < 2
    ]
    if not single:
        return None
    return Precondition(False, f"one seed of {', '.join(single)}: a trained system needs two runs or more")


# why a claim that compares pre-training carries no "decided at the start?" flag (the report says it)
NO_FLAG_FOR_PRETRAINING = (
    "a claim that compares pre-training carries no such flag: pre-training is what makes its rows' starts "
    "differ, so their gap is the claim's treatment, not a confound (its start is held to the one the paper "
    "assumes instead)"
)


def decided_at_start(start_delta: float | None, paper_delta: float | None, our_delta: float) -> Precondition | None:
    """A flag, never a gate: the two rows' starts differ on the dev probe by more than the paper's own
    difference, and in favour of the row that ends ahead (``our_delta``'s sign), so the comparison may
    measure where the rows began rather than what the claim names; a start gap the final order reverses
    was overcome, not inherited, and carries no flag. The probe's accuracy (in-batch for retrieval, at
    the dev-best threshold for matching) is not the claim's measure for retrieval (MRR@100): the flag
    reads the two on one scale, as a warning, not a test."""
    if start_delta is None or paper_delta is None or abs(start_delta) <= abs(paper_delta):
        return None
    if not start_delta * our_delta > 0:
        return None
    return Precondition(
        True,
        f"DECIDED AT THE START? the starts differ by {start_delta:+.3f} on the dev probe's accuracy, more than "
        f"the paper's Δ {paper_delta:+.3f}, in favour of the row that ends ahead",
        diagnostic=True,
    )


def first_failed(conditions: list[Precondition | None]) -> Precondition | None:
    """The first unmet condition (None: every condition holds, or there is none)."""
    return next((c for c in conditions if c is not None and not c.holds), None)


def condition_text(conditions: list[Precondition | None]) -> str:
    """Each condition with its own status ("met: …; NOT met: …"), so a reader sees which part failed;
    a routine condition that holds is left out."""
    return "; ".join(
        f"{'diagnostic' if c.diagnostic else 'met' if c.holds else 'NOT met'}: {c.what}"
        for c in conditions
        if c is not None and not (c.holds and c.routine)
    )


def assess(study, claims: list[Claim]) -> pd.DataFrame:
    """One row per claim: the paper's numbers, our Δ with its 95% interval and p-value (a bootstrap over
    queries, a t test over document pairs with a dyadic-robust SE), the minimum difference detectable at 80% power, and the verdict. A claim is not testable
    when any of its conditions fails: its own precondition, each compared system's
    (:meth:`Study.preconditions`: pre-training's losses fell, above chance, at its dev plateau), a
    pre-training claim's start (:meth:`Study.start_conditions`) and enough runs (a trained system with
    one seed); the condition column lists them all, with the start probes as diagnostics."""
    rows = []
    for claim in claims:
        stats = study.compare([(claim.system, claim.against)], claim.measure).iloc[0]
        conditions = [
            claim.precondition,
            *study.preconditions(claim.system, claim.measure),
            *study.preconditions(claim.against, claim.measure),
            *study.start_conditions(claim),
            enough_runs(study, claim),
        ]
        failed, paper_delta = first_failed(conditions), paper_difference(claim.paper)
        if not study.compares_pretraining(claim):  # :data:`NO_FLAG_FOR_PRETRAINING`
            conditions.append(decided_at_start(study.start_difference(claim), paper_delta, stats["Δ"]))
        low, high = stats["95% CI low"], stats["95% CI high"]
        values = (
            claim.statement,
            claim.paper,
            claim.measure,
            claim.system,
            claim.against,
            claim.margin,
            interval_text(stats["Δ"], low, high),
            float(f"{float(stats[P_COLUMN]):.3g}"),
            float(f"{float(stats[MDD]):.3g}"),
            verdict(low, high, failed, claim.margin, stats[MDD], paper_delta),
            condition_text(conditions),
        )
        rows.append(dict(zip(FINDINGS_COLUMNS, values, strict=True)))
    return pd.DataFrame(rows, columns=list(FINDINGS_COLUMNS))


def p_text(p) -> str:
    """A p value as shown (a bootstrap's over queries, a t test's over pairs): a bootstrap's 0 means no
    resample fell on the far side, i.e. p < 1/10,000."""
    if p is None or p != p:
        return "—"
    return P_FLOOR if float(p) == 0 else format_number(float(p))


BOOTSTRAP_SAMPLES = 10_000  # the resamples of every interval (:func:`~longdoc.eval.significance.seed_query_bootstrap`)

CHANCE = 0.025  # a 95% two-sided interval lies above zero by chance in 2.5% of tests of a true null


def chance_line(table: pd.DataFrame) -> str:
    """How many "holds" (and "reversed") the interval tests of a table would give by chance alone: the
    claims with a verdict whose Δ has a 95% interval (a measured ratio, as in a benchmark, is no such test)."""
    if "verdict" not in table or INTERVAL not in table:
        return ""
    has_interval = table[INTERVAL].astype(str).str.contains("[", regex=False)
    tested = int(((table["verdict"] != NOT_TESTABLE) & has_interval).sum())
    if not tested:
        return ""
    return (
        f"{tested} claim(s) tested by a 95% interval, with no correction for multiple comparisons: about "
        f"{tested * CHANCE:.2g} would hold, and as many be reversed, by chance alone."
    )


class Findings:
    """The verdict table, shown as Markdown in a notebook's last cell and kept in its record."""

    def __init__(self, table: pd.DataFrame, context: str = ""):
        self.table = table
        self.context = context

    def counts(self) -> dict[str, int]:
        return self.table["verdict"].value_counts().to_dict() if len(self.table) else {}

    def markdown(self) -> str:
        lines = [self.context] if self.context else []
        if len(self.table):
            counts = ", ".join(f"{n} {v}" for v, n in self.counts().items())
            lines.append(f"**{len(self.table)} claim(s) of the paper: {counts}.**\n")
            chance = chance_line(self.table)
            if chance:
                lines.append(chance + "\n")
            lines.append(markdown_table(self.shown_table()))
        return "\n".join(lines)

    def shown_table(self) -> pd.DataFrame:
        """The verdict table without a column that is empty in every row (no claim has a condition)."""
        empty = [
            c
            for c in self.table.columns
            if self.table[c].map(lambda v: v is None or str(v).strip() in ("", "nan")).all()
        ]
        shown = self.table.drop(columns=empty + [c for c in HIDDEN if c in self.table])
        if P_COLUMN in shown:  # no resample on the far side of zero: p is below one in the resamples
            shown = shown.assign(**{P_COLUMN: shown[P_COLUMN].map(p_text)})
        return shown

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return self.markdown()

    def as_record(self) -> dict:
        return {"context": self.context, "claims": self.table.to_dict(orient="records")}
