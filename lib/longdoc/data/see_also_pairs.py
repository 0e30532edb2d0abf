"""Document pairs from SEE ALSO links, built the way SMITH built Wiki65K from Wikipedia's outgoing links.

SMITH section 5.1.1 (after Jiang et al. 2019): the similarity of two documents is the Jaccard
similarity of their outgoing-link sets; pairs above a threshold are positives, the source is the
lexicographically smaller id, and for each positive one mismatched document is sampled from the
outgoing links of the pair (GWikiMatch README: "of one document in the pair"; SMITH says the
source's, which here leaves most positives without a negative) and paired with the source. Here a page's link set also
contains the page itself, so two pages that link each other and little else count as similar.
Pairs are split by source page, so no source appears in two splits.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass
from itertools import combinations

from longdoc.data.pairs import DocumentPair
from longdoc.data.splits import hashed_split

PAIR_SPLIT_SHARES = (("train", 80), ("dev", 10), ("test", 10))  # GWikiMatch's 8:1:1


@dataclass(frozen=True)
class PairThresholds:
    positive_min_jaccard: float = 0.5  # SMITH: "similarities greater than 0.5"; we take >= 0.5
    negative_max_jaccard: float = 0.1  # a sampled linked page counts as mismatched below this

    def as_dict(self) -> dict:
        return asdict(self)


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _seeded(*parts: str) -> random.Random:
    return random.Random(int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest(), 16))


def pair_split(source: str) -> str:
    return hashed_split(source, PAIR_SPLIT_SHARES, salt="pair-split")


def build_see_also_pairs(
    links: dict[str, set[str]], thresholds: PairThresholds = PairThresholds()
) -> tuple[dict[str, list[DocumentPair]], dict]:
    """Positive and negative pairs per split from ``doc id -> outgoing link ids``; returns pairs and counts."""
    link_sets = {doc: set(targets) | {doc} for doc, targets in links.items()}
    holders: dict[str, list[str]] = {}
    for doc, elements in link_sets.items():
        for element in elements:
            holders.setdefault(element, []).append(doc)
    candidates = {tuple(sorted(pair)) for docs in holders.values() for pair in combinations(sorted(docs), 2)}
    positives = sorted(
        (a, b) for a, b in candidates if jaccard(link_sets[a], link_sets[b]) >= thresholds.positive_min_jaccard
    )
    taken = set(positives)
    negatives = []
    unmatched = 0
    for source, target in positives:
        options = sorted(
            x for x in links[source] | links[target]
            if x not in (source, target)
            and tuple(sorted((source, x))) not in taken
            and jaccard(link_sets[source], link_sets[x]) < thresholds.negative_max_jaccard
        )
        if not options:
            unmatched += 1
            continue
        choice = _seeded(source, target).choice(options)
        taken.add(tuple(sorted((source, choice))))
        negatives.append((source, choice))
    pairs: dict[str, list[DocumentPair]] = {split: [] for split, _ in PAIR_SPLIT_SHARES}
    for label, group in ((1, positives), (0, negatives)):
        for source, target in group:
            pairs[pair_split(source)].append(DocumentPair(source, target, label))
    for split in pairs:
        pairs[split].sort(key=lambda p: (p.source, p.target))
    counts = {
        "documents_with_links": sum(bool(t) for t in links.values()),
        "mean_links_per_linked_document": round(
            sum(map(len, links.values())) / max(1, sum(bool(t) for t in links.values())), 3
        ),
        "positive_pairs": len(positives),
        "negative_pairs": len(negatives),
        "positives_without_negative": unmatched,
        "pairs_per_split": {s: {"positive": sum(p.label for p in v), "negative": sum(1 - p.label for p in v)} for s, v in pairs.items()},
    }
    return pairs, counts
