"""The test command's own report and budget (longdoc.bench.suite)."""

import subprocess
import sys
import textwrap
import time

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
    assert "set-up" in out and "ruff" in out and "pytest" in out and "peak extra disk" in out
    monkeypatch.setattr(suite, "BUDGET", suite.Budget(minutes=25, gigabytes=0.001))  # 1 MB
    assert suite.run(root=tmp_path) == 1
    captured = capsys.readouterr()
    assert "over its budget of 0.001 GB" in captured.err and "total" in captured.out


def test_a_failing_part_stops_the_rest_and_fails_the_command(monkeypatch, capsys, tmp_path):
    parts = {"ruff": [sys.executable, "-c", "raise SystemExit(3)"], "pytest": [sys.executable, "-c", "pass"]}
    monkeypatch.setattr(suite, "parts", lambda workers: parts)
    assert suite.run(root=tmp_path) == 1
    captured = capsys.readouterr()
    assert "FAILED (exit 3)" in captured.out and "pytest " not in captured.out.split("timed and weighed")[1]
    assert "ruff failed" in captured.err


def test_an_unknown_part_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        suite.main(["--only", "pytest,mypy"])
    assert "['mypy'] are not parts" in capsys.readouterr().err
