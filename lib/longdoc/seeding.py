"""Seeded construction: new parameters drawn from a generator that depends on a seed only.

Models create parameters when they are built (PARADE's aggregation layers, LMAE's prediction head,
Hi-Transformer's block positions); drawn from the global generator, they would depend on how much
random work happened before in the process (a notebook's earlier cells, a cache hit or miss). Built
inside :func:`seeded`, they depend on the seed alone, and the global generator is left as it was.
"""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def seeded(seed: int):
    """Run the block with torch's generators (CPU, and every CUDA device's, which ``manual_seed`` also sets)
    at ``seed``; restore their previous states after."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
