"""The node check (longdoc.bench.node_check), run here on the CPU at tiny shapes: what it records, how it
counts the tests, its deadline, and that the estimator reads its fits back."""

import json
import textwrap

import pytest

from longdoc.bench import gpu_hours, node_check

TINY_SHAPES = {
    "batch": 2, "block": 16, "pair_batch": 2, "pretrain_batch": 2, "nci_batch": 2, "encode_docs": 4,
    "sentence_blocks": 4, "sentence_block": 16, "sentence_layers": 1, "nci_documents": 40,
    "matchbert_length": 32, "cache_size": 4,
}  # fmt: skip


def tiny_arguments(out, backbone, *extra):
    sets = [f"--set={name}={value}" for name, value in TINY_SHAPES.items()]
    return [
        "--out",
        str(out),
        "--backbone",
        backbone,
        "--steps",
        "1",
        "--warmup",
        "1",
        "--device",
        "cpu",
        *sets,
        *extra,
    ]


def test_test_outcomes_are_counted_as_they_come_and_a_slow_run_is_stopped(tmp_path):
    (tmp_path / "test_some.py").write_text(
        textwrap.dedent("""
        import pytest, time
        def test_passes(): pass
        def test_fails(): assert 0, "wrong"
        @pytest.mark.skip
        def test_skipped(): pass
        """)
    )
    (tmp_path / "test_unimportable.py").write_text("import no_such_module_here\n")
    result = node_check.run_tests([tmp_path], 120, tmp_path / "log.txt")
    assert result["counts"] == {"passed": 1, "failed": 1, "skipped": 1, "error": 1}
    assert sorted(f["outcome"] for f in result["failures"]) == ["error", "failed"]
    assert "wrong" in next(f["message"] for f in result["failures"] if f["outcome"] == "failed")
    (tmp_path / "test_unimportable.py").unlink()
    (tmp_path / "test_slow.py").write_text("import time\ndef test_a(): pass\ndef test_b(): time.sleep(600)\n")
    result = node_check.run_tests([tmp_path / "test_slow.py"], 8, tmp_path / "log.txt")
    assert result["stopped_after_seconds"] == 8 and result["counts"] == {"passed": 1}  # what finished is kept


def test_problems_name_failed_tests_an_aborted_pytest_and_a_broken_fit():
    tests = {"failures": [{"test": "t.py::a"}], "pytest_exit_code": 1, "stopped_after_seconds": None}
    rows = [{"job": "nci", "error": "RuntimeError: x"}, {"job": "encode:MaxP", "oom": True}, {"job": "x"}]
    found = node_check.problems({"tests": tests, "runs": [{"rows": rows}]})
    assert found == [
        "1 tests failed or could not be collected: t.py::a",
        "fit nci: RuntimeError: x",
        "fit encode:MaxP: out of memory",
    ]
    aborted = {"failures": [], "pytest_exit_code": 1, "stopped_after_seconds": None}  # as the H200 xdist run
    assert node_check.problems({"tests": aborted}) == ["pytest stopped with exit code 1 (see node-check.log)"]


def test_the_estimate_beside_a_measured_step_is_the_price_of_its_items():
    prices = gpu_hours.load_prices(gpu_hours.MEASUREMENTS, gpu_hours.MINILM_HIDDEN)
    shape = {"block": 128, "blocks": 4, "batch": 64, "pair_batch": 64, "pretrain_batch": 32, "nci_batch": 128}
    row = node_check.estimated_row({"job": "retrieval:MaxP", "seconds_per_step": 0.1, "batch": 64}, shape, prices)
    by_hand = prices["retrieval:MaxP"].per_item(512) * 64
    assert row["estimated_seconds_per_step"] == pytest.approx(by_hand)
    assert row["ratio"] == pytest.approx(0.1 / by_hand)
    encode = node_check.estimated_row({"job": "encode:MaxP", "documents_per_second": 100.0}, shape, prices)
    assert encode["estimated_documents_per_second"] == pytest.approx(1 / prices["encode:MaxP"].per_item(512))


@pytest.mark.slow
def test_the_check_writes_its_json_and_log_and_the_estimator_reads_its_fits(tmp_path, tiny_backbone):
    out = tmp_path / "check"
    jobs = ["retrieval:SeDR", "matching:SMITH", "pretrain:Longtriever", "nci", "encode:MaxP"]
    result = node_check.main(
        tiny_arguments(out, tiny_backbone, "--tests", "tests/losses/test_contrastive.py", "--jobs", *jobs)
    )
    written = json.loads((out / "node-check.json").read_text())
    assert written["environment"]["device"] == "cpu" and written["environment"]["torch"]
    assert written["tests"]["counts"]["passed"] >= 1 and not written["tests"]["failures"]
    rows = written["runs"][0]["rows"]
    assert [r["job"] for r in rows] == jobs and all("seconds_per_step" in r for r in rows[:4])
    assert "not_compared" in written["estimate"]  # a tiny backbone's width was never measured
    assert "fit nci" in (out / "node-check.log").read_text()
    assert gpu_hours.load_prices(out / "node-check.json", hidden=result["estimate"]["hidden"]).keys() == set(jobs)
    assert result["problems"] == []
    with pytest.raises(SystemExit, match="holds an earlier check"):  # the committed node's files are kept
        node_check.main(tiny_arguments(out, tiny_backbone, "--tests", "--jobs", "nci"))


def test_bad_input_is_refused_before_anything_runs_and_the_deadline_starts_no_fit(tmp_path, tiny_backbone):
    with pytest.raises(ValueError, match="unknown job 'retrieval:Nope'"):
        node_check.main(tiny_arguments(tmp_path / "bad", tiny_backbone, "--jobs", "retrieval:Nope"))
    with pytest.raises(SystemExit, match="--set nonsense=1"):
        node_check.main(tiny_arguments(tmp_path / "bad", tiny_backbone, "--set", "nonsense=1"))
    assert not (tmp_path / "bad").exists()
    result = node_check.main(tiny_arguments(tmp_path / "late", tiny_backbone, "--minutes", "0", "--tests"))
    assert {r.get("skipped") for r in result["runs"][0]["rows"]} == {"deadline"} and "tests" not in result
