"""NCI's decoding costs as a benchmark that prints ratios (nothing here is a timed test).

``python -m longdoc.bench.nci`` builds an NCI model of random weights (a BERT-style encoder of
``--hidden``/``--layers``, ``--decoder-layers`` decoder and ``--adaptor-layers`` PAWA layers) over
random identifiers of ``--documents`` documents (k = c = ``--k``; the paper: 109,739 documents,
k = c = 30), and prints the median seconds per query and these ratios:

- **constrained ÷ unconstrained** beam search of the same model (the prefix tree's cost; goal ≤ 1.2);
- **batched ÷ one query at a time** (per query; below 1 when batching pays);
- **NCI ÷ FirstP + FAISS**: NCI's latency for one query against encoding that query with an encoder of
  the same size and searching a flat FAISS index of ``--documents`` vectors.

Latency is one query at a time; throughput is ``--batch`` queries per call.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _median_seconds(call, repeats: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def build_random(
    hidden: int, layers: int, heads: int, decoder_layers: int, adaptor_layers: int, documents: int, k: int, device: str
):
    import torch
    from transformers import BertConfig, BertModel

    from longdoc.index.semantic_ids import IdTokenizer, random_ids
    from longdoc.models.backbone import load_tokenizer
    from longdoc.models.nci import NciConfig, NciModel

    torch.manual_seed(0)
    encoder = BertModel(
        BertConfig(
            hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * hidden
        ),
        add_pooling_layer=False,
    )
    identifiers = random_ids(documents, k, k, seed=0)
    tokenizer = IdTokenizer.fit(identifiers)
    config = NciConfig(
        backbone="random",
        vocab_size=tokenizer.vocab_size,
        max_id_length=tokenizer.depth + 1,
        decoder_layers=decoder_layers,
        adaptor_layers=adaptor_layers,
        query_length=32,
    )
    model = NciModel.build(config, encoder, load_tokenizer("minilm")).to(device).eval()
    return model, identifiers, tokenizer


def main(argv: list[str] | None = None):
    import numpy as np
    import pandas as pd
    import torch

    from longdoc.index.dense import DenseIndex
    from longdoc.index.nci_retriever import DecodingConfig, NciRetriever

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=20000)
    parser.add_argument("--k", type=int, default=30, help="k = c of the identifiers")
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--decoder-layers", type=int, default=2)
    parser.add_argument("--adaptor-layers", type=int, default=2)
    parser.add_argument("--beams", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    args = parser.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    model, identifiers, tokenizer = build_random(
        args.hidden, args.layers, args.heads, args.decoder_layers, args.adaptor_layers, args.documents, args.k, device
    )
    doc_ids = [f"d{i}" for i in range(args.documents)]
    words = [
        "open",
        "file",
        "socket",
        "signal",
        "thread",
        "memory",
        "process",
        "network",
        "print",
        "time",
        "clock",
        "read",
    ]
    rng = np.random.default_rng(0)
    queries = [" ".join(rng.choice(words, 8)) for _ in range(args.batch)]
    index = DenseIndex(args.hidden, use_gpu=device == "cuda")
    index.add(rng.standard_normal((args.documents, args.hidden)).astype(np.float32))

    def firstp_one() -> None:
        inputs = model.query_inputs(queries[:1])
        with torch.no_grad():
            vector = model.encode(inputs["input_ids"].to(device), inputs["attention_mask"].to(device))[:, 0]
        index.search(vector.float().cpu().numpy(), 100)

    firstp = _median_seconds(firstp_one, args.repeats)
    rows = []
    for beam in args.beams:
        seconds = {}
        for constrained in (True, False):
            for batch in (1, args.batch):
                retriever = NciRetriever(
                    model,
                    doc_ids,
                    identifiers,
                    tokenizer,
                    DecodingConfig(beam_size=beam, constrained=constrained, batch_size=batch),
                )
                chunk = {f"q{i}": q for i, q in enumerate(queries[:batch])}
                seconds[constrained, batch] = (
                    _median_seconds(lambda r=retriever, c=chunk, b=beam: r.search(c, b), args.repeats) / batch
                )
        rows.append(
            {
                "beam": beam,
                "latency ms (1 query)": 1000 * seconds[True, 1],
                f"throughput q/s (batch {args.batch})": 1 / seconds[True, args.batch],
                "constrained ÷ unconstrained (1 query)": seconds[True, 1] / seconds[False, 1],
                f"constrained ÷ unconstrained (batch {args.batch})": seconds[True, args.batch]
                / seconds[False, args.batch],
                "batched ÷ one at a time (per query)": seconds[True, args.batch] / seconds[True, 1],
                "NCI ÷ FirstP + FAISS (latency)": seconds[True, 1] / firstp,
            }
        )
    out = pd.DataFrame(rows).set_index("beam")
    print(
        f"device {device}, {torch.get_num_threads()} threads; encoder {args.layers} x {args.hidden}, decoder "
        f"{args.decoder_layers}, PAWA {args.adaptor_layers}; {args.documents} documents, identifier depth "
        f"{tokenizer.depth}, vocabulary {tokenizer.vocab_size}; FirstP + FAISS flat: {1000 * firstp:.1f} ms per query"
    )
    print(out.round(3).to_string())
    return out


if __name__ == "__main__":
    main()
