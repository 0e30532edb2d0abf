"""Document pairs from SEE ALSO links, built the way SMITH built Wiki65K from Wikipedia's outgoing links.

SMITH section 5.1.1 (after Jiang et al. 2019): the similarity of two documents is the Jaccard
similarity of their outgoing-link sets; pairs above a threshold are positives, the source is the
lexicographically smaller id, and for each positive one mismatched document is sampled from the
outgoing links and paired with the source. Here a page's link set also contains the page itself, so
two pages that link each other and little else count as similar.

Every positive gets exactly one negative, so the sets are balanced. A mismatched page (Jaccard with the
source below ``negative_max_jaccard``, never a positive partner, never a pair already taken) is drawn
from the first of these tiers that has one, and the tier is counted:

1. ``source links``: the source's own outgoing links (SMITH's description);
2. ``pair links``: the outgoing links of either page of the pair (GWikiMatch's README);
3. ``two links away``: pages linked from the pair's links (our extension: the SEE ALSO graph is small);
4. ``random page``: any page of the corpus (AAN104K's negatives are random papers).

Pairs are split by source page (40/30/30 here, so that dev and test hold several hundred pairs each;
GWikiMatch uses 8:1:1 on a far larger graph), so no source appears in two splits; a target may.
The outgoing links themselves are kept per split too (``links/<split>.tsv``): document-to-document
ranking asks each source page of a split to retrieve the pages it links to.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path

from longdoc.data.pairs import DocumentPair
from longdoc.data.splits import hashed_split
from longdoc.io import atomic_write

PAIR_SPLIT_SHARES = (("train", 40), ("dev", 30), ("test", 30))
NEGATIVE_TIERS = ("source links", "pair links", "two links away", "random page")


@dataclass(frozen=True)
class PairThresholds:
    positive_min_jaccard: float = 0.5  # SMITH: "similarities greater than 0.5"; we take >= 0.5
    negative_max_jaccard: float = 0.1  # a sampled page counts as mismatched below this

    def as_dict(self) -> dict:
        return asdict(self)


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _seeded(*parts: str) -> random.Random:
    return random.Random(int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest(), 16))


def pair_split(source: str) -> str:
    return hashed_split(source, PAIR_SPLIT_SHARES, salt="pair-split")


def _negative_tiers(links: dict[str, set[str]], source: str, target: str) -> list[list[str]]:
    """Candidate pages of each tier of :data:`NEGATIVE_TIERS` (unfiltered)."""
    pair_links = links[source] | links[target]
    two_hops = set().union(*(links.get(x, set()) for x in pair_links)) if pair_links else set()
    return [sorted(links[source]), sorted(pair_links), sorted(two_hops), sorted(links)]


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
    negatives, tiers = [], {tier: 0 for tier in NEGATIVE_TIERS}
    unmatched = 0
    for source, target in positives:
        for tier, pool in zip(NEGATIVE_TIERS, _negative_tiers(links, source, target)):
            options = [
                x
                for x in pool
                if x not in (source, target)
                and tuple(sorted((source, x))) not in taken
                and jaccard(link_sets[source], link_sets[x]) < thresholds.negative_max_jaccard
            ]
            if options:
                choice = _seeded(source, target).choice(options)
                taken.add(tuple(sorted((source, choice))))
                negatives.append((source, choice))
                tiers[tier] += 1
                break
        else:
            unmatched += 1
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
        "negatives_per_tier": tiers,
        "positives_without_negative": unmatched,
        "pairs_per_split": {
            s: {
                "positive": sum(p.label for p in v),
                "negative": sum(1 - p.label for p in v),
                "sources": len({p.source for p in v}),
            }
            for s, v in pairs.items()
        },
    }
    return pairs, counts


LINK_HEADER = ("source-id", "target-id")


def save_links(links: dict[str, set[str]], directory: str | Path) -> dict[str, int]:
    """``links/<split>.tsv``: every page's outgoing links, the page in its pair split; returns the
    number of linking pages per split."""
    rows: dict[str, list[tuple[str, str]]] = {split: [] for split, _ in PAIR_SPLIT_SHARES}
    for source in sorted(links):
        rows[pair_split(source)].extend((source, target) for target in sorted(links[source]))
    for split, pairs in rows.items():
        with atomic_write(Path(directory) / "links" / f"{split}.tsv") as handle:
            handle.write("\t".join(LINK_HEADER) + "\n")
            handle.writelines(f"{s}\t{t}\n" for s, t in pairs)
    return {split: len({s for s, _ in pairs}) for split, pairs in rows.items()}
