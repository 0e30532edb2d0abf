"""The node check: is this GPU node ready for the study, and what does a step cost here?

``python -m longdoc.bench.node_check`` (``./run_all.sh --check-gpu``) writes ``node-check.json`` and
``node-check.log`` into ``--out`` (default ``results/gpu/node-check``), rewriting the JSON after every
stage so that a run cut short keeps what it measured:

1. **environment**: the device (name, memory, capability, driver), bf16 support, Python, torch, CUDA and
   the versions of the packages the study imports, the commit;
2. **tests**: the unit tests that run models, trainers, losses and indexes (:data:`TEST_PATHS`; on a
   GPU node they run on the GPU, since the library picks CUDA where present), each test's outcome written
   as it finishes (a pytest hook in this module), stopped after ``--tests-minutes``;
3. **fits**: every job of :mod:`longdoc.bench.training` (one training run per family: retrieval,
   matching, pre-training, NCI; and the encoders' throughput) at the profile's shapes (``--profile gpu``:
   its batches, blocks, precision (bf16 autocast) and backbone), each measured step beside the price
   :mod:`longdoc.bench.gpu_hours` gives it from the committed H100 measurements, and their ratio. No job
   starts past the whole check's ``--minutes``.

The fits are written as a measurement run in the format of ``results/bench/h100/training.json``, so the
estimator recalibrates from this node: ``python -m longdoc.bench.gpu_hours --profile gpu --measurements
results/gpu/node-check/node-check.json``. The check exits 1 where it found a problem (:func:`problems`);
an earlier check's files in ``--out`` are replaced only with ``--force``. A fit already running when the
time is up runs to its end (no job is cut off).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import torch

from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.records import versions
from longdoc.io import atomic_write

TEST_PATHS = (
    "tests/models",
    "tests/train",
    "tests/losses",
    "tests/index",
    "tests/bench",
    "tests/text",
    "tests/test_sharding.py",
)
PACKAGES = (
    "torch", "transformers", "tokenizers", "accelerate", "safetensors", "numpy", "scipy", "pandas",
    "scikit-learn", "faiss-cpu", "faiss-gpu", "bm25s", "PyStemmer", "blingfire", "pytrec-eval-terrier",
    "PyYAML", "tqdm", "matplotlib", "pytest",
)  # fmt: skip
REPORT_VARIABLE = "LONGDOC_NODE_CHECK_REPORT"  # where the pytest hook below appends each test's outcome
DEFAULT_OUT = REPO_ROOT / "results" / "gpu" / "node-check"


# ---------------------------------------------------------------- 1. environment


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def _driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def environment() -> dict:
    """What ran the check: device, precision support and versions."""
    found = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "commit": versions().get("git_commit", ""),  # in an unpacked pack: the commit it was made from
        "packages": {name: _version(name) for name in PACKAGES if _version(name)},
        "device": "cpu",
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        found |= {
            "device": props.name,
            "devices": torch.cuda.device_count(),
            "memory_gib": round(props.total_memory / 2**30, 1),
            "capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count,
            "driver": _driver(),
            "cudnn": torch.backends.cudnn.version(),
            "bf16_supported": torch.cuda.is_bf16_supported(),
        }
    return found


# ---------------------------------------------------------------- 2. tests


def pytest_runtest_logreport(report) -> None:
    """pytest hook (``-p longdoc.bench.node_check``): each test's outcome, appended as it is known (a
    failure or skip in set-up or teardown counts; a passed set-up does not). Under pytest-xdist the
    controller writes (it replays its workers' reports), the workers do not."""
    path = os.environ.get(REPORT_VARIABLE)
    if not path or os.environ.get("PYTEST_XDIST_WORKER") or (report.when != "call" and report.passed):
        return
    entry = {"test": report.nodeid, "when": report.when, "outcome": report.outcome, "seconds": report.duration}
    if report.failed:
        entry["message"] = str(report.longrepr)[-1500:]
    with open(path, "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def pytest_collectreport(report) -> None:
    """pytest hook: a test file that could not be collected (counted as an ``error``)."""
    path = os.environ.get(REPORT_VARIABLE)
    if path and report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):
        entry = {"test": report.nodeid, "when": "collect", "outcome": "error", "message": str(report.longrepr)[-1500:]}
        with open(path, "a") as handle:
            handle.write(json.dumps(entry) + "\n")


def _own_pytest_environment() -> dict[str, str]:
    """This process's environment less pytest-xdist's worker variables: a check started from a test that
    runs in an xdist worker is a pytest of its own, whose hooks must see themselves as the controller."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST_")}


def run_tests(paths, seconds: float, log_path: Path, workers: int = 0) -> dict:
    """The unit tests at ``paths`` in a pytest process stopped after ``seconds``: counts, failures, time."""
    report = log_path.with_suffix(".tests.jsonl")
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "longdoc.bench.node_check"]
    command += ["--continue-on-collection-errors"]  # a file that cannot be imported stops no other file's tests
    if workers > 1:
        command += ["-n", str(workers)]
    command += [str(p) for p in paths]
    started = time.perf_counter()
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(command)}\n")
        log.flush()
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
            env=_own_pytest_environment() | {REPORT_VARIABLE: str(report)},
        )  # fmt: skip
        try:
            returncode = process.wait(timeout=seconds)
            stopped = False
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
            stopped = True
    entries = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    report.unlink(missing_ok=True)
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    return {
        "paths": [str(p) for p in paths],
        "counts": counts,
        "failures": [e for e in entries if e["outcome"] in ("failed", "error")],
        "stopped_after_seconds": seconds if stopped else None,
        "pytest_exit_code": returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "on_gpu": torch.cuda.is_available(),
    }


# ---------------------------------------------------------------- 3. fits


def training_arguments(profile: dict, backbone: str, **overrides) -> argparse.Namespace:
    """:mod:`longdoc.bench.training`'s arguments at ``profile``'s shapes (its batches, blocks, precision and
    layers; the encoders' throughput over the benchmark's 1,100 documents)."""
    from longdoc.bench import training
    from longdoc.bench.gpu_hours import BENCHMARK_DOCUMENTS

    values = {
        "precision": profile["precision"],
        "block": profile["block_size"],
        "blocks": profile["max_blocks"],
        "query_length": profile["query_length"],
        "batch": profile["batch_size"],
        "cache_size": profile["cache_size"],
        "encode_docs": BENCHMARK_DOCUMENTS,
        "pair_batch": profile["batch_size"],
        "matchbert_length": profile["matchbert_lengths"][0],
        "sentence_block": profile["sentence_block_length"],
        "sentence_blocks": profile["max_sentence_blocks"],
        "sentence_layers": profile["sentence_layers"],
        "pretrain_batch": profile["pretrain_batch_size"],
        "pretrain_blocks": profile["max_blocks"],
        "nci_batch": profile["nci_batch_size"],
        "nci_documents": BENCHMARK_DOCUMENTS,
        "nci_query_length": profile["nci_query_length"],
        "nci_decoder_layers": profile["nci_decoder_layers"],
        "nci_adaptor_layers": profile["nci_adaptor_layers"],
    }
    args = training.parser().parse_args([])
    for name, value in (values | overrides).items():
        setattr(args, name, value)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(backbone)
    args.backbone = backbone
    args.hidden, args.layers, args.heads = config.hidden_size, config.num_hidden_layers, config.num_attention_heads
    return args


def estimated_row(row: dict, shape: dict, prices: dict) -> dict:
    """The estimator's figure for a measured ``row`` at ``shape``: seconds per step (documents per second
    for an encoding), where it comes from, and measured / estimated."""
    from longdoc.bench.gpu_hours import items_per_step, measured_tokens, price_of

    job = row["job"]
    price = price_of(job, prices)
    if price is None or row.get("oom"):
        return {
            "job": job,
            "estimated": None,
            "ratio": None,
            "estimate_from": price.measured if price else "not priced",
        }
    per_item = price.per_item(measured_tokens(job, shape))
    if "documents_per_second" in row:
        estimated, measured = 1 / per_item, row["documents_per_second"]
        return {"job": job, "measured_documents_per_second": measured, "estimated_documents_per_second": estimated,
                "ratio": estimated / measured, "estimate_from": price.measured}  # fmt: skip
    estimated, measured = per_item * items_per_step(job, shape), row["seconds_per_step"]
    return {"job": job, "measured_seconds_per_step": measured, "estimated_seconds_per_step": estimated,
            "ratio": measured / estimated, "estimate_from": price.measured}  # fmt: skip


def run_fits(args, jobs, deadline: float, log) -> tuple[dict, list[dict]]:
    """Each job of :mod:`longdoc.bench.training` at ``args`` until ``deadline`` (``time.monotonic()``):
    its header and rows (a job not started in time: ``{"job", "skipped": "deadline"}``)."""
    from longdoc.bench import training

    device = torch.device("cuda" if torch.cuda.is_available() and args.device != "cpu" else "cpu")
    header = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "shape": {k: v for k, v in vars(args).items() if k not in ("jobs", "out")},
    }
    rows = []
    for job in jobs:
        if time.monotonic() > deadline:
            rows.append({"job": job, "skipped": "deadline"})
            log(f"fit {job}: not started (the check's time is up)")
            continue
        started = time.perf_counter()
        try:
            row = training.run_job(job, args.backbone, args, device)
        except Exception as error:  # a job that breaks is a finding of the check; the next one runs
            row = {"job": job, "error": f"{type(error).__name__}: {error}"[:1500]}
        rows.append(row | {"wall_seconds": time.perf_counter() - started})
        log(f"fit {job}: {json.dumps(row)}")
    return header, rows


# ---------------------------------------------------------------- the check


def problems(result: dict) -> list[str]:
    """What a user should look at before a long job: failed or uncollected tests, a test run that stopped
    without counting its failures (pytest's own error), a fit that raised or ran out of memory."""
    found = []
    tests = result.get("tests")
    if tests:
        failed = [f["test"] for f in tests["failures"]]
        if failed:
            found.append(f"{len(failed)} tests failed or could not be collected: {', '.join(failed[:10])}")
        elif tests["pytest_exit_code"] not in (0, 5) and tests["stopped_after_seconds"] is None:
            found.append(f"pytest stopped with exit code {tests['pytest_exit_code']} (see node-check.log)")
    for run in result.get("runs", []):
        for row in run["rows"]:
            if "error" in row or row.get("oom"):
                found.append(f"fit {row['job']}: {row.get('error', 'out of memory')}")
    return found


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m longdoc.bench.node_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of node-check.json and node-check.log")
    p.add_argument("--profile", default="gpu", help="the profile whose shapes the fits take")
    p.add_argument("--minutes", type=float, default=8.0, help="no stage starts after this (default 8)")
    p.add_argument("--tests-minutes", type=float, default=4.0, help="the unit tests are stopped after this")
    p.add_argument("--tests", nargs="*", default=list(TEST_PATHS), help="test paths (none: no tests)")
    p.add_argument("--test-workers", type=int, default=0, help="pytest-xdist processes (0: one process)")
    p.add_argument("--jobs", nargs="*", default=None, help="longdoc.bench.training jobs (default: all)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per fit")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a training argument")
    p.add_argument("--backbone", default="", help="another backbone than the profile's (a name or directory)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu"))
    p.add_argument("--force", action="store_true", help="replace an earlier check's files in --out")
    return p


def main(argv: list[str] | None = None) -> dict:
    import yaml

    from longdoc.bench import training
    from longdoc.bench.gpu_hours import MEASUREMENTS, load_prices, profile_path
    from longdoc.experiments.backbones import backbone_path
    from longdoc.experiments.profiles import load_profile
    from longdoc.models.backbone import resolve_backbone

    args = parser().parse_args(argv)
    started = time.monotonic()
    deadline = started + 60 * args.minutes
    jobs = list(training.DEFAULT_JOBS) if args.jobs is None else args.jobs
    for job in jobs:
        training.check_job(job)  # bad input is refused before anything runs
    profile = load_profile(profile_path(args.profile))
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        if not hasattr(training.parser().parse_args([]), name) or not value:
            raise SystemExit(f"node_check: --set {item}: expected NAME=VALUE with a longdoc.bench.training argument")
        overrides[name] = yaml.safe_load(value)
    if (args.out / "node-check.json").exists() and not args.force:
        raise SystemExit(f"node_check: {args.out} holds an earlier check (another --out, or --force to replace it)")
    backbone = resolve_backbone(backbone_path(args.backbone or profile["backbone"]))
    fit_args = training_arguments(
        profile, backbone, steps=args.steps, warmup=args.warmup, device=args.device, **overrides
    )
    args.out.mkdir(parents=True, exist_ok=True)
    log_path, json_path = args.out / "node-check.log", args.out / "node-check.json"
    log_path.write_text("")

    def log(line: str) -> None:
        line = f"[node-check {time.strftime('%H:%M:%S')}] {line}"
        print(line, flush=True)
        with open(log_path, "a") as handle:
            handle.write(line + "\n")

    result = {"command": "python -m longdoc.bench.node_check " + " ".join(argv if argv is not None else sys.argv[1:])}

    def save() -> None:
        result["seconds"] = round(time.monotonic() - started, 1)
        with atomic_write(json_path) as handle:
            handle.write(json.dumps(result, indent=1, default=str) + "\n")

    result["environment"] = environment()
    log(f"environment: {json.dumps(result['environment'])}")
    save()
    if args.tests:
        seconds = max(1.0, min(60 * args.tests_minutes, deadline - time.monotonic()))
        log(f"unit tests {' '.join(args.tests)} (stopped after {seconds:.0f} s)")
        result["tests"] = run_tests(args.tests, seconds, log_path, args.test_workers)
        log(f"unit tests: {result['tests']['counts']} in {result['tests']['seconds']} s")
        save()
    header, rows = run_fits(fit_args, jobs, deadline, log)
    hidden = fit_args.hidden
    result["runs"] = [{"name": f"node check at the {args.profile} profile's shapes", "header": header, "rows": rows}]
    result["estimate"] = {"measurements": MEASUREMENTS.relative_to(REPO_ROOT).as_posix(), "hidden": hidden, "rows": []}
    try:
        prices = load_prices(MEASUREMENTS, hidden)
    except ValueError as error:  # a backbone of a width never measured: nothing to compare with
        result["estimate"]["not_compared"] = str(error)
    else:
        result["estimate"]["rows"] = [
            estimated_row(row, header["shape"], prices) for row in rows if not {"skipped", "error"} & set(row)
        ]
    for row in result["estimate"]["rows"]:
        log(f"estimate {row['job']}: ratio {row['ratio']}")
    result["problems"] = problems(result)
    save()
    for problem in result["problems"]:
        log(f"problem: {problem}")
    log(f"done in {result['seconds']} s: {json_path}")
    return result


if __name__ == "__main__":
    sys.exit(1 if main()["problems"] else 0)
