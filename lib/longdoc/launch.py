"""How a fitting's processes are launched from the notebook's kernel: ``n_devices`` processes on this node
(``torchrun --standalone``), or over ``LONGDOC_NODES`` nodes meeting at a c10d rendezvous (one ``srun`` of
one torchrun per node of a Slurm allocation; ``LONGDOC_LAUNCHER=local`` starts every node's launcher here,
as a test of the rendezvous). The job itself is :mod:`longdoc.experiments.families.worker`'s.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

NODES_VARIABLE = "LONGDOC_NODES"  # how many nodes a fit's processes span (default 1: torchrun --standalone)
LAUNCHER_VARIABLE = "LONGDOC_LAUNCHER"  # over several nodes: "srun" (inside a Slurm allocation) or "local"


def launch_commands(job_file: Path, n_devices: int, nodes: int = 1, launcher: str = "srun") -> list[list[str]]:
    """The launch of a job's ``n_devices`` processes: one ``torchrun --standalone`` on this node, or, over
    ``nodes`` nodes, ``n_devices / nodes`` processes per node meeting at a c10d rendezvous hosted where the
    kernel runs (its host, a free port): one ``srun`` of one torchrun per node of the Slurm allocation, or
    (``launcher='local'``) every node's torchrun started on this machine, as a test of the rendezvous. The
    job file and the build folder must be on a file system every node sees (the cache)."""
    worker = ["-m", "longdoc.experiments.families.worker", str(job_file)]
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    if nodes == 1:
        return [[*torchrun, "--standalone", f"--nproc_per_node={n_devices}", *worker]]
    if n_devices % nodes:
        raise ValueError(f"n_devices={n_devices} over {NODES_VARIABLE}={nodes} nodes: not the same count on each node")
    if launcher not in ("srun", "local"):
        raise ValueError(f"{LAUNCHER_VARIABLE}={launcher}: expected srun (a Slurm allocation) or local")
    host = "localhost" if launcher == "local" else socket.gethostname()
    rendezvous = [
        f"--nnodes={nodes}",
        f"--nproc_per_node={n_devices // nodes}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={host}:{_free_port()}",
        f"--rdzv_id={Path(job_file).parent.name}",
    ]
    if launcher == "local":
        return [[*torchrun, *rendezvous, *worker] for _ in range(nodes)]
    # one task per node holding the node's cores (Slurm 22.05+ no longer hands sbatch's --cpus-per-task to
    # srun), and a failed task ends the step rather than leaving its peers waiting at the rendezvous
    cores = [f"--cpus-per-task={os.environ['SLURM_CPUS_PER_TASK']}"] if os.environ.get("SLURM_CPUS_PER_TASK") else []
    srun = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", *cores]
    return [[*srun, *torchrun, *rendezvous, *worker]]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def launch_problem(devices_asked: int, environment: dict) -> tuple[int, str | None]:
    """The node count of ``LONGDOC_NODES`` and what is wrong with it, ``LONGDOC_LAUNCHER`` or ``n_devices``
    over them (found here, not at a fit's launch hours later)."""
    text = environment.get(NODES_VARIABLE) or "1"
    if not text.isdigit() or int(text) < 1:
        return 1, f"{NODES_VARIABLE}={text}: expected a whole number of nodes, 1 or more"
    nodes, launcher = int(text), environment.get(LAUNCHER_VARIABLE) or "srun"
    if nodes == 1:
        return 1, None
    if devices_asked % nodes:
        return nodes, f"n_devices={devices_asked} over {NODES_VARIABLE}={nodes} nodes: not the same count on each node"
    if launcher not in ("srun", "local"):
        return nodes, f"{LAUNCHER_VARIABLE}={launcher}: expected srun (a Slurm allocation) or local"
    if launcher == "srun" and not (shutil.which("srun") and environment.get("SLURM_JOB_ID")):
        return nodes, f"{NODES_VARIABLE}={nodes} launches with srun: run inside a Slurm allocation (sbatch or salloc)"
    return nodes, None


def _die_with_the_kernel() -> None:
    """In a launcher, before it runs: the kernel's death (an out-of-memory kill) sends it SIGTERM (Linux's
    PR_SET_PDEATHSIG), so no launcher trains on after the artefact's lock is released."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def run_launchers(commands: list[list[str]], logs: list[Path]) -> list[int]:
    """Run every launcher in a session of its own, the first one's output into the notebook (a thread) and
    the others' into ``logs``; when one fails the others are stopped, and on any exit of this function
    (an error, Ctrl-C) none is left running: the cache's lock is held only while its build runs."""
    running: list[subprocess.Popen] = []

    def stop(process: subprocess.Popen) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    with contextlib.ExitStack() as files:
        try:
            for i, command in enumerate(commands):
                out = subprocess.PIPE if i == 0 else files.enter_context(open(logs[i], "w"))
                running.append(
                    subprocess.Popen(
                        command,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        text=True,
                        bufsize=1,
                        start_new_session=True,
                        preexec_fn=_die_with_the_kernel,
                    )
                )
            echo = threading.Thread(target=_echo, args=(running[0].stdout,), daemon=True)
            echo.start()
            while any(process.poll() is None for process in running):
                if any(process.poll() for process in running):  # one failed: its peers would wait for it
                    for process in running:
                        stop(process)
                time.sleep(0.2)
            echo.join()
            return [process.returncode for process in running]
        finally:
            for process in running:
                stop(process)


def _echo(stream) -> None:
    for line in stream:  # into the notebook, not the kernel's terminal
        print(line, end="", flush=True)
