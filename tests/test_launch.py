"""How a fitting's processes are launched: one node, or several meeting at a rendezvous (the fit itself over
two nodes: tests/experiments/families/test_matching_family.py)."""

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
