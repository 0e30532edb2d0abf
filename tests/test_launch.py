"""How a fitting's processes are launched: one node, or several meeting at a rendezvous (the fit itself over
two nodes: tests/experiments/families/test_matching_family.py)."""

from dataclasses import dataclass
from pathlib import Path

import pytest


def test_a_launch_over_several_nodes_is_one_srun_of_one_torchrun_per_node(tmp_path, monkeypatch):
    from longdoc.launch import launch_commands

    job = tmp_path / "abc.resume" / "job.json"
    (one,) = launch_commands(job, 8)
    assert "--standalone" in one and "--nproc_per_node=8" in one and one[-1] == str(job)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "32")
    (srun,) = launch_commands(job, 16, nodes=2, launcher="srun")
    assert srun[:6] == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=32",
    ]
    assert {"--nnodes=2", "--nproc_per_node=8", "--rdzv_backend=c10d", "--rdzv_id=abc.resume"} <= set(srun)
    assert any(part.startswith("--rdzv_endpoint=") for part in srun) and "--standalone" not in srun
    local = launch_commands(job, 2, nodes=2, launcher="local")
    assert len(local) == 2 and local[0] == local[1] and "--rdzv_endpoint=localhost:" in " ".join(local[0])
    with pytest.raises(ValueError, match="n_devices=6 over LONGDOC_NODES=4 nodes: not the same count on each node"):
        launch_commands(job, 6, nodes=4)
    with pytest.raises(ValueError, match="LONGDOC_LAUNCHER=mpirun: expected srun"):
        launch_commands(job, 4, nodes=2, launcher="mpirun")


def test_when_one_launcher_fails_the_others_are_stopped_and_none_outlives_the_launch(tmp_path):
    """A node whose launcher fails would leave its peer waiting at the rendezvous; a launch that ends (an
    error, Ctrl-C) leaves no launcher training on after the cache's lock is released."""
    import time

    from longdoc.launch import run_launchers

    marker = tmp_path / "still-running"
    waits = ["bash", "-c", f"sleep 30; touch {marker}"]
    fails = ["bash", "-c", "echo broken; exit 3"]
    started = time.monotonic()
    codes = run_launchers([waits, fails], [tmp_path / "0.log", tmp_path / "1.log"])
    assert codes[1] == 3 and codes[0] != 0 and time.monotonic() - started < 20
    assert (tmp_path / "1.log").read_text() == "broken\n"
    time.sleep(0.5)
    assert not marker.exists()


def test_an_outer_launch_is_read_from_torchrun_or_srun_and_not_in_a_fit_process(monkeypatch):
    """Every rank of ``torchrun --nnodes N ... --no-python ./run_all.sh`` or ``srun ./run_all.sh`` is a rank of
    an outer launch; sbatch's own script (no step variables) and a fit's process (its torchrun is the
    kernel's) are not; n_devices must be the launch's process count, and LONGDOC_NODES is refused beside it."""
    from longdoc.launch import launch_problem, outer_launch

    torchrun = {
        "TORCHELASTIC_RUN_ID": "t",
        "RANK": "3",
        "WORLD_SIZE": "16",
        "LOCAL_RANK": "3",
        "LOCAL_WORLD_SIZE": "8",
        "MASTER_ADDR": "gpu01",
        "MASTER_PORT": "29400",
    }
    outer = outer_launch(torchrun)
    assert (outer.rank, outer.world_size, outer.local_rank, outer.nodes, outer.host, outer.port) == (
        3,
        16,
        3,
        2,
        "gpu01",
        29400,
    )
    assert outer_launch({**torchrun, "LONGDOC_FIT_PROCESS": "1"}) is None
    assert outer_launch({**torchrun, "WORLD_SIZE": "1"}) is None  # one process: a run of its own
    batch_script = {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_NTASKS": "16", "SLURM_JOB_NODELIST": "gpu[03-04]"}
    assert outer_launch(batch_script) is None
    monkeypatch.setenv("PATH", "/nonexistent")  # no scontrol: the node list is read here
    srun = {
        **batch_script,
        "SLURM_PROCID": "9",
        "SLURM_LOCALID": "1",
        "SLURM_STEP_NUM_TASKS": "16",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_TASKS_PER_NODE": "8(x2)",
        "SLURM_STEP_NODELIST": "gpu[03-04,07]",
    }
    outer = outer_launch(srun)
    assert (outer.rank, outer.world_size, outer.local_rank, outer.local_world_size, outer.nodes) == (9, 16, 1, 8, 2)
    assert (outer.host, outer.port, outer.launcher) == ("gpu03", 20770, "srun")  # job 77, step 0
    assert outer_launch({**srun, "SLURM_STEP_ID": "1"}).port == 20771  # another step of the job: another port
    assert launch_problem(16, srun) == (2, None)
    assert "--set n_devices=16" in launch_problem(8, srun)[1]
    assert "leave it unset" in launch_problem(16, {**srun, "LONGDOC_NODES": "2"})[1]


@dataclass
class ProbeJob:
    """A fit's job stand-in for the launch tests: every rank adds its rank + 1 in its process group."""

    fail_on_rank: int = -1


def sum_of_ranks(job: ProbeJob, dataset, directory: Path, resume: Path) -> None:
    import torch
    import torch.distributed as dist

    if dist.get_rank() == job.fail_on_rank:
        raise RuntimeError(f"rank {job.fail_on_rank} fails, as asked")
    total = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(total)
    if dist.get_rank() == 0:
        (directory / "sum.txt").write_text(f"{int(total.item())} over {dist.get_world_size()}")


RANK_ZERO = """
import os, subprocess, sys
from pathlib import Path
from longdoc.experiments.families.worker import launch
from longdoc.launch import main, outer_launch
from tests.test_launch import ProbeJob

if outer_launch(os.environ).rank:
    sys.exit(main(["follow"]))  # what run_all.sh does on every rank but 0
directory = Path(sys.argv[1])
serving = subprocess.Popen([sys.executable, "-m", "longdoc.launch", "serve"]) if "SLURM_PROCID" in os.environ else None
for number, job in enumerate([ProbeJob(fail_on_rank=1), ProbeJob()]):  # as the fits of a notebook
    (directory / str(number)).mkdir()
    try:
        launch("tests.test_launch:sum_of_ranks", job, None, directory / str(number), directory / f"{number}.resume", 2)
    except RuntimeError as error:
        (directory / f"{number}.error").write_text(str(error))
main(["end"])  # run_all.sh's exit on rank 0
sys.exit(serving.wait() if serving else 0)
"""


def _two_ranks(tmp_path: Path, commands: list[list[str]], environments: list[dict]) -> list[str]:
    """Run the two ranks' commands to their end (at most 300 s); their outputs."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "rank0.py").write_text(RANK_ZERO)
    tasks = [
        subprocess.Popen(
            command,
            cwd=root,
            env={**environment, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)},  # the probe, for every process
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for command, environment in zip(commands, environments)
    ]
    try:
        logs = [task.communicate(timeout=300)[0] for task in tasks]
    finally:
        for task in tasks:
            task.kill()
    assert [task.returncode for task in tasks] == [0, 0], "\n---\n".join(logs)
    return logs


def _check_the_two_fits(tmp_path: Path, launcher: str, logs: list[str]) -> None:
    """The first fit failed on rank 1: stopped on both, reported by rank 0 naming every rank's exit code;
    the next fit ran in a group of both ranks."""
    error = (tmp_path / "0.error").read_text()
    assert f"fitting in the 2 ranks of the outer {launcher} launch failed (exit codes by rank [" in error
    assert not (tmp_path / "0" / "sum.txt").exists() and (tmp_path / "1" / "sum.txt").read_text() == "3 over 2"
    assert any("rank 1 fails, as asked" in log and "fit 2:" in log for log in logs)


@pytest.mark.slow
def test_under_torchrun_or_srun_rank_zero_posts_each_fit_and_rank_one_runs_its_process(tmp_path):
    """Each rank runs what run_all.sh runs: rank 0 launches two fits without spawning, rank 1 follows; a fit
    that fails on rank 1 is stopped and reported, the next one runs, and the end stops rank 1. First under
    two ``torchrun --nnodes 2`` launchers on this machine (gloo; the groups meet in torchrun's own store),
    then as two tasks of an srun step (its environment; rank 0 serves the store). One after the other: two
    launches at once would draw their free ports side by side."""
    import os
    import sys

    from longdoc.launch import _free_port

    endpoint = f"localhost:{_free_port()}"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1"]
    launcher += ["--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}", "--rdzv_id=outer"]
    (tmp_path / "torchrun").mkdir()
    command = [*launcher, str(tmp_path / "rank0.py"), str(tmp_path / "torchrun")]
    _check_the_two_fits(
        tmp_path / "torchrun", "torchrun", _two_ranks(tmp_path, [command, command], [dict(os.environ)] * 2)
    )

    step = {
        **os.environ,
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_STEP_TASKS_PER_NODE": "2",
        "SLURM_STEP_NODELIST": "localhost",
        "MASTER_ADDR": "localhost",
        "MASTER_PORT": str(_free_port()),
    }
    (tmp_path / "srun").mkdir()
    command = [sys.executable, str(tmp_path / "rank0.py"), str(tmp_path / "srun")]
    environments = [{**step, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)} for rank in (0, 1)]
    _check_the_two_fits(tmp_path / "srun", "srun", _two_ranks(tmp_path, [command, command], environments))


def test_rank_zero_stops_with_a_message_when_a_rank_never_follows(monkeypatch, tmp_path):
    """A rank whose run_all.sh stopped before following (a preflight problem on its node) would leave rank
    0's fit waiting in its group: rank 0 says which ranks are missing, and starts no fit."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    import longdoc.launch as launch
    from longdoc.launch import OuterLaunch, _free_port, run_joined

    port = _free_port()
    server = TCPStore("localhost", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    monkeypatch.setattr(launch, "FOLLOWER_WAIT_SECONDS", 1)
    outer = OuterLaunch(0, 3, 0, 1, 3, "localhost", port, "srun")
    outer.store().set("following/1", "1")  # rank 1 follows; rank 2 never came
    with pytest.raises(RuntimeError, match=r"ranks \[2\] of the outer srun launch did not start following"):
        run_joined(tmp_path / "job.json", outer)
    assert not server.check(["longdoc/job/1"])  # nothing was posted
