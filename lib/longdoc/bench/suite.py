"""The test command timed and weighed: ruff, pytest and nbval as ``./run_all.sh --tests`` runs them, each
part's wall time and the disk it wrote, the slowest tests and notebooks, and a budget it must keep.

    python -m longdoc.bench.suite                     # what ./run_all.sh --tests runs after the set-up
    python -m longdoc.bench.suite --only pytest       # one part (ruff, pytest, nbval), same report

The parts run in the current folder (``run_all.sh`` runs in its checkout). Disk is what the parts add, once
the set-up is done (its ``.venv`` and the benchmark it builds are the baseline, as "above the clone with its
``.venv``" reads), to that folder less its ``.venv`` and ``.git`` (the smoke cache, results, figures), to
``LONGDOC_CACHE`` and ``LONGDOC_DATA`` where they lie elsewhere, and to the temporary folder the command
gives its children (``TMPDIR``, pytest's ``--basetemp``), sampled every :data:`SAMPLE_SECONDS`; pip's and
other programs' caches in the home folder are not counted. The temporary folder is removed at the end, or
kept and named when a part failed (its failed tests' files, to read). The budget (:data:`BUDGET`) is
written here only: a run over it fails with a message naming the figure, so a change that makes the suite
slower or larger fails its own CI run, not a later landing (CI stops at 90 minutes, its disk is shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Budget:
    """What the whole test command may take on the 2-core CI machine: its wall time with the set-up, and its
    peak extra disk. The targets are 20 minutes and 4 GB (issue 70); the limits leave room for a slower
    2-core machine (one took 1.27 times as long as the machine the targets were measured on)."""

    minutes: float = 25.0
    gigabytes: float = 5.0


BUDGET = Budget()
SAMPLE_SECONDS = 2.0
SLOWEST = 30  # tests listed; every notebook is listed
STOP_SECONDS = 30  # a stopped part's processes get this long to end after SIGTERM, then SIGKILL


def cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or a job's share, not the host's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parts(workers: int) -> dict[str, list[str]]:
    """The commands of the test command, in order (each stops the rest when it fails, as ``&&`` would).
    pytest runs on ``workers`` processes (pytest-xdist; ``worksteal`` hands a finished worker the other's
    queue, so one slow test at the end does not leave a core idle); nbval runs the notebooks one after
    another in one process, in their numbered order (later notebooks read earlier ones' fits)."""
    python = sys.executable
    xdist = [] if workers <= 1 else ["-n", str(workers), "--dist", "worksteal"]
    junit = ["-o", "junit_family=xunit1"]  # its test cases name their file (the report's test ids)
    return {
        "ruff": [python, "-m", "ruff", "check", "."],
        "ruff format": [python, "-m", "ruff", "format", "--check", "."],
        "pytest": [python, "-m", "pytest", "tests", "-p", "no:cacheprovider", *xdist, *junit],
        "nbval": [
            python,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--nbval-sanitize-with",
            "notebooks/nbval-sanitize.cfg",
            *junit,
            "notebooks",
        ],
    }


def disk_bytes(folder: Path, skip: tuple[Path, ...] = ()) -> int:
    """Bytes on disk under ``folder`` (allocated blocks, links not followed), less the ``skip`` folders; files
    that vanish while they are counted (a test's temporary files) are not counted."""
    total, stack = 0, [folder]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if Path(entry.path) not in skip:
                        stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def measured_folders(root: Path, scratch: Path, environ: dict | None = None) -> tuple[Path, ...]:
    """The folders the command writes into: ``root``, then ``scratch`` and the cache and data folders
    (``LONGDOC_CACHE``, ``LONGDOC_DATA``) that lie outside it, each counted once (none inside another)."""
    environ = os.environ if environ is None else environ
    candidates = [root, scratch] + [Path(environ[v]) for v in ("LONGDOC_CACHE", "LONGDOC_DATA") if environ.get(v)]
    chosen: list[Path] = []
    for folder in (c.resolve() for c in candidates):
        if not any(folder == c or c in folder.parents for c in chosen):
            chosen = [c for c in chosen if folder not in c.parents] + [folder]
    return tuple(chosen)


@dataclass
class DiskSampler:
    """The extra bytes under ``folders`` (less ``skip``) against their size at the start, sampled in a
    thread: ``peak`` over the whole run; for the current part (since :meth:`mark`) its peak and the extra
    bytes there were when it began."""

    folders: tuple[Path, ...]
    skip: tuple[Path, ...] = ()
    interval: float = SAMPLE_SECONDS
    start: int = 0
    peak: int = 0
    part_peak: int = 0
    part_start: int = 0
    _part: int = 0  # which part a reading belongs to: one begun before a mark is not the new part's
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def size(self) -> int:
        return sum(disk_bytes(folder, self.skip) for folder in self.folders)

    def sample(self) -> int:
        part = self._part
        extra = self.size() - self.start
        with self._lock:
            self.peak = max(self.peak, extra)
            if part == self._part:
                self.part_peak = max(self.part_peak, extra)
        return extra

    def __enter__(self) -> DiskSampler:
        self.start = self.size()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def mark(self) -> None:
        """Start a part: its peak and its own share count from the extra disk already there."""
        extra = self.size() - self.start
        with self._lock:
            self._part += 1
            self.peak = max(self.peak, extra)
            self.part_peak = self.part_start = extra

    def __exit__(self, *_) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass
class Part:
    name: str
    returncode: int
    seconds: float
    peak_bytes: int  # extra disk at the part's peak, counted from the command's start
    added_bytes: int  # of which the part added: its peak less what was there when it began
    junit: Path | None = None


def run_part(command: list[str], cwd: Path, env: dict) -> int:
    """``command``'s exit status; it runs in a process group of its own, and when this process is stopped
    (Ctrl-C, SIGTERM) the whole group is (pytest-xdist's workers, nbval's kernels), not its first process."""
    process = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True)
    try:
        return process.wait()
    except BaseException:
        for sent in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sent)
                process.wait(timeout=STOP_SECONDS)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        raise


def test_times(junit: Path) -> list[tuple[str, float]]:
    """``(test id, seconds)`` of every test case in a JUnit XML file (pytest's ``--junitxml``), slowest first."""
    if not junit.is_file():
        return []
    try:
        root = ElementTree.parse(junit).getroot()
    except ElementTree.ParseError:
        return []
    found = []
    for case in root.iter("testcase"):
        where = case.get("file") or case.get("classname", "")
        found.append((f"{where}::{case.get('name')}", float(case.get("time") or 0.0)))
    return sorted(found, key=lambda item: -item[1])


def notebook_times(cells: list[tuple[str, float]]) -> list[tuple[str, float, int]]:
    """nbval's cell times summed per notebook: ``(notebook, seconds, cells)``, slowest first."""
    by_notebook: dict[str, list[float]] = {}
    for test, seconds in cells:
        by_notebook.setdefault(Path(test.split("::")[0]).name, []).append(seconds)
    return sorted(((nb, sum(t), len(t)) for nb, t in by_notebook.items()), key=lambda item: -item[1])


def over_budget(total_seconds: float, peak_bytes: int, budget: Budget | None = None) -> list[str]:
    """What the run spent beyond ``budget`` (:data:`BUDGET`), one line each ([] within it)."""
    budget = budget or BUDGET
    problems = []
    if total_seconds > budget.minutes * 60:
        problems.append(
            f"the test command took {total_seconds / 60:.1f} minutes, over its budget of {budget.minutes:g} "
            "(longdoc.bench.suite.BUDGET): make the new tests cheaper (smaller configs, shared fixtures) before "
            "raising it"
        )
    if peak_bytes > budget.gigabytes * 1e9:
        problems.append(
            f"the test command wrote {peak_bytes / 1e9:.2f} GB at its peak, over its budget of "
            f"{budget.gigabytes:g} GB (longdoc.bench.suite.BUDGET): keep fewer or smaller artefacts"
        )
    return problems


def report(done: list[Part], total_seconds: float, setup_seconds: float, peak_bytes: int) -> list[str]:
    """The lines printed at the end: the parts, the slowest tests, every notebook, the totals."""
    lines = ["", "== the test command, timed and weighed (longdoc.bench.suite) =="]
    if setup_seconds:
        lines.append(f"{'set-up':<12} {setup_seconds:8.1f} s")
    for part in done:
        state = "passed" if part.returncode == 0 else f"FAILED (exit {part.returncode})"
        lines.append(
            f"{part.name:<12} {part.seconds:8.1f} s   extra disk at its peak {part.peak_bytes / 1e9:6.2f} GB "
            f"(it added {part.added_bytes / 1e9:5.2f})   {state}"
        )
    pytest_junit = next((p.junit for p in done if p.name == "pytest" and p.junit), None)
    nbval_junit = next((p.junit for p in done if p.name == "nbval" and p.junit), None)
    if pytest_junit:
        slowest = test_times(pytest_junit)[:SLOWEST]
        lines += ["", f"the {len(slowest)} slowest tests (pytest):"]
        lines += [f"{seconds:8.1f} s  {test}" for test, seconds in slowest]
    if nbval_junit:
        notebooks = notebook_times(test_times(nbval_junit))
        lines += ["", "notebooks (nbval, the sum of their cells; each kernel's start is not in a cell):"]
        lines += [f"{seconds:8.1f} s  {notebook} ({cells} cells)" for notebook, seconds, cells in notebooks]
    lines += [
        "",
        f"total {total_seconds / 60:.1f} minutes (set-up included), peak extra disk {peak_bytes / 1e9:.2f} GB; "
        f"budget {BUDGET.minutes:g} minutes, {BUDGET.gigabytes:g} GB",
    ]
    return lines


def run(
    only: list[str] | None = None,
    workers: int | None = None,
    setup_seconds: float = 0.0,
    started: float | None = None,
    root: Path | None = None,
) -> int:
    """Run the parts (``only``: some of them) in ``root`` (the current folder) on ``workers`` pytest processes
    (the cores this process may use) with the disk sampled; print the report; 0 when every part passed
    within :data:`BUDGET`, else the failed part's exit status or 1 over the budget."""
    root = Path.cwd() if root is None else Path(root)
    started = time.time() - setup_seconds if started is None else started
    commands = parts(cores() if workers is None else workers)
    chosen = [name for name in commands if not only or name.split()[0] in only]
    scratch = Path(tempfile.mkdtemp(prefix="longdoc-tests-"))
    env = os.environ | {"TMPDIR": str(scratch)}
    done: list[Part] = []
    try:
        skip = (root / ".venv", root / ".git")
        with DiskSampler(measured_folders(root, scratch), skip=skip, interval=SAMPLE_SECONDS) as disk:
            for name in chosen:
                command = list(commands[name])
                junit = None
                if name in ("pytest", "nbval"):
                    junit = scratch / f"{name}.xml"
                    command += [f"--junitxml={junit}", f"--basetemp={scratch / name}"]
                disk.mark()
                began = time.monotonic()  # the suite's wall time (no result depends on it)
                print(f"[suite {time.strftime('%H:%M:%S')}] {name}: {' '.join(command[1:])}", flush=True)
                quiet = {"LONGDOC_PROGRESS": "off"} if name == "nbval" else {}  # no progress line in a compared output
                returncode = run_part(command, root, env | quiet)
                disk.sample()
                seconds = time.monotonic() - began
                done.append(Part(name, returncode, seconds, disk.part_peak, disk.part_peak - disk.part_start, junit))
                if returncode:
                    break
            peak = disk.peak
        total = time.time() - started
        print("\n".join(report(done, total, setup_seconds, peak)), flush=True)
    finally:
        if any(p.returncode for p in done):
            print(f"test command: the failed part's files are kept in {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    failed = [p for p in done if p.returncode]
    if failed:
        print(f"test command: {failed[0].name} failed (exit {failed[0].returncode})", file=sys.stderr)
        return failed[0].returncode
    problems = over_budget(total, peak)
    for problem in problems:
        print(f"test command: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m longdoc.bench.suite", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated parts: ruff, pytest, nbval (default: all)")
    parser.add_argument(
        "--workers", type=int, default=None, help="pytest's processes (pytest-xdist; default: the usable cores)"
    )
    parser.add_argument(
        "--started", type=float, default=None, help="Unix time the command started (run_all.sh: before its set-up)"
    )
    args = parser.parse_args(argv)
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(only) - {"ruff", "pytest", "nbval"})
    if unknown:
        parser.error(f"--only {args.only}: {unknown} are not parts (ruff, pytest, nbval)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run stops its parts' process groups
    setup = time.time() - args.started if args.started else 0.0
    return run(only, args.workers, setup, args.started)


if __name__ == "__main__":
    sys.exit(main())
