"""``run_all.sh``'s set-up where users are: a clear stop for an old Python, and the Debian packages of
the embedded benchmark asked for only when it must be built, never through an unasked sudo."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP_FILES = ("requirements-common.txt", "requirements-cpu.txt", "pyproject.toml")


def checkout(tmp_path: Path, venv: bool) -> Path:
    """A copy of run_all.sh and the files its set-up reads; ``venv``: a ready .venv (this Python)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("run_all.sh", *SETUP_FILES):
        shutil.copy(ROOT / name, repo / name)
    if venv:
        (repo / ".venv" / "bin").mkdir(parents=True)
        python = repo / ".venv" / "bin" / "python"  # a wrapper: a symlink would lose this venv's packages
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
        stamp = hashlib.sha256(b"".join((ROOT / n).read_bytes() for n in SETUP_FILES)).hexdigest()[:16]
        (repo / ".venv" / ".longdoc-setup").write_text(stamp + "\n")
    return repo


def fake_commands(tmp_path: Path, **scripts: str) -> dict[str, str]:
    """An environment whose PATH finds these shell scripts first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT / "lib")}


def test_an_old_python_stops_the_set_up_with_what_to_do(tmp_path):
    repo = checkout(tmp_path, venv=False)
    env = fake_commands(tmp_path, python3_10='case "$1" in --version) echo "Python 3.10.12";; *) exit 1;; esac')
    env["LONGDOC_PYTHON"] = "python3_10"
    done = subprocess.run(["bash", "run_all.sh", "--setup"], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and not (repo / ".venv").exists()
    assert "python3_10 is Python 3.10.12; the study needs Python >= 3.11" in done.stderr
    assert "LONGDOC_PYTHON=python3.11" in done.stderr


def test_missing_packages_are_named_and_sudo_is_never_called(tmp_path):
    repo = checkout(tmp_path, venv=True)
    calls = tmp_path / "sudo-calls"
    env = fake_commands(
        tmp_path, dpkg="exit 1", id='[ "$1" = -u ] && echo 1000', sudo=f'echo "$@" >> {calls}', **{"apt-get": "exit 1"}
    )
    env["LONGDOC_DATA"] = str(tmp_path / "no-data")  # the benchmark is not built
    done = subprocess.run(["bash", "run_all.sh", "--tests"], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "manpages manpages-dev man-db groff-base are missing" in done.stderr
    assert "sudo apt-get install manpages manpages-dev man-db groff-base" in done.stderr  # said, not run
    assert not calls.exists()


def test_a_built_benchmark_needs_no_system_package(tmp_path):
    """With data/manpages built, the study and the tests go on without dpkg (here: the setup reaches
    its next step, ruff, which this copy's missing tree fails)."""
    from longdoc.data.registry import DATA_DIR, benchmark_built

    if not benchmark_built():
        import pytest

        pytest.skip("the embedded benchmark is not built here")
    repo = checkout(tmp_path, venv=True)
    env = fake_commands(tmp_path, dpkg="exit 1", **{"apt-get": "exit 1"})
    env["LONGDOC_DATA"] = str(DATA_DIR)
    done = subprocess.run(["bash", "run_all.sh", "--tests"], cwd=repo, env=env, capture_output=True, text=True)
    assert "are missing" not in done.stderr and "ruff" in done.stdout
