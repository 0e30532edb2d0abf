import math

import pytest
import torch

from longdoc.bench.efficiency import (
    MODELS,
    Shape,
    against_reference,
    bigbird_attention,
    build,
    eager_fits,
    flops,
    main,
    measure,
    measure_here,
)


def test_shape_checks_its_fields():
    with pytest.raises(ValueError, match="model must be"):
        Shape("GPT")
    with pytest.raises(ValueError, match="precision"):
        Shape("Longtriever", precision="fp16")
    with pytest.raises(ValueError, match="multiple of block_size"):
        Shape("Longtriever", length=100, block_size=32)
    with pytest.raises(ValueError, match="attention"):
        Shape("BERT-Document", attention="flash")
    with pytest.raises(ValueError, match="compile must be one of"):
        Shape("Longtriever", compile="fast")


def test_a_compiled_measurement_times_the_compiled_forward_and_counts_the_eager_flops(monkeypatch):
    compiled = []

    def fake_compile(function, mode=None):
        def wrapped():
            compiled.append(mode)
            return function()

        return wrapped

    monkeypatch.setattr(torch, "compile", fake_compile)
    tiny = dict(batch=2, length=64, block_size=32, hidden=32, layers=2, heads=2, repeats=2, device="cpu")
    eager = measure_here(Shape("Longtriever", **tiny), memory=False)
    graphs = measure_here(Shape("Longtriever", compile="reduce-overhead", **tiny), memory=False)
    assert compiled == ["reduce-overhead"] * 5  # three warm-up calls, then the two timed ones
    assert graphs["flops"] == eager["flops"] > 0 and graphs["compile"] == "reduce-overhead"


@pytest.mark.parametrize("model", MODELS)
def test_every_model_encodes_the_batch(model):
    shape = Shape(model, batch=2, length=64, block_size=32, hidden=32, layers=1, heads=2, repeats=1)
    net, encode = build(shape, torch.device("cpu"))
    with torch.inference_mode():
        out = encode()
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
    assert hidden.shape[0] == 2 and hidden.shape[-1] == 32


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_in_process_cpu_measurement_reports_time_only(precision):
    row = measure(
        Shape(
            "Longtriever",
            batch=1,
            length=64,
            block_size=32,
            hidden=32,
            layers=1,
            heads=2,
            repeats=1,
            precision=precision,
            device="cpu",
        ),
        isolate=False,
    )
    assert row["time_ms"] > 0 and math.isnan(row["memory_gib"]) and math.isnan(row["total_memory_gib"])
    assert row["device"] == "cpu" and row["precision"] == precision


def test_flops_are_counted_as_bert_arithmetic():
    """Per layer and document of n tokens: 24·n·d² for the projections and feed-forward, 4·n²·d for
    the two attention products (multiply and add counted apart)."""
    n, d, batch = 64, 32, 3
    assert flops(Shape("BERT-Document", batch=batch, length=n, block_size=n, hidden=d, layers=1, heads=2)) == batch * (
        24 * n * d * d + 4 * n * n * d
    )
    blocks = flops(Shape("Longtriever", batch=batch, length=4 * 16, block_size=16, hidden=d, layers=1, heads=2))
    assert blocks < batch * (
        24 * n * d * d + 4 * n * n * d
    )  # 4 blocks of 16: less attention, a small inter-block layer


def test_ratios_against_the_reference_and_the_compute_floor():
    import pandas as pd

    rows = pd.DataFrame(
        [
            {
                "model": "BERT-Document",
                "length": 512,
                "batch": 1,
                "attention": "sdpa",
                "time_ms": 100.0,
                "memory_gib": 1.0,
                "flops": 1000,
            },
            {
                "model": "Longtriever",
                "length": 512,
                "batch": 1,
                "attention": "sdpa",
                "time_ms": 90.0,
                "memory_gib": 0.5,
                "flops": 800,
            },
        ]
    )
    out = against_reference(rows).set_index("model")
    assert out.loc["Longtriever", "time ratio"] == pytest.approx(0.9) and out.loc["Longtriever", "FLOP ratio"] == 0.8
    assert out.loc["Longtriever", "× floor"] == pytest.approx(1.125) and out.loc["BERT-Document", "× floor"] == 1.0


def test_bigbird_and_eager_limits():
    assert bigbird_attention(704) == "original_full" and bigbird_attention(768) == "block_sparse"
    assert eager_fits(1, 4096, 12) and not eager_fits(1, 8192, 12)


def test_isolated_cpu_measurement_sees_the_attention_matrices_grow():
    """Eager attention materialises heads x L x L scores per layer: 8 x 2048² floats = 128 MiB at
    2,048 tokens, 16 times the 8 MiB at 512, in fresh worker processes (the peak is each one's own).
    The test asks for the growth (at least the 120 MiB of scores), not a ratio: at 512 tokens the
    process's peak-RSS noise is of the size of the scores themselves. The total also holds the
    weights (a 30k x 256 embedding: 30 MiB)."""
    rows = [
        measure(
            Shape(
                "BERT-Document",
                batch=1,
                length=length,
                block_size=length,
                hidden=256,
                layers=1,
                heads=8,
                repeats=1,
                attention="eager",
            )
        )
        for length in (512, 2048)
    ]
    small, large = (row["memory_gib"] for row in rows)
    assert large - small > 0.1 and large > 2 * small, (small, large)
    assert all(row["total_memory_gib"] > row["memory_gib"] + 0.02 for row in rows), rows


def test_a_failure_in_the_worker_process_names_the_shape():
    with pytest.raises(RuntimeError, match="(?s)BERT-Document.*failed in its worker.*hidden size"):
        measure(
            Shape(
                "BERT-Document",
                batch=1,
                length=64,
                block_size=64,
                hidden=30,
                heads=4,
                layers=1,
                repeats=1,
                device="cpu",
            )
        )


def test_every_model_is_built_on_the_requested_device():
    """XLNet makes its relative-attention weights with the legacy ``torch.FloatTensor``, which ignores
    the ``torch.device`` context; build() moves them (on a GPU the first forward pass failed)."""
    for model in MODELS:
        built, _ = build(
            Shape(model, batch=1, length=64, block_size=32, hidden=32, layers=1, heads=2), torch.device("meta")
        )
        assert {p.device.type for p in built.parameters()} == {"meta"}, model


def test_the_command_line_prints_and_writes_notebook_14s_tables(tmp_path, capsys):
    table3, curve = main(["--profile", "smoke", "--out", str(tmp_path)])
    assert set(table3.model) == set(MODELS) and (table3.attention == "eager").sum() == 2
    assert (tmp_path / "table3.csv").exists() and (tmp_path / "growth.csv").exists()
    assert "× floor" in capsys.readouterr().out and len(curve) >= len(MODELS)


def test_the_index_benchmark_compares_the_same_vectors():
    from longdoc.bench.index import compare

    result = compare(documents=200, queries=20, k=10, dim=16, repeats=1)
    assert result["vectors"] >= 200 and result["ratio"] > 0 and {"segment index s", "raw FAISS s"} <= set(result)


def test_a_readable_table_has_units_in_its_headers():
    import pandas as pd

    from longdoc.bench.efficiency import readable

    raw = pd.DataFrame(
        {"model": ["m"], "time_ms": [12.5], "memory_gib": [0.5], "parameters": [22_700_000], "flops": [125_627_793_408]}
    )
    shown = readable(raw)
    assert list(shown.columns) == ["model", "time (ms)", "memory (GiB)", "parameters (M)", "GFLOP"]
    assert shown.iloc[0]["parameters (M)"] == 22.7 and round(shown.iloc[0]["GFLOP"], 1) == 125.6
    assert "time_ms" in raw  # the records keep the raw columns
