"""SeDR's speed ratios (a benchmark that prints figures; nothing here is a timed test).

``python -m longdoc.bench.sedr`` prints three ratios, each the median of ``--repeats`` alternating
measurements on this machine:

1. **encoding**: SeDR (the Segment-Interaction Transformer) ÷ MaxP over the same segments of the first
   ``--documents`` documents of ``manpages`` (goal ≤ 1.25: each segment attends to k − 1 more keys);
2. **training step**: one SeDR step (forward, loss, backward, optimizer step) with a full late cache of
   C = ``--cache`` instances ÷ the same step without it (goal ≤ 1.05), ``--batch`` queries with one
   positive and one hard negative each;
3. **segment index**: :mod:`longdoc.bench.index` (segment-index search ÷ raw FAISS, goal ≤ 1.2).

Weights are the packaged backbone (``--backbone``); shapes are the ``cpu`` profile's unless given.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _median_ratio(first, second, repeats: int) -> tuple[float, float, float]:
    """Median seconds of ``first()`` and ``second()`` (alternating, one warm-up each) and their ratio."""
    first(), second()
    a, b = [], []
    for _ in range(repeats):
        for run, times in ((first, a), (second, b)):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    ma, mb = statistics.median(a), statistics.median(b)
    return ma, mb, ma / mb


def encoding_ratio(
    documents: int = 300, segment_length: int = 64, segments: int = 4, backbone: str = "minilm", repeats: int = 3
) -> dict:
    import torch

    from longdoc.data import load_dataset
    from longdoc.models.biencoder import EncoderConfig, MaxP
    from longdoc.models.sedr import SeDR, SeDRConfig
    from longdoc.text.segments import SegmentedCorpus

    data = load_dataset("manpages")
    sedr = SeDR(SeDRConfig(backbone=backbone, segment_length=segment_length, max_segments=segments)).eval()
    maxp = MaxP(EncoderConfig(backbone=backbone, segment_length=segment_length, max_segments=segments)).eval()
    corpus = SegmentedCorpus.build(
        sedr.tokenizer, data.doc_ids[:documents], data.texts[:documents], segment_length, segments
    )
    with torch.inference_mode():
        s, m, ratio = _median_ratio(
            lambda: sedr.encode_corpus(corpus, progress=False),
            lambda: maxp.encode_corpus(corpus, progress=False),
            repeats,
        )
    return {
        "documents": documents,
        "segments": corpus.num_segments,
        "shape": f"{segments} x {segment_length}",
        "SeDR s": round(s, 3),
        "MaxP s": round(m, 3),
        "ratio": round(ratio, 3),
    }


def step_ratio(
    batch: int = 8,
    cache: int = 50,
    segment_length: int = 64,
    segments: int = 4,
    backbone: str = "minilm",
    repeats: int = 5,
) -> dict:
    """One training step with the late cache full ÷ without it, same inputs."""
    import torch

    from longdoc.data import load_dataset
    from longdoc.losses.late_cache import LateCacheNegatives
    from longdoc.models.sedr import SeDR, SeDRConfig
    from longdoc.text.segments import SegmentedCorpus
    from longdoc.train.loop import _pad_segments

    data = load_dataset("manpages")
    torch.manual_seed(0)
    model = SeDR(SeDRConfig(backbone=backbone, segment_length=segment_length, max_segments=segments))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    corpus = SegmentedCorpus.build(
        model.tokenizer, data.doc_ids[: 2 * batch], data.texts[: 2 * batch], segment_length, segments
    )
    queries = model.query_inputs(list(data.queries.values())[:batch])
    documents = model.doc_inputs(corpus.segments)  # B positives, then B hard negatives
    labels = torch.arange(batch)
    query_ids = [f"q{i}" for i in range(batch)]
    numbers = torch.arange(2 * batch)
    owner = torch.cat([torch.arange(batch), torch.arange(batch)])
    never_relevant = lambda qid: set()  # noqa: E731

    def loss_with(late: LateCacheNegatives):
        def step():
            q, docs, mask = model(queries, documents)
            docs, mask = _pad_segments(docs, mask, segments)
            loss = late(q, docs, mask, labels, query_ids, numbers, owner)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

        return step

    cached = LateCacheNegatives(cache, never_relevant, model.score)
    while len(cached) < cache:  # fill the queue with real (detached) instances first
        loss_with(cached)()
    with_cache, without, _ = _median_ratio(
        loss_with(cached), loss_with(LateCacheNegatives(0, never_relevant, model.score)), repeats
    )
    return {
        "batch": batch,
        "cache": cache,
        "shape": f"{segments} x {segment_length}",
        "with cache s": round(with_cache, 3),
        "without s": round(without, 3),
        "ratio": round(with_cache / without, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--segment-length", type=int, default=64)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cache", type=int, default=50)
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--index-documents", type=int, default=20_000)
    args = parser.parse_args()
    import torch

    from longdoc.bench.index import compare

    print(f"torch threads: {torch.get_num_threads()}")
    print(
        "encoding, SeDR / MaxP:",
        encoding_ratio(args.documents, args.segment_length, args.segments, args.backbone, args.repeats),
    )
    print(
        "training step, late cache / none:",
        step_ratio(args.batch, args.cache, args.segment_length, args.segments, args.backbone, args.repeats),
    )
    print("search, segment index / raw FAISS:", compare(args.index_documents, repeats=args.repeats))


if __name__ == "__main__":
    main()
