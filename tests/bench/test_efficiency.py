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
