"""Deterministic hashed splits: the same key always lands in the same split, on any machine."""

from __future__ import annotations

import hashlib


def hashed_split(key: str, shares: tuple[tuple[str, int], ...], salt: str) -> str:
    """The split of ``key`` for integer percentage ``shares`` summing to 100 (e.g. train 60, dev 20, test 20)."""
    if sum(share for _, share in shares) != 100:
        raise ValueError(f"split shares must sum to 100: {shares}")
    bucket = int(hashlib.sha256(f"{salt}:{key}".encode()).hexdigest(), 16) % 100
    for split, share in shares:
        if bucket < share:
            return split
        bucket -= share
    raise AssertionError("unreachable")
