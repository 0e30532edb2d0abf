"""TREC run files: ``qid Q0 docid rank score tag``.

Written runs have strictly decreasing scores within a query, so any tool that re-sorts by score
(trec_eval does) sees exactly our ranking: tied scores are ordered as :func:`ranking` orders them
and nudged apart by the smallest representable step.
"""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path

from longdoc.data.errors import ASCII_INTEGER, ASCII_NUMBER, DataFormatError, check_id, id_problem, shown, text_lines
from longdoc.eval.metrics import Run, ranking
from longdoc.io import atomic_write

_FIELD_SEPARATOR = re.compile(r"[ \t]+")


def distinct_scores(scores: dict[str, float], depth: int | None = None) -> list[tuple[str, float]]:
    """Ranked ``(doc, score)`` with ties separated so that the scores strictly decrease."""
    ordered = ranking(scores)[:depth]
    out: list[tuple[str, float]] = []
    for doc in ordered:
        score = float(scores[doc])
        if out and score >= out[-1][1]:
            score = math.nextafter(out[-1][1], -math.inf)
        out.append((doc, score))
    return out


def check_run(run: Run) -> None:
    """Ids a run file can hold (the corpus's id rules: non-empty, no whitespace, NFC, nothing invisible) and
    finite scores, checked before writing."""
    for qid, scores in run.items():
        if not isinstance(qid, str) or id_problem(qid, "query id"):
            raise ValueError(f"query id {qid!r}: a run file needs ids by the corpus's rules ({_why(qid)})")
        for doc, score in scores.items():
            if not isinstance(doc, str) or id_problem(doc):
                raise ValueError(
                    f"query {qid!r}: document id {doc!r}: a run file needs ids by the corpus's rules ({_why(doc)})"
                )
            if isinstance(score, (str, bytes, bool)) or not isinstance(score, numbers.Real):
                raise ValueError(f"query {qid!r}, document {doc!r}: score {shown(score)} is not a number")
            if not math.isfinite(float(score)):
                raise ValueError(f"query {qid!r}, document {doc!r}: score {score!r} is not finite")


def _why(value) -> str:
    return id_problem(value) if isinstance(value, str) else f"got {type(value).__name__}"


def write_run(run: Run, path: str | Path, tag: str = "longdoc", depth: int | None = None) -> None:
    if any(c.isspace() for c in tag) or not tag:
        raise ValueError(f"tag={tag!r}: a run tag must be one word")
    check_run(run)
    with atomic_write(path) as handle:
        for qid in sorted(run):
            for rank, (doc, score) in enumerate(distinct_scores(run[qid], depth), start=1):
                handle.write(f"{qid} Q0 {doc} {rank} {score!r} {tag}\n")


def read_run(path: str | Path) -> Run:
    path = Path(path)
    run: Run = {}
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = _FIELD_SEPARATOR.split(line.strip(" \t"))  # spaces and tabs: a no-break space is inside an id
        if len(fields) != 6:
            raise DataFormatError(path, f"expected 6 fields 'qid Q0 docid rank score tag', found {len(fields)}", number)
        qid, _, doc, rank, score, _ = fields
        qid, doc = check_id(qid, path, number, "query id"), check_id(doc, path, number)
        if not ASCII_INTEGER.fullmatch(rank):
            raise DataFormatError(path, f"rank {shown(rank)} is not an integer", number)
        if not ASCII_NUMBER.fullmatch(score) and score.lower().lstrip("+-") not in ("nan", "inf", "infinity"):
            raise DataFormatError(path, f"score {shown(score)} is not a number (ASCII digits)", number)
        value = float(score)
        if not math.isfinite(value):
            raise DataFormatError(path, f"score {score!r} is not a finite number", number)
        if doc in run.setdefault(qid, {}):
            raise DataFormatError(path, f"document {shown(doc)} appears twice for query {shown(qid)}", number)
        run[qid][doc] = value
    return run
