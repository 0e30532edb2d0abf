"""How a fitting's processes are launched from the notebook's kernel: ``n_devices`` processes on this node
(``torchrun --standalone``), or over ``LONGDOC_NODES`` nodes meeting at a c10d rendezvous (one ``srun`` of
one torchrun per node of a Slurm allocation; ``LONGDOC_LAUNCHER=local`` starts every node's launcher here,
as a test of the rendezvous), or, in a run started under an outer launcher (``torchrun --nnodes N`` or
``srun``, every rank running run_all.sh), by the ranks of that launch: rank 0 runs the notebooks, the others
follow (:func:`follow`), and each fit joins the launch's store instead of spawning (:class:`OuterLaunch`).
The job itself is :mod:`longdoc.experiments.families.worker`'s.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

NODES_VARIABLE = "LONGDOC_NODES"  # how many nodes a fit's processes span (default 1: torchrun --standalone)
LAUNCHER_VARIABLE = "LONGDOC_LAUNCHER"  # over several nodes: "srun" (inside a Slurm allocation) or "local"
GROUP_VARIABLE = "LONGDOC_GROUP"  # in a fit's process of an outer launch: the job number its process group is named by
FIT_PROCESS_VARIABLE = "LONGDOC_FIT_PROCESS"  # set in every fit's process: it is no outer launch's rank


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
    """The node count of ``LONGDOC_NODES`` (or of the outer launch this is a rank of) and what is wrong with
    it, ``LONGDOC_LAUNCHER`` or ``n_devices`` over them (found here, not at a fit's launch hours later)."""
    outer = outer_launch(environment)
    if outer is not None:
        return outer.nodes, outer_problem(outer, devices_asked, environment)
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


# --- a run under an outer launcher: rank 0 runs the notebooks, every other rank follows its fits ---

END = "end"  # the job posted after rank 0's last notebook: the followers stop
STORE_PREFIX = "longdoc/"  # our keys in the launch's store (torchrun's agent keeps its own there)


@dataclass(frozen=True)
class OuterLaunch:
    """This process is one rank of an outer launch (``torchrun --nnodes N --nproc_per_node K --no-python
    ./run_all.sh ...``, or ``srun --ntasks-per-node K ./run_all.sh ...``): the ranks share one store at
    ``host:port`` (torchrun's agent hosts it; under srun rank 0's :func:`serve`), rank 0 posts each fit's job
    file there and every rank runs one process of it; the fit's processes are the launch's ranks."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    nodes: int
    host: str
    port: int
    launcher: str  # "torchrun" or "srun"

    def store(self, serve: bool = False):
        from torch.distributed import PrefixStore, TCPStore

        store = TCPStore(self.host, self.port, is_master=serve, wait_for_workers=False, timeout=timedelta(minutes=30))
        return PrefixStore(STORE_PREFIX, store)


def _first_host(node_list: str) -> str:
    """The first host of a Slurm node list (``gpu[03-04,07],cpu1`` gives gpu03), as ``scontrol show
    hostnames`` expands it where it is installed."""
    if shutil.which("scontrol"):
        shown = subprocess.run(["scontrol", "show", "hostnames", node_list], capture_output=True, text=True)
        if shown.returncode == 0 and shown.stdout.split():
            return shown.stdout.split()[0]
    found = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", node_list)
    if not found:
        raise ValueError(f"SLURM_STEP_NODELIST={node_list}: not a Slurm node list")
    prefix, ranges = found.groups()
    return prefix + ranges.split(",")[0].split("-")[0] if ranges else prefix


def _tasks_on_first_node(tasks_per_node: str) -> int:
    """``SLURM_STEP_TASKS_PER_NODE`` (``8(x2)``, ``2,1``): the tasks on the step's first node."""
    return int(re.match(r"\d+", tasks_per_node).group(0))


def outer_launch(environment) -> OuterLaunch | None:
    """The outer launch this process is a rank of (torchrun's or srun's environment), or None: a run of
    its own, or a fit's process (which carries ``LONGDOC_FIT_PROCESS``: its torchrun is the kernel's)."""
    if environment.get(FIT_PROCESS_VARIABLE):
        return None
    if environment.get("TORCHELASTIC_RUN_ID") and int(environment.get("WORLD_SIZE") or 1) > 1:
        world, local_world = int(environment["WORLD_SIZE"]), int(environment.get("LOCAL_WORLD_SIZE") or 1)
        return OuterLaunch(
            int(environment["RANK"]),
            world,
            int(environment.get("LOCAL_RANK") or 0),
            local_world,
            max(1, world // local_world),
            environment["MASTER_ADDR"],
            int(environment["MASTER_PORT"]),
            "torchrun",
        )
    tasks = environment.get("SLURM_STEP_NUM_TASKS")  # set in an srun step's tasks, not in sbatch's script
    if tasks and int(tasks) > 1 and "SLURM_PROCID" in environment:
        job, step = int(environment.get("SLURM_JOB_ID") or 0), int(environment.get("SLURM_STEP_ID") or 0)
        port = environment.get("MASTER_PORT") or str(20000 + (job % 2000) * 10 + step % 10)  # two steps: two ports
        return OuterLaunch(
            int(environment["SLURM_PROCID"]),
            int(tasks),
            int(environment.get("SLURM_LOCALID") or 0),
            _tasks_on_first_node(environment.get("SLURM_STEP_TASKS_PER_NODE") or tasks),
            int(environment.get("SLURM_STEP_NUM_NODES") or 1),
            environment.get("MASTER_ADDR") or _first_host(environment["SLURM_STEP_NODELIST"]),
            int(port),
            "srun",
        )
    return None


def outer_problem(outer: OuterLaunch, devices_asked: int, environment) -> str | None:
    """What stops a run under an outer launch before any work: fits of another process count than the
    launch's ranks, or ``LONGDOC_NODES`` as well (the kernel would launch over nodes itself)."""
    if int(environment.get(NODES_VARIABLE) or 1) > 1:
        return f"{NODES_VARIABLE} is for a kernel that launches its fits itself; under an outer {outer.launcher} launch leave it unset"
    if devices_asked != outer.world_size:
        return (
            f"n_devices={devices_asked} under an outer {outer.launcher} launch of {outer.world_size} processes: every "
            f"fit runs in the launch's processes, so --set n_devices={outer.world_size}"
        )
    return None


def _fit_process(job_file: str, outer: OuterLaunch, job: int, echo: bool) -> subprocess.Popen:
    import torch

    gpus = torch.cuda.device_count()  # a task of srun --gpus-per-task=1 sees its one GPU as cuda:0
    environment = {
        **os.environ,
        "RANK": str(outer.rank),
        "WORLD_SIZE": str(outer.world_size),
        "LOCAL_RANK": str(outer.local_rank % gpus if gpus else outer.local_rank),
        "MASTER_ADDR": outer.host,
        "MASTER_PORT": str(outer.port),
        GROUP_VARIABLE: str(job),
        FIT_PROCESS_VARIABLE: "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "longdoc.experiments.families.worker", job_file],
        env=environment,
        stdout=subprocess.PIPE if echo else None,
        stderr=subprocess.STDOUT if echo else None,
        text=True,
        bufsize=1,
        start_new_session=True,
        preexec_fn=_die_with_the_kernel,
    )


def _run_rank(store, job_file: str, outer: OuterLaunch, job: int, echo: bool) -> int:
    """This rank's process of job ``job``, stopped when another rank's fails (its peers would wait for it
    in the group); its exit code posted for rank 0."""
    process = _fit_process(job_file, outer, job, echo)
    printing = threading.Thread(target=_echo, args=(process.stdout,), daemon=True) if echo else None
    if printing:
        printing.start()
    finished = False
    try:
        while process.poll() is None:
            if store.check([f"abort/{job}"]):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
                process.wait()
            time.sleep(0.2)
        finished = True
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if not finished or process.returncode:  # stopped here (Ctrl-C, a kill) or failed: the peers stop too
            with contextlib.suppress(Exception):
                store.set(f"abort/{job}", str(outer.rank))
                store.set(f"done/{job}/{outer.rank}", str(process.returncode or -1))
    if printing:
        printing.join()
    store.set(f"done/{job}/{outer.rank}", str(process.returncode))
    return process.returncode


def _waited(store, key: str, poll: float = 0.5, seconds: float | None = None) -> str | None:
    """``key``'s value once it is set (polled: a follower may wait hours while rank 0 evaluates); None
    after ``seconds``."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while not store.check([key]):
        if deadline is not None and time.monotonic() > deadline:
            return None
        time.sleep(poll)
    return store.get(key).decode()


FOLLOWER_WAIT_SECONDS = 600  # rank 0 waits this long for a rank to join, or to answer after a fit
MISSING = 255  # the exit code reported for a rank that never answered


def run_joined(job_file: Path, outer: OuterLaunch) -> list[int]:
    """On rank 0 (the notebook's kernel): post ``job_file`` to every rank, run rank 0's process of it
    here (its output into the notebook) and return every rank's exit code."""
    store = outer.store()
    missing = [
        r for r in range(1, outer.world_size) if _waited(store, f"following/{r}", seconds=FOLLOWER_WAIT_SECONDS) is None
    ]
    if missing:  # a rank whose run_all.sh stopped before it followed (a preflight problem on its node)
        raise RuntimeError(
            f"ranks {missing} of the outer {outer.launcher} launch did not start following within "
            f"{FOLLOWER_WAIT_SECONDS} s (see their logs): no fit can run without them"
        )
    job = store.add("jobs", 1)
    store.set(f"job/{job}", str(job_file))
    codes = [_run_rank(store, str(job_file), outer, job, echo=True)]
    wait = FOLLOWER_WAIT_SECONDS if codes[0] == 0 else 60  # a failed fit's peers stop within seconds
    answers = [_waited(store, f"done/{job}/{rank}", seconds=wait) for rank in range(1, outer.world_size)]
    return codes + [MISSING if answer is None else int(answer) for answer in answers]


def follow(outer: OuterLaunch) -> int:
    """On every rank but 0: run this rank's process of each fit rank 0 posts, until it posts the end."""
    store = outer.store()
    store.set(f"following/{outer.rank}", "1")
    job = 1
    while (job_file := _waited(store, f"job/{job}")) != END:
        print(f"[rank {outer.rank}] fit {job}: {job_file}", flush=True)
        _run_rank(store, job_file, outer, job, echo=False)
        job += 1
    store.add("followers ended", 1)
    return 0


def end(outer: OuterLaunch, wait_seconds: float = 120) -> None:
    """On rank 0, after its last notebook (run_all.sh's exit): post the end and wait for the followers."""
    store = outer.store()
    store.set(f"job/{store.add('jobs', 1)}", END)
    deadline = time.monotonic() + wait_seconds
    while store.add("followers ended", 0) < outer.world_size - 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    store.set("ended", "1")  # serve may stop now (a follower that never came is not waited for)


def serve(outer: OuterLaunch) -> None:
    """Under srun (no torchrun agent): rank 0 hosts the launch's store until the followers have ended."""
    store = outer.store(serve=True)
    while store.add("followers ended", 0) < outer.world_size - 1 and not store.check(["ended"]):
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    """``python -m longdoc.launch role|follow|serve|end``: what run_all.sh asks of an outer launch's rank."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m longdoc.launch", description=main.__doc__)
    parser.add_argument("action", choices=("role", "follow", "serve", "end"))
    action = parser.parse_args(argv).action
    outer = outer_launch(os.environ)
    if action == "role":  # run_all.sh: "single", "leader <launcher>" (rank 0) or "follower"
        print("single" if outer is None else f"leader {outer.launcher}" if outer.rank == 0 else "follower")
        return 0
    if outer is None:
        print(f"python -m longdoc.launch {action}: not a rank of an outer torchrun or srun launch", file=sys.stderr)
        return 2
    if action == "follow":
        return follow(outer)
    if action == "serve":
        serve(outer)
    else:
        end(outer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
