"""SMITH's reason for the hierarchy, as a benchmark that prints figures (nothing here is a timed test).

``python -m longdoc.bench.smith`` encodes random batches of documents of growing length with a flat
BERT over all their tokens (MatchBERT's tower, ``BERT-Document`` of :mod:`longdoc.bench.efficiency`)
and with SMITH over the same tokens cut into blocks of ``--block`` (sentence level: all ``--layers``
layers; document level: 3 layers), and prints encode time and peak memory per batch and their ratios
SMITH ÷ MatchBERT (section 4.1.3: attention memory falls by a factor of about L_s² for long inputs).
Random weights of the given size; on a CPU every measurement runs in a fresh process (peak memory).
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None):
    import pandas as pd

    from longdoc.bench.efficiency import measure_all

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--block", type=int, default=32, help="SMITH's block length L_s")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument(
        "--attention",
        default="sdpa",
        choices=("sdpa", "eager"),
        help="eager materialises the attention matrices (the memory the paper's section 4.1.3 counts)",
    )
    parser.add_argument("--no-isolate", action="store_true", help="CPU: time only, in this process")
    args = parser.parse_args(argv)
    rows = measure_all(
        ["BERT-Document", "SMITH"],
        isolate=not args.no_isolate,
        length=args.lengths,
        block_size=args.block,
        batch=args.batch,
        hidden=args.hidden,
        layers=args.layers,
        heads=args.heads,
        repeats=args.repeats,
        device=args.device,
        attention=args.attention,
    )
    table = rows.pivot(index="length", columns="model", values=["time_ms", "memory_gib"])
    out = pd.DataFrame(
        {
            "MatchBERT ms": table["time_ms"]["BERT-Document"],
            "SMITH ms": table["time_ms"]["SMITH"],
            "time SMITH ÷ MatchBERT": table["time_ms"]["SMITH"] / table["time_ms"]["BERT-Document"],
            "MatchBERT GiB": table["memory_gib"]["BERT-Document"],
            "SMITH GiB": table["memory_gib"]["SMITH"],
            "memory SMITH ÷ MatchBERT": table["memory_gib"]["SMITH"] / table["memory_gib"]["BERT-Document"],
        }
    )
    print(
        f"device {rows['device'].iloc[0]}, {rows['threads'].iloc[0]} threads, batch {args.batch}, hidden {args.hidden}, "
        f"{args.layers} layers (SMITH: + 3 document layers), blocks of {args.block}, {args.attention} attention"
    )
    print(out.round(3).to_string())
    return out


if __name__ == "__main__":
    main()
