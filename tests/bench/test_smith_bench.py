"""The SMITH speed benchmark runs at tiny sizes and reports its ratios (figures, not timed assertions)."""

import torch

from longdoc.bench.efficiency import Shape, build
from longdoc.bench.smith import main


def test_the_benchmark_prints_positive_ratios_at_tiny_sizes(capsys):
    table = main(
        [
            "--lengths",
            "64",
            "128",
            "--hidden",
            "32",
            "--layers",
            "2",
            "--heads",
            "2",
            "--batch",
            "2",
            "--repeats",
            "1",
            "--no-isolate",
        ]
    )
    assert list(table.index) == [64, 128] and (table["time SMITH ÷ MatchBERT"] > 0).all()
    assert "SMITH ÷ MatchBERT" in capsys.readouterr().out


def test_the_benchmarked_smith_reads_every_block_of_the_same_tokens():
    model, encode = build(
        Shape("SMITH", batch=2, length=128, block_size=32, hidden=32, layers=2, heads=2), torch.device("cpu")
    )
    assert len(model.document_encoder) == 3 and len(model.backbone.encoder.layer) == 2
    assert encode().shape == (2, 32)
