"""The pinned environments agree with each other and with what their packages declare.

- ``requirements-common.txt`` holds the shared pins; ``requirements-cpu.txt`` and
  ``requirements-gpu.txt`` add the same torch and their faiss build; ``environment.yml`` installs the
  GPU file and nothing else, so conda users get exactly those pins.
- Every pin's declared requirements (``Requires-Dist``, with the extras we use) hold under the other
  pins: the check that would have caught transformers 5 (torch >= 2.6) beside a pinned torch 2.5.
- The GPU set resolves on PyPI for Linux x86-64 / Python 3.11 (a pip dry-run; skipped when PyPI is
  unreachable), and so does the CUDA 12 set (``requirements-gpu-cu12.txt``, drivers below 580) where
  PyPI and PyTorch's CUDA 12 index are reachable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
EXTRAS_USED = {"transformers": {"torch"}}  # extras whose requirements our code relies on


def options(name: str) -> list[str]:
    """The pip options of a requirements file (``--extra-index-url ...``)."""
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / name).read_text().splitlines()]
    return [line for line in lines if line.startswith("--")]


def pins(name: str) -> dict[str, str]:
    """``{package: version}`` of a requirements file, following ``-r`` includes; every other line but pip
    options must pin."""
    found: dict[str, str] = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("--"):
            continue
        if line.startswith("-r "):
            for package, version in pins(line[3:].strip()).items():
                assert found.setdefault(package, version) == version, (name, package)
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", f"{name}: {line!r} is not pinned with =="
        package = canonicalize_name(requirement.name)
        assert package not in found, f"{name}: {package} pinned twice"
        found[package] = specifiers[0].version
    return found


def test_cpu_and_gpu_pin_the_same_versions_and_differ_only_in_the_faiss_build():
    cpu, gpu = pins("requirements-cpu.txt"), pins("requirements-gpu.txt")
    assert cpu["torch"] == gpu["torch"] == "2.13.0"
    assert set(cpu) ^ set(gpu) == {"faiss-cpu", "faiss-gpu"}
    assert cpu["faiss-cpu"] == gpu["faiss-gpu"]
    assert all(cpu[p] == gpu[p] for p in set(cpu) & set(gpu))


def test_the_cuda_12_set_pins_the_gpu_versions_with_pytorchs_cuda_12_build_of_the_same_torch():
    """Drivers below 580: requirements-gpu-cu12.txt differs from requirements-gpu.txt only in torch's
    local tag (+cu12x, from PyTorch's index for that CUDA) and in naming that index."""
    gpu, cu12 = pins("requirements-gpu.txt"), pins("requirements-gpu-cu12.txt")
    assert set(gpu) == set(cu12) and all(gpu[p] == cu12[p] for p in gpu if p != "torch")
    base, _, tag = cu12["torch"].partition("+")
    assert base == gpu["torch"] and tag.startswith("cu12")
    assert options("requirements-gpu-cu12.txt") == [f"--extra-index-url https://download.pytorch.org/whl/{tag}"]
    assert options("requirements-gpu.txt") == options("requirements-cpu.txt") == []


def test_environment_yml_installs_exactly_the_gpu_pins():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in environment["dependencies"] if isinstance(d, str)]
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    assert sorted(d.split("=")[0] for d in conda) == ["pip", "python"]  # no conda-side torch, faiss or numpy
    assert "python=3.11" in conda
    assert pip_section == ["-r requirements-gpu.txt", "-e ."]


def _declared_requirements_hold(pinned: dict[str, str], installed_only: bool) -> list[str]:
    environment = default_environment()
    problems = []
    for package, version in pinned.items():
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            if installed_only:
                continue
            raise
        for text in dist.requires or []:
            requirement = Requirement(text)
            extras = EXTRAS_USED.get(package, set()) | {""}
            if requirement.marker and not any(requirement.marker.evaluate({**environment, "extra": e}) for e in extras):
                continue
            dependency = canonicalize_name(requirement.name)
            if dependency in pinned and not requirement.specifier.contains(pinned[dependency], prereleases=True):
                problems.append(
                    f"{package}=={version} requires {requirement}, pinned {dependency}=={pinned[dependency]}"
                )
    return problems


def test_every_installed_pin_satisfies_its_packages_declared_requirements():
    pinned = pins("requirements-cpu.txt") | {"faiss-gpu": pins("requirements-gpu.txt")["faiss-gpu"]}
    assert _declared_requirements_hold(pinned, installed_only=True) == []


def test_the_running_environment_has_its_pins():
    """What the tests run under is what requirements-cpu.txt (or, with faiss-gpu installed,
    requirements-gpu.txt) says; torch may carry a local tag such as +cpu."""
    try:
        metadata.version("faiss-gpu")
        expected = pins("requirements-gpu.txt")
    except metadata.PackageNotFoundError:
        expected = pins("requirements-cpu.txt")
    wrong = {}
    for package, version in expected.items():
        try:
            installed = metadata.version(package)
        except metadata.PackageNotFoundError:
            wrong[package] = "missing"
            continue
        if installed.split("+")[0] != version:
            wrong[package] = installed
    assert wrong == {}


def _reachable(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=10)
        return True
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize(
    ("requirements", "index"),
    [
        ("requirements-gpu.txt", "https://pypi.org/simple/faiss-gpu/"),
        ("requirements-gpu-cu12.txt", "https://download.pytorch.org/whl/cu126/torch/"),
    ],
)
def test_the_gpu_pins_resolve(tmp_path, requirements, index):
    """pip's resolver, with the metadata the indexes serve, for a Linux x86-64 GPU node with Python 3.11."""
    if not (_reachable("https://pypi.org/simple/faiss-gpu/") and _reachable(index)):
        pytest.skip(f"{index} is not reachable from this machine")
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(17, 29)] + ["manylinux2014_x86_64", "linux_x86_64"]
    report = tmp_path / "report.json"
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--use-feature=fast-deps",  # each wheel's metadata by HTTP range requests: whole wheels wrote 3.6 GB
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--report",
        str(report),
        "--python-version",
        "3.11",
        "--only-binary=:all:",
        "--resume-retries",
        "20",
        "-r",
        requirements,
    ]
    for platform in platforms:
        command += ["--platform", platform]
    env = {"PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": "", "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    env |= {k: v for k, v in os.environ.items() if k in ("PIP_CERT", "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy")}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0 and ("incomplete-download" in done.stderr or "network connectivity" in done.stderr):
        pytest.skip(
            f"a download from PyPI broke off (a network failure, not a resolution failure): {done.stderr[-300:]}"
        )
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    gpu = pins(requirements)
    assert {p: resolved.get(p) for p in gpu} == gpu
