import math

import pytest
import torch

from longdoc.bench.efficiency import MODELS, Shape, build, measure


def test_shape_checks_its_fields():
    with pytest.raises(ValueError, match="model must be"):
        Shape("XLNet")
    with pytest.raises(ValueError, match="multiple of block_size"):
        Shape("Longtriever", length=100, block_size=32)
    with pytest.raises(ValueError, match="attention"):
        Shape("BERT-Document", attention="flash")


@pytest.mark.parametrize("model", MODELS)
def test_every_model_encodes_the_batch(model):
    shape = Shape(model, batch=2, length=64, block_size=32, hidden=32, layers=1, heads=2, repeats=1)
    net, encode = build(shape, torch.device("cpu"))
    with torch.inference_mode():
        out = encode()
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out
    assert hidden.shape[0] == 2 and hidden.shape[-1] == 32


def test_in_process_cpu_measurement_reports_time_only():
    row = measure(Shape("Longtriever", batch=1, length=64, block_size=32, hidden=32, layers=1, heads=2, repeats=1), isolate=False)
    assert row["time_ms"] > 0 and math.isnan(row["memory_gib"]) and row["device"] == "cpu"


def test_isolated_cpu_measurement_sees_the_attention_matrices_grow():
    """Eager attention materialises heads x L x L scores per layer: 8 x 2048² floats = 128 MiB at
    2,048 tokens, 16 times the 8 MiB at 512, in fresh worker processes (the peak is each one's own)."""
    rows = [measure(Shape("BERT-Document", batch=1, length=length, block_size=length, hidden=32, layers=1, heads=8,
                          repeats=1, attention="eager"))
            for length in (512, 2048)]
    small, large = (row["memory_gib"] for row in rows)
    assert large > 0.1 and large > 4 * small, (small, large)


def test_a_failure_in_the_worker_process_names_the_shape():
    with pytest.raises(RuntimeError, match="(?s)BERT-Document.*failed in its worker.*hidden size"):
        measure(Shape("BERT-Document", batch=1, length=64, block_size=64, hidden=30, heads=4, layers=1, repeats=1))
