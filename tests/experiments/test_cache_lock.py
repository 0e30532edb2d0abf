"""Two processes that need one artefact (two tasks of a Slurm job array) build it once: the second waits
under the key's lock, says for whom, and reads what the first built."""

import os
import subprocess
import sys
import time

TASK = """
import sys, time
from pathlib import Path
from longdoc.experiments.cache import cached_directory

log, name, release = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

def build(folder, resume):
    with open(log, "a") as handle:
        handle.write(f"built by {name} (resume held {sorted(p.name for p in resume.iterdir())})\\n")
    (resume / name).write_text("a training state")
    deadline = time.time() + 60
    while not release.exists() and time.time() < deadline:  # held until the test has seen the other wait
        time.sleep(0.05)
    (folder / "model.txt").write_text(name)

print(cached_directory("lock_test", build, seed=0))
"""


def _task(tmp_path, name: str, environment: dict) -> subprocess.Popen:
    command = [sys.executable, "-c", TASK, str(tmp_path / "builds.log"), name, str(tmp_path / "release")]
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_tasks_needing_one_fit_train_it_once(tmp_path):
    environment = {**os.environ, "LONGDOC_CACHE": str(tmp_path / "cache")}
    first = _task(tmp_path, "task-1", environment)
    deadline = time.time() + 60
    while not (tmp_path / "builds.log").exists() and time.time() < deadline:  # the first holds the lock
        time.sleep(0.05)
    second = _task(tmp_path, "task-2", environment)
    said = second.stderr.readline()  # blocks until the second says it waits
    (tmp_path / "release").touch()
    out, err = first.communicate(timeout=60)
    second_out, second_err = second.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, (err, said + second_err)
    assert "lock_test" in said and "is building it; waiting for it (not building it twice)" in said
    assert (tmp_path / "builds.log").read_text() == "built by task-1 (resume held [])\n"
    assert out.strip() == second_out.strip()
    built = next((tmp_path / "cache" / "lock_test").glob("*/model.txt"))
    assert built.read_text() == "task-1"
    assert [p.name for p in (tmp_path / "cache" / "lock_test").iterdir()] == [
        built.parent.name
    ]  # no lock or resume left


def test_a_holder_killed_mid_build_leaves_the_build_to_the_waiter_which_resumes_its_folder(tmp_path):
    """The kernel releases a dead holder's lock: the waiter builds, from the resume folder the holder left."""
    import signal

    environment = {**os.environ, "LONGDOC_CACHE": str(tmp_path / "cache")}
    first = _task(tmp_path, "task-1", environment)
    deadline = time.time() + 60
    while not (tmp_path / "builds.log").exists() and time.time() < deadline:
        time.sleep(0.05)
    second = _task(tmp_path, "task-2", environment)
    said = second.stderr.readline()
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    (tmp_path / "release").touch()
    second_out, second_err = second.communicate(timeout=60)
    assert second.returncode == 0, said + second_err
    assert "is building it; waiting for it" in said
    assert (tmp_path / "builds.log").read_text() == (
        "built by task-1 (resume held [])\nbuilt by task-2 (resume held ['task-1'])\n"  # the killed one's state kept
    )
    built = next((tmp_path / "cache" / "lock_test").glob("*/model.txt"))
    assert built.read_text() == "task-2" and second_out.strip() == str(built.parent)
