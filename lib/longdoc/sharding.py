"""Work shared by several processes (``torchrun`` / ``accelerate launch``) and gathered back in order:
corpus and query encoding, hence every dense run and every round of mining negatives. One process
does all the work itself; N processes give the same arrays, in the same order (tested with 2 gloo
processes)."""

from __future__ import annotations

import torch.distributed as dist


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if world_size() > 1 else 0


def my_share(items: list) -> list[tuple[int, object]]:
    """``(position, item)`` of this process's share of ``items`` (round robin: batches of similar cost
    spread evenly); with one process, all of them."""
    return [(i, item) for i, item in enumerate(items) if i % world_size() == rank()]


def gather_in_order(parts: list[tuple[int, object]], everyone: bool = True) -> list | None:
    """Every process's ``(position, value)`` pairs, gathered and put back in position order: the list
    one process would have made alone. ``everyone=False`` gathers to the first process only (the
    others get None): a corpus' vectors then exist once, not once per process."""
    if world_size() == 1:
        return [value for _, value in sorted(parts, key=lambda p: p[0])]
    gathered: list | None = [None] * world_size() if everyone or rank() == 0 else None
    if everyone:
        dist.all_gather_object(gathered, parts)
    else:
        dist.gather_object(parts, gathered, dst=0)
    if gathered is None:
        return None
    return [value for _, value in sorted((p for share in gathered for p in share), key=lambda p: p[0])]


def from_first(value):
    """The first process's ``value``, on every process."""
    if world_size() == 1:
        return value
    holder = [value]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]
