import json

import pytest

from longdoc.experiments import cache
from longdoc.experiments.results import ConfigMismatchError, write_metrics


def test_metrics_record_carries_provenance_and_refuses_other_config(tmp_path):
    directory = write_metrics("smoke", "01_x", {"a": 1}, {"MRR@100": 0.5}, "abc", 0, root=tmp_path)
    record = json.loads((directory / "metrics.json").read_text())
    assert record["config"] == {"a": 1} and record["data_checksum"] == "abc" and record["seed"] == 0
    assert "torch" in record["versions"] and "python" in record["versions"]
    write_metrics("smoke", "01_x", {"a": 1}, {"MRR@100": 0.6}, "abc", 0, root=tmp_path)  # same config: fine
    with pytest.raises(ConfigMismatchError, match="another configuration"):
        write_metrics("smoke", "01_x", {"a": 2}, {"MRR@100": 0.7}, "abc", 0, root=tmp_path)
    assert json.loads((directory / "metrics.json").read_text())["metrics"] == {"MRR@100": 0.6}


def test_cache_builds_once_per_key_and_never_keeps_a_failed_build(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path)
    calls = []

    def build(directory):
        calls.append(directory)
        (directory / "artefact").write_text("x")

    first = cache.cached_directory("kind", build, lr=1e-5, data="abc")
    again = cache.cached_directory("kind", build, data="abc", lr=1e-5)
    other = cache.cached_directory("kind", build, lr=2e-5, data="abc")
    assert first == again != other and len(calls) == 2

    def broken(directory):
        (directory / "half").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        cache.cached_directory("kind", broken, lr=3e-5)
    assert not any(p.name.endswith(cache.cache_key(lr=3e-5)) for p in (tmp_path / "kind").iterdir())


def test_versions_say_whether_the_tree_differed_from_its_commit(tmp_path, monkeypatch):
    import subprocess

    from longdoc.experiments import results

    monkeypatch.setattr(results, "REPO_ROOT", tmp_path)
    assert results.versions()["git_commit"] == "unknown"  # not a repository
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "lib.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "lib.py"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], cwd=tmp_path, check=True)
    clean = results.versions()
    assert len(clean["git_commit"]) == 40 and clean["git_dirty"] is False
    (tmp_path / "untracked.txt").write_text("results are not code\n")
    assert results.versions()["git_dirty"] is False
    (tmp_path / "lib.py").write_text("x = 2\n")
    assert results.versions()["git_dirty"] is True
