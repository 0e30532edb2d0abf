"""Deterministic hashed splits: the same key always lands in the same split, on any machine."""

from __future__ import annotations

import hashlib
from pathlib import Path


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


def in_share(key: str, fraction: float, salt: str = "") -> bool:
    """Whether ``key`` falls in a deterministic hash share of size ``fraction`` (0-1; in steps of 1/10,000)."""
    text = f"{salt}:{key}" if salt else key
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 10_000 < fraction * 10_000


def hold_out_dev(qrels: dict, fraction: float, seed: int, source: str = "train") -> dict:
    """``qrels`` with a seeded hash share ``fraction`` of the ``source`` split's queries moved to ``dev``
    (the selection split is then never a reported one); a dataset that already has ``dev`` is refused."""
    if not 0 < fraction < 1:
        raise ValueError(f"dev hold-out fraction must be in (0, 1), got {fraction}")
    if source not in qrels:
        raise ValueError(f"a dev hold-out needs a {source!r} split (the dataset has {sorted(qrels)})")
    if "dev" in qrels:
        raise ValueError("the dataset already has a 'dev' split: hold dev out of train, or give it, not both")
    salt = f"dev-{seed}"
    dev = {q: judged for q, judged in qrels[source].items() if in_share(q, fraction, salt)}
    kept = {q: judged for q, judged in qrels[source].items() if q not in dev}
    if not dev or not kept:
        raise ValueError(
            f"holding out {fraction} of {len(qrels[source])} {source} queries left {'dev' if not dev else source} empty"
        )
    return {**qrels, source: kept, "dev": dev}


TRAINING_SPLITS = {
    "train": "fine-tuning",
    "dev": "model selection (learning rate, steps, early stopping)",
    "test": "evaluation",
}


def require_splits(name: str, available, needed=("train", "dev", "test")) -> None:
    """Fail before any work when a dataset lacks a split the study needs, naming each missing split,
    what it is for, and how to carve it from the queries of an existing one."""
    missing = [split for split in needed if split not in available]
    if not missing:
        return
    uses = "; ".join(f"qrels/{split}.tsv ({TRAINING_SPLITS.get(split, 'needed')})" for split in missing)
    source = "test" if "test" in available else (sorted(available)[0] if available else None)
    carve = (
        f" A collection that ships only {source!r} judgements (most of BEIR) can have train and dev carved "
        f"from its queries, seeded: python -m longdoc.data.convert split --dir {name} --from {source} "
        f"--train 60 --dev 20 --seed 0 --out {name}-split"
        if source
        else ""
    )
    raise ValueError(
        f"dataset={name}: missing {uses}; it has {sorted(available)}. Every trained row needs train "
        f"and dev judgements, every table a test split.{carve}"
    )


def carve_splits(qrels: dict, source: str = "test", train: int = 60, dev: int = 20, seed: int = 0) -> dict:
    """``qrels`` with the queries of split ``source`` dealt into train / dev / ``source`` by a seeded hash of
    the query id (``train`` and ``dev`` percent; the rest stay in ``source``). Other splits are kept;
    a carved split that already exists is an error rather than a silent merge."""
    if source not in qrels:
        raise ValueError(f"--from {source}: no such split (the dataset has {sorted(qrels)})")
    if source in ("train", "dev"):
        raise ValueError(f"--from {source}: train and dev are what is carved; carve from a reported split (test)")
    if not (0 < train and 0 < dev and train + dev < 100):
        raise ValueError(f"--train {train} --dev {dev}: each must be > 0 and together < 100 (the rest stays {source})")
    clash = [split for split in ("train", "dev") if split in qrels and split != source]
    if clash:
        raise ValueError(f"the dataset already has {clash}: carve only from a collection that lacks them")
    shares = (("train", train), ("dev", dev), (source, 100 - train - dev))
    carved: dict = {split: {} for split in ("train", "dev", source)}
    for qid, judged in qrels[source].items():
        carved[hashed_split(qid, shares, salt=f"carve-{seed}")][qid] = judged
    empty = [split for split, judged in carved.items() if not judged]
    if empty:
        raise ValueError(
            f"carving {len(qrels[source])} {source} queries left {empty} empty: too few queries for "
            f"--train {train} --dev {dev}"
        )
    return {**{k: v for k, v in qrels.items() if k != source}, **carved}


def refuse_shared_queries(judged: dict[str, tuple[Path, dict[str, int]]]) -> None:
    """``judged``: per split, its judgements file and the line where each query is first judged. A query
    judged in two splits (train and test: a model trained or selected on a query it is scored on) is an
    error naming both files and lines: the later split's earliest such line."""
    from longdoc.data.errors import DataFormatError

    seen: dict[str, tuple[str, Path, int]] = {}
    for split, (path, lines) in judged.items():
        for qid, line in sorted(lines.items(), key=lambda item: item[1]):
            if qid in seen:
                other_split, other_path, other_line = seen[qid]
                raise DataFormatError(
                    path,
                    f"query {qid!r} is judged in split {split!r} and in split {other_split!r} ({other_path}, line "
                    f"{other_line}): a query belongs to one split (in two, a model would be trained or selected "
                    "on a query it is scored on)",
                    line,
                )
        for qid, line in lines.items():
            seen.setdefault(qid, (split, path, line))
