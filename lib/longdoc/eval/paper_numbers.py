"""The paper's own difference behind a claim, read from the numbers the claim quotes: what decides
whether a claim the interval cannot tell is "underpowered here" (:mod:`longdoc.experiments.verdicts`),
and what the claim cards and forest plots draw beside ours (:mod:`longdoc.analysis.claim_cards`)."""

from __future__ import annotations

import re


def paper_difference(paper: str) -> float | None:
    """The paper's own difference behind a claim, read from its quoted numbers ("0.329 vs 0.296";
    "Wiki65K: 0.9585 vs 0.9492; AAN104K: 0.8536 vs 0.8400"; NQ320k's percentages are divided by 100): the
    largest of its collections' differences, so a claim is called underpowered only when even the paper's
    largest effect is below what we could detect; None where no "a vs b" pair of decimals is quoted."""
    differences = []
    for part in str(paper or "").split(";"):
        before, vs, after = part.partition(" vs ")
        if not vs:
            continue
        left = re.findall(r"\d+\.\d+", before)
        right = re.findall(r"\d+\.\d+", re.split(r"[(;]", after)[0])
        if left and right:
            a, b = float(left[-1]), float(right[0])
            differences.append((a - b) / 100 if max(a, b) > 1 else a - b)
    return max(differences) if differences else None
