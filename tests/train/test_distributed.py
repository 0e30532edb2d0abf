"""Two CPU processes with the gloo backend: gathered in-batch negatives give the single-process gradient."""

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from longdoc.distributed import gather_with_grad
from longdoc.losses import contrastive_loss
from longdoc.models.biencoder import maxp_scores

DIM, BATCH = 6, 4


def data():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(DIM, DIM, generator=generator)
    return weight, torch.randn(BATCH, DIM, generator=generator), torch.randn(BATCH, DIM, generator=generator)


def worker(rank, world, init_file, out_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    weight, queries, docs = data()
    weight.requires_grad_(True)
    local = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    q, d = queries[local] @ weight, docs[local] @ weight
    scores = gather_with_grad(q) @ gather_with_grad(d).T  # every query of every process
    loss = contrastive_loss(scores, torch.arange(BATCH)) * world
    loss.backward()
    dist.all_reduce(weight.grad)  # what DDP does, then divides by the world size
    weight.grad /= world
    if rank == 0:
        torch.save(weight.grad, out_file)
    dist.barrier()  # both done before the group is torn down
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_processes_match_one_big_batch(tmp_path):
    mp.spawn(worker, args=(2, str(tmp_path / "init"), str(tmp_path / "grad.pt")), nprocs=2, join=True)
    distributed_grad = torch.load(tmp_path / "grad.pt")
    weight, queries, docs = data()
    weight.requires_grad_(True)
    loss = F.cross_entropy((queries @ weight) @ (docs @ weight).T, torch.arange(BATCH))
    loss.backward()
    torch.testing.assert_close(distributed_grad, weight.grad, rtol=1e-5, atol=1e-6)


def cache_worker(rank, world, init_file, out_file):
    """Two steps with the late cache over gathered tensors; the second step's gradient is saved."""
    from longdoc.losses.late_cache import LateCacheNegatives

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.save(
        two_cached_steps(rank, world, LateCacheNegatives(BATCH, lambda q: set(), maxp_scores)), f"{out_file}.{rank}"
    )
    dist.barrier()  # both done before the group is torn down
    dist.destroy_process_group()


def two_cached_steps(rank, world, late):
    weight = data()[0].clone().requires_grad_(True)
    generator = torch.Generator().manual_seed(1)
    for step in range(2):
        queries, docs = torch.randn(BATCH, DIM, generator=generator), torch.randn(BATCH, 2, DIM, generator=generator)
        local = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
        q, d = queries[local] @ weight, docs[local] @ weight
        if world > 1:
            q, d = gather_with_grad(q), gather_with_grad(d)
        ids = [f"s{step}q{i}" for i in range(BATCH)]
        loss = (
            late(
                q,
                d,
                torch.ones(BATCH, 2, dtype=torch.bool),
                torch.arange(BATCH),
                ids,
                torch.arange(BATCH) + step * BATCH,
                torch.arange(BATCH),
            )
            * world
        )
        weight.grad = None
        loss.backward()
    if world > 1:
        dist.all_reduce(weight.grad)
        weight.grad /= world
    return {"grad": weight.grad, "cached": late.query_ids, "queries": late.queries}


@pytest.mark.slow
def test_under_two_processes_the_late_cache_holds_the_gathered_batch(tmp_path):
    from longdoc.losses.late_cache import LateCacheNegatives

    mp.spawn(cache_worker, args=(2, str(tmp_path / "init"), str(tmp_path / "out")), nprocs=2, join=True)
    first, second = (torch.load(tmp_path / f"out.{r}") for r in (0, 1))
    single = two_cached_steps(0, 1, LateCacheNegatives(BATCH, lambda q: set(), maxp_scores))
    assert first["cached"] == second["cached"] == single["cached"] == [f"s1q{i}" for i in range(BATCH)]
    torch.testing.assert_close(first["queries"], single["queries"])
    torch.testing.assert_close(first["grad"], single["grad"], rtol=1e-5, atol=1e-6)
