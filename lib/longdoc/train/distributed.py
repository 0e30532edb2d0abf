"""Cross-device in-batch negatives: gather embeddings from every process, keeping the local gradient.

``torch.distributed.all_gather`` returns tensors without gradient; putting the local tensor back in
its slot lets gradients flow to this process's encoder. Every process gathers queries *and*
documents and computes the loss of the whole global batch, so the gradients of all processes sum to
the global batch's gradient; DDP averages them, so the loss is multiplied by the world size (tested
with two gloo processes against one big batch on one process).
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
