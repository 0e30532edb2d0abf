"""NCI's "document as query" (section 3.2, after DSI): a document's first 64 terms, and 10 groups of
64 consecutive terms drawn at random from the whole document, each taken as a query for it.

Terms are whitespace-separated words. The windows are drawn without repetition among the start
positions after the first (a document of at most 64 terms gives its whole text once); each
document's draw is seeded by the seed and the document's id, so the queries do not depend on the
order of the corpus. The released code drew 10 + ⌊(len − 3000)/3000⌋ spans per document; we follow
the paper's fixed 10.
"""

from __future__ import annotations

import hashlib
import random


def document_as_queries(doc_id: str, text: str, terms: int = 64, windows: int = 10, seed: int = 0) -> list[str]:
    """``[first `terms` terms, then up to `windows` random `terms`-term windows]`` of ``text``."""
    if terms < 1 or windows < 0:
        raise ValueError(f"terms must be >= 1 and windows >= 0, got terms={terms}, windows={windows}")
    words = text.split()
    if not words:
        return []
    queries = [" ".join(words[:terms])]
    starts = range(1, len(words) - terms + 1)  # window starts other than the document's first term
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()[:8], "big"))
    for start in sorted(rng.sample(starts, min(windows, len(starts)))):
        queries.append(" ".join(words[start : start + terms]))
    return queries
