"""Cross-device in-batch negatives: gather embeddings from every process, keeping the local gradient.

``torch.distributed.all_gather`` returns tensors without gradient; putting the local tensor back in
its slot lets gradients flow to this process's encoder. Every process gathers queries *and*
documents and computes the loss of the whole global batch, so the gradients of all processes sum to
the global batch's gradient; DDP averages them, so the loss is multiplied by the world size (tested
with two gloo processes against one big batch on one process). Token means (NCI's and the query
generator's cross-entropy) are weighted by each process's share of the global batch's tokens
(:func:`share_of_total`), so processes holding more tokens count for more, as in one big batch.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from longdoc.sharding import world_size


def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` from all processes along dim 0 (equal shapes required)."""
    if world_size() == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(world_size())]
    dist.all_gather(parts, tensor.contiguous())
    parts[dist.get_rank()] = tensor
    return torch.cat(parts, dim=0)


def gather_ids(tensor: torch.Tensor) -> torch.Tensor:
    """Gather integer bookkeeping tensors (no gradient)."""
    if world_size() == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts, dim=0)


def share_of_total(count: torch.Tensor) -> torch.Tensor:
    """``count`` summed over the processes, divided by their number: a process that divides its sum by
    this (its mean times ``count / share_of_total(count)``) gives, after DDP's averaging, the gradient of
    the global batch's mean, also when processes hold different numbers of tokens. One process: ``count``."""
    if world_size() == 1:
        return count
    total = count.detach().to(torch.float64).clone()
    dist.all_reduce(total)
    return (total / world_size()).to(count.dtype if count.is_floating_point() else torch.float32)


def token_mean(total: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """``total`` (a sum over this process's ``count`` tokens) over the processes' mean token count: after
    DDP's averaging, the gradient of the mean over every process's tokens; one process: ``total / count``
    (0 when there is no token). A collective: every process calls it, with or without tokens."""
    share = share_of_total(count)
    return total / torch.where(share > 0, share, torch.ones_like(share))


def mean_over_processes(values: torch.Tensor) -> torch.Tensor:
    """``values`` averaged over the processes (detached; one process: as they are): what a history logs,
    since a process's share-weighted token mean (:func:`token_mean`) averages to the global mean."""
    values = values.detach().to(torch.float64).clone()
    if world_size() == 1:
        return values
    dist.all_reduce(values)
    return values / world_size()


def pad_to_longest(tensor: torch.Tensor, dim: int, value) -> torch.Tensor:
    """``tensor`` padded with ``value`` along ``dim`` to the longest size any process has (so that it can
    be gathered: :func:`gather_with_grad` needs equal shapes)."""
    if world_size() == 1:
        return tensor
    longest = torch.tensor(tensor.shape[dim], device=tensor.device)
    dist.all_reduce(longest, op=dist.ReduceOp.MAX)
    missing = int(longest) - tensor.shape[dim]
    if not missing:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor, tensor.new_full(shape, value)], dim=dim)
