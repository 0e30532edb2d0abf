"""Atomic writes: permissions follow the umask, and what a killed writer left behind is swept."""

import os
import subprocess
import sys

import pytest

from longdoc.io import atomic_directory, atomic_write, sweep_stale


def test_written_files_and_folders_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "a.txt") as handle:
            handle.write("x")
        with atomic_directory(tmp_path / "folder") as folder:
            (folder / "b.txt").write_text("y")
    finally:
        os.umask(previous)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644  # mkstemp alone would leave 0600
    assert (tmp_path / "folder").stat().st_mode & 0o777 == 0o755  # mkdtemp alone would leave 0700


def test_a_killed_writer_leaves_nothing_a_sweep_keeps(tmp_path):
    code = (
        "import os, signal, sys\nfrom longdoc.io import atomic_directory, atomic_write\n"
        "with atomic_write(sys.argv[1] + '/file.json') as h:\n"
        "    with atomic_directory(sys.argv[1] + '/folder') as d:\n"
        "        h.write('half'); (d / 'x').write_text('half'); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)])
    assert done.returncode == -9
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert len(leftovers) == 2 and all(name.endswith(".tmp") for name in leftovers), leftovers
    assert not (tmp_path / "file.json").exists() and not (tmp_path / "folder").exists()
    with atomic_write(tmp_path / "mine.txt") as handle:  # a live writer's temporary file is kept
        live = [p for p in tmp_path.iterdir() if p.name.startswith(".mine.txt.")]
        assert sorted(p.name for p in sweep_stale(tmp_path)) == leftovers
        assert all(p.exists() for p in live)
        handle.write("ok")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_a_replacement_killed_half_way_gets_the_previous_folder_back(tmp_path):
    """Killed between moving the old folder aside and moving the new one in: the old one returns."""
    code = (
        "import os, signal, sys\nfrom pathlib import Path\nfrom longdoc import io\n"
        "real = os.replace\n"
        "def replace(a, b):\n"
        "    real(a, b)\n"
        "    if str(b).endswith('.old'): os.kill(os.getpid(), signal.SIGKILL)\n"
        "io.os.replace = replace\n"
        "with io.atomic_directory(Path(sys.argv[1]) / 'record') as d:\n"
        "    (d / 'metrics.json').write_text('new')\n"
    )
    with atomic_directory(tmp_path / "record") as folder:
        (folder / "metrics.json").write_text("old")
    assert subprocess.run([sys.executable, "-c", code, str(tmp_path)]).returncode == -9
    assert not (tmp_path / "record").exists()
    sweep_stale(tmp_path)
    assert (tmp_path / "record" / "metrics.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record"]


def test_a_lock_keeps_a_second_writer_out_until_its_holder_ends_or_dies(tmp_path):
    import pytest

    from longdoc.io import ConcurrentWriteError, exclusive

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom longdoc.io import exclusive\n"
            "with exclusive(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)\n",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(ConcurrentWriteError, match=rf"out: process {holder.pid} on .* is writing it now"):
            with exclusive(tmp_path / "out"):
                pass
    finally:
        holder.kill()  # SIGKILL: no cleanup runs, the kernel drops its lock
        holder.wait()
    with exclusive(tmp_path / "out"):
        assert (tmp_path / ".out.lock").read_text().startswith(f"process {os.getpid()} on ")
    assert list(tmp_path.iterdir()) == []


def test_an_operating_system_error_names_the_final_file_and_its_cause(tmp_path):
    import errno

    from longdoc.io import FileSystemError, file_system_error, final_path, naming_files

    hidden = tmp_path / ".store.host-1.123.abcd1234.tmp" / "text.bin"
    assert final_path(hidden) == tmp_path / "store" / "text.bin"
    problem = file_system_error(OSError(errno.EFBIG, "File too large", str(hidden)), "build the corpus store")
    assert str(problem) == (
        f"{tmp_path / 'store' / 'text.bin'}: cannot build the corpus store (file too large: a file-size limit "
        "(ulimit -f) or the file system's largest file)"
    )
    assert problem.errno == errno.EFBIG
    with pytest.raises(FileSystemError, match=r"out: cannot write \(no space left on the device: the disk is full\)"):
        with naming_files("write", tmp_path / "out"):
            raise OSError(errno.ENOSPC, "No space left on device")  # a write error names no file
    with pytest.raises(FileSystemError, match=r"/x: cannot read \(is a file, not a folder\)"):
        (tmp_path / "x").write_text("")
        with naming_files("read"):
            open(tmp_path / "x" / "y")


def test_a_folder_the_user_cannot_read_is_said_to_be_so(tmp_path, monkeypatch):
    """As root every folder is readable; the check is os.access, made to answer as for another user."""
    import os

    from longdoc.data.beir import load_beir
    from longdoc.io import unwritable_folder

    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(ValueError, match=r"mine: cannot be read \(permission denied: the dataset folder needs read"):
        (tmp_path / "mine").mkdir()
        load_beir(tmp_path / "mine")
    monkeypatch.undo()

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.NamedTemporaryFile", refuse)
    assert unwritable_folder(tmp_path / "cache") == f"{tmp_path} cannot be written (permission denied)"
