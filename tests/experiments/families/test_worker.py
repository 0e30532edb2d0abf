"""How a fitting's processes are launched: one node, or several meeting at a rendezvous (the fit itself over
two nodes: tests/experiments/families/test_matching_family.py)."""

import pytest


def test_a_launch_over_several_nodes_is_one_srun_of_one_torchrun_per_node(tmp_path):
    from longdoc.experiments.families.worker import launch_commands

    job = tmp_path / "abc.resume" / "job.json"
    (one,) = launch_commands(job, 8)
    assert "--standalone" in one and "--nproc_per_node=8" in one and one[-1] == str(job)
    (srun,) = launch_commands(job, 16, nodes=2, launcher="srun")
    assert srun[:4] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1"]
    assert {"--nnodes=2", "--nproc_per_node=8", "--rdzv_backend=c10d", "--rdzv_id=abc.resume"} <= set(srun)
    assert any(part.startswith("--rdzv_endpoint=") for part in srun) and "--standalone" not in srun
    local = launch_commands(job, 2, nodes=2, launcher="local")
    assert len(local) == 2 and local[0] == local[1] and "--rdzv_endpoint=localhost:" in " ".join(local[0])
    with pytest.raises(ValueError, match="n_devices=6 over LONGDOC_NODES=4 nodes: not the same count on each node"):
        launch_commands(job, 6, nodes=4)
    with pytest.raises(ValueError, match="LONGDOC_LAUNCHER=mpirun: expected srun"):
        launch_commands(job, 4, nodes=2, launcher="mpirun")
