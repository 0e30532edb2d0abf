"""The test command's own report and budget (longdoc.bench.suite)."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from longdoc.bench import suite


def test_within_the_budget_nothing_is_said_and_over_it_the_figure_is_named():
    budget = suite.Budget(minutes=20, gigabytes=4)
    assert suite.over_budget(20 * 60, 4e9, budget) == []
    (slow,) = suite.over_budget(20 * 60 + 1, 1e9, budget)
    assert "20.0 minutes, over its budget of 20" in slow and "BUDGET" in slow
    (large,) = suite.over_budget(60, 4.2e9, budget)
    assert "4.20 GB at its peak, over its budget of 4 GB" in large
    assert len(suite.over_budget(30 * 60, 5e9, budget)) == 2


def test_tests_and_notebook_cells_are_read_from_pytest_s_own_junit_file(tmp_path):
    (tmp_path / "test_some.py").write_text(
        textwrap.dedent("""
        import time
        def test_quick(): pass
        def test_slow(): time.sleep(0.3)
        """)
    )
    junit = tmp_path / "out.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1", f"--junitxml={junit}", "test_some.py"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    times = suite.test_times(junit)
    assert [name.split("::")[1] for name, _ in times] == ["test_slow", "test_quick"]  # slowest first
    assert times[0][1] >= 0.3 and times[0][0].startswith("test_some.py::")
    cells = [
        ("notebooks/10_x.ipynb::Cell 0", 1.0),
        ("notebooks/10_x.ipynb::Cell 1", 2.5),
        ("notebooks/00_y.ipynb::Cell 0", 4.0),
    ]
    assert suite.notebook_times(cells) == [("00_y.ipynb", 4.0, 1), ("10_x.ipynb", 3.5, 2)]
    assert suite.test_times(tmp_path / "missing.xml") == []


def test_disk_is_counted_in_blocks_less_the_skipped_folders(tmp_path):
    (tmp_path / "kept").mkdir()
    (tmp_path / "skipped").mkdir()
    (tmp_path / "kept" / "a.bin").write_bytes(b"\1" * 2**20)
    (tmp_path / "skipped" / "b.bin").write_bytes(b"\1" * 2**20)
    (tmp_path / "link").symlink_to(tmp_path / "skipped" / "b.bin")
    counted = suite.disk_bytes(tmp_path, skip=(tmp_path / "skipped",))
    assert 2**20 <= counted < 2**20 + 2**16  # the kept file (and the link itself), not the skipped one


def test_the_sampler_sees_a_peak_that_is_gone_by_the_end(tmp_path):
    with suite.DiskSampler((tmp_path,), interval=0.05) as disk:
        (tmp_path / "big.bin").write_bytes(b"\1" * 4 * 2**20)
        time.sleep(0.5)
        (tmp_path / "big.bin").unlink()
        time.sleep(0.2)
        disk.mark()
    assert disk.peak >= 4 * 2**20 and disk.part_peak < 2**20


@pytest.fixture
def two_parts(monkeypatch):
    """The suite with two quick parts: one writes 3 MB into its temporary folder, one passes."""
    writes = "import os, pathlib; pathlib.Path(os.environ['TMPDIR'], 'x.bin').write_bytes(b'1' * 3 * 2**20); import time; time.sleep(0.5)"
    parts = {"ruff": [sys.executable, "-c", writes], "pytest": [sys.executable, "-c", "pass"]}
    monkeypatch.setattr(suite, "parts", lambda workers: parts)
    monkeypatch.setattr(suite, "SAMPLE_SECONDS", 0.05)
    return parts


def test_the_command_prints_its_parts_and_fails_over_its_budget(two_parts, monkeypatch, capsys, tmp_path):
    assert suite.run(setup_seconds=1.0, root=tmp_path) == 0
    out = capsys.readouterr().out
    assert "set-up" in out and "ruff" in out and "pytest" in out and "extra disk at its peak" in out
    assert "(it added  0.00)" in out.split("pytest ")[-1]  # the 3 MB are the first part's, not the second's
    monkeypatch.setattr(suite, "BUDGET", suite.Budget(minutes=25, gigabytes=0.001))  # 1 MB
    assert suite.run(root=tmp_path) == 1
    captured = capsys.readouterr()
    assert "over its budget of 0.001 GB" in captured.err and "total" in captured.out


def test_a_failing_part_stops_the_rest_keeps_its_files_and_gives_its_exit_status(monkeypatch, capsys, tmp_path):
    keeps = "import os, pathlib; pathlib.Path(os.environ['TMPDIR'], 'why.txt').write_text('x'); raise SystemExit(3)"
    parts = {"ruff": [sys.executable, "-c", keeps], "pytest": [sys.executable, "-c", "pass"]}
    monkeypatch.setattr(suite, "parts", lambda workers: parts)
    assert suite.run(root=tmp_path) == 3
    captured = capsys.readouterr()
    assert "FAILED (exit 3)" in captured.out and "pytest " not in captured.out.split("timed and weighed")[1]
    assert "ruff failed (exit 3)" in captured.err
    kept = Path(captured.err.split("are kept in ")[1].split()[0])
    assert (kept / "why.txt").read_text() == "x"  # the failed part's files, to read


def test_the_set_up_is_counted_from_the_time_run_all_started(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(suite, "parts", lambda workers: {"ruff": [sys.executable, "-c", "pass"]})
    monkeypatch.chdir(tmp_path)
    assert suite.main(["--started", str(time.time() - 90), "--only", "ruff"]) == 0
    out = capsys.readouterr().out
    setup = float(out.split("set-up")[1].split("s")[0])
    assert 90 <= setup < 100 and "total 1.5 minutes" in out


def test_a_stopped_part_stops_its_whole_process_group(tmp_path):
    """Ctrl-C (or SIGTERM, which main turns into an exit) reaches a part's workers, not only its first process."""
    import os
    import signal

    pid_file = tmp_path / "grandchild.pid"
    spawns = (
        "import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)"
    )

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.alarm(3)
        with pytest.raises(KeyboardInterrupt):
            suite.run_part([sys.executable, "-c", spawns], tmp_path, dict(os.environ))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(grandchild, signal.SIGKILL)
        raise AssertionError("the part's grandchild outlived the stop")


def test_the_measured_folders_count_the_cache_once_wherever_it_lies(tmp_path):
    root, scratch, outside = tmp_path / "checkout", tmp_path / "scratch", tmp_path / "elsewhere"
    for folder in (root, scratch, outside):
        folder.mkdir()
    inside = {"LONGDOC_CACHE": str(root / "data" / "cache")}
    assert suite.measured_folders(root, scratch, inside) == (root.resolve(), scratch.resolve())
    away = {"LONGDOC_CACHE": str(outside), "LONGDOC_DATA": str(outside / "data")}
    assert suite.measured_folders(root, scratch, away) == (root.resolve(), scratch.resolve(), outside.resolve())
    assert suite.measured_folders(root, root / "tmp", {}) == (root.resolve(),)  # a TMPDIR inside: counted once


def test_a_reading_begun_before_a_part_started_is_not_that_part_s(tmp_path, monkeypatch):
    disk = suite.DiskSampler((tmp_path,), interval=3600)
    real_size, marked = disk.size, []

    def racing_size():  # the sampler's walk is under way when the next part starts
        if not marked:
            marked.append(True)
            disk.mark()
            return 10**9  # what the walk saw of the last part (its leftovers, since removed)
        return real_size()

    with disk:
        monkeypatch.setattr(disk, "size", racing_size)
        disk.sample()
    assert disk.peak >= 10**9 - disk.start  # the command's peak keeps it
    assert disk.part_peak < 10**6  # the new part's does not


def test_an_unknown_part_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        suite.main(["--only", "pytest,mypy"])
    assert "['mypy'] are not parts" in capsys.readouterr().err
