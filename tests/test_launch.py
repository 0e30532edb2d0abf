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


DRIVER = """
import json, os, sys
from pathlib import Path
from longdoc.launch import main, outer_launch

outer = outer_launch(os.environ)
if outer is not None and outer.rank:
    sys.exit(main(["follow"]))  # what run_all.sh does on every rank but 0
from longdoc.data.matching import load_matching
from longdoc.experiments.families.matching import finetune_matcher
from longdoc.models.registry import encoder_class
from longdoc.train.loop import TrainConfig

backbone, data, out = sys.argv[1:4]
encoder = encoder_class("MatchBERT").config_class(backbone=backbone, segment_length=16, max_segments=1)
train = TrainConfig(steps=2, batch_size=2, hard_negatives=0, learning_rate=1e-3)
fit = finetune_matcher("MatchBERT", load_matching(data), encoder, train, progress=False, n_devices=2)
Path(out).write_text(json.dumps({"outputs": fit.outputs, "key": json.loads((fit.directory / "key.json").read_text())}))
if outer is not None:
    main(["end"])  # run_all.sh's exit on rank 0
"""


@pytest.mark.slow
def test_under_an_outer_two_node_torchrun_each_fit_runs_on_its_ranks_and_equals_the_kernels_own_launch(
    tiny_backbone, tmp_path
):
    """Two ``torchrun --nnodes 2`` launchers on this machine (gloo) each run a driver as run_all.sh runs the
    notebooks: rank 0 fits, rank 1 follows. The fit joins the launch's store instead of spawning, and gives
    the dev and test scores of the same fit launched by the kernel itself in two processes."""
    import json
    import os
    import subprocess
    import sys

    from tests.experiments.families.test_matching_family import _two_process_pairs

    from longdoc.launch import _free_port

    _two_process_pairs(tmp_path / "pairs")
    (tmp_path / "driver.py").write_text(DRIVER)
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "LONGDOC_CACHE": str(tmp_path / "outer-cache"),
    }
    endpoint = f"localhost:{_free_port()}"
    launchers = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d"]
            + [f"--rdzv_endpoint={endpoint}", "--rdzv_id=outer", str(tmp_path / "driver.py")]
            + [str(tiny_backbone), str(tmp_path / "pairs"), str(tmp_path / "outer.json")],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    logs = [launcher.communicate(timeout=600)[0] for launcher in launchers]
    assert [launcher.returncode for launcher in launchers] == [0, 0], "\n---\n".join(log[-3000:] for log in logs)
    assert any("[rank 1] fit 1:" in log for log in logs)  # the follower ran its process of the fit
    joined = json.loads((tmp_path / "outer.json").read_text())
    assert joined["key"]["processes"] == 2

    own = subprocess.run(  # a run of its own: the kernel launches torchrun --standalone itself
        [
            sys.executable,
            str(tmp_path / "driver.py"),
            str(tiny_backbone),
            str(tmp_path / "pairs"),
            str(tmp_path / "own.json"),
        ],
        env={**environment, "LONGDOC_CACHE": str(tmp_path / "own-cache")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert own.returncode == 0, own.stdout[-3000:] + own.stderr[-3000:]
    spawned = json.loads((tmp_path / "own.json").read_text())
    assert joined["outputs"] == spawned["outputs"]  # the dev-best checkpoint scores every pair alike
    assert {k: v for k, v in joined["key"].items() if k != "dataset"} == {
        k: v for k, v in spawned["key"].items() if k != "dataset"
    }


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


SRUN_RANK_ZERO = """
import subprocess, sys
from pathlib import Path
from longdoc.experiments.families.worker import launch
from longdoc.launch import main
from tests.test_launch import ProbeJob

directory = Path(sys.argv[1])
serving = subprocess.Popen([sys.executable, "-m", "longdoc.launch", "serve"])  # as run_all.sh does under srun
for number, job in enumerate([ProbeJob(), ProbeJob(fail_on_rank=1), ProbeJob()]):
    (directory / str(number)).mkdir()
    try:
        launch("tests.test_launch:sum_of_ranks", job, None, directory / str(number), directory / f"{number}.resume", 2)
    except RuntimeError as error:
        (directory / f"{number}.error").write_text(str(error))
main(["end"])
sys.exit(serving.wait())
"""


@pytest.mark.slow
def test_under_srun_rank_zero_hosts_the_store_and_a_failing_rank_stops_its_fit_not_the_next(tmp_path):
    """Two tasks of an srun step (its environment, on this machine): rank 0 serves the store and launches
    three fits, rank 1 follows. Each fit's group sums the ranks; the second fails on rank 1, which stops
    rank 0's process of it and raises in rank 0 naming both exit codes; the third runs; the end stops rank 1."""
    import os
    import subprocess
    import sys

    from longdoc.launch import _free_port

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "rank0.py").write_text(SRUN_RANK_ZERO)
    step = {
        **os.environ,
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_STEP_TASKS_PER_NODE": "2",
        "SLURM_STEP_NODELIST": "localhost",
        "MASTER_ADDR": "localhost",
        "MASTER_PORT": str(_free_port()),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(root),  # the probe job and runner above, for rank 0's script and every fit's process
    }
    tasks = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "rank0.py"), str(tmp_path)]
            if rank == 0
            else [sys.executable, "-m", "longdoc.launch", "follow"],
            cwd=root,
            env={**step, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        logs = [task.communicate(timeout=300)[0] for task in tasks]
    finally:
        for task in tasks:
            task.kill()
    assert [task.returncode for task in tasks] == [0, 0], "\n---\n".join(logs)
    assert (tmp_path / "0" / "sum.txt").read_text() == "3 over 2" == (tmp_path / "2" / "sum.txt").read_text()
    error = (tmp_path / "1.error").read_text()
    assert "outer srun launch failed" in error and "[" in error and not (tmp_path / "1" / "sum.txt").exists()
    assert "rank 1 fails, as asked" in logs[1] and "[rank 1] fit 3:" in logs[1]


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
