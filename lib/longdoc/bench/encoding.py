"""Corpus encoding throughput against sentence-transformers on the same segments (a benchmark that
prints figures; nothing here is a timed test).

``python -m longdoc.bench.encoding`` cuts the first ``--documents`` documents of ``manpages`` into
MaxP segments, encodes them with :meth:`longdoc.models.biencoder.BiEncoder.encode_corpus` (token-budget
batches, mean pooling, fp32) and with sentence-transformers' ``encode`` of the packaged
all-MiniLM-L6-v2 (the same weights and pooling, length-sorted batches of ``--batch-size`` texts; its
inputs are the segments decoded back to text, so it also pays for tokenization), alternately, and
prints the median times and their ratio (the goal: at most 1.05).
"""

from __future__ import annotations

import argparse
import statistics
import time


def compare(
    documents: int = 300, segment_length: int = 256, max_segments: int = 4, batch_size: int = 32, repeats: int = 3
) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    from longdoc.data import load_dataset
    from longdoc.models.backbone import resolve_backbone
    from longdoc.models.biencoder import EncoderConfig, MaxP
    from longdoc.text.segments import SegmentedCorpus

    data = load_dataset("manpages")
    model = MaxP(EncoderConfig(segment_length=segment_length, max_segments=max_segments, pooling="mean"))
    ids, texts = data.doc_ids[:documents], data.texts[:documents]
    corpus = SegmentedCorpus.build(model.tokenizer, ids, texts, segment_length, max_segments)
    segments = [model.tokenizer.decode(s) for doc in corpus.segments for s in doc]
    reference = SentenceTransformer(resolve_backbone("minilm"), device="cpu")
    reference.max_seq_length = segment_length
    ours_times, theirs_times = [], []
    with torch.inference_mode():
        model.encode_corpus(corpus, max_tokens=batch_size * segment_length, progress=False)  # warm-up
        reference.encode(segments[:batch_size], batch_size=batch_size)
        for _ in range(repeats):
            start = time.perf_counter()
            model.encode_corpus(corpus, max_tokens=batch_size * segment_length, progress=False)
            ours_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            reference.encode(segments, batch_size=batch_size, convert_to_numpy=True)
            theirs_times.append(time.perf_counter() - start)
    ours, theirs = statistics.median(ours_times), statistics.median(theirs_times)
    return {
        "documents": documents,
        "segments": corpus.num_segments,
        "threads": torch.get_num_threads(),
        "longdoc_s": round(ours, 2),
        "sentence_transformers_s": round(theirs, 2),
        "ratio": round(ours / theirs, 3),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--segment-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result = compare(args.documents, args.segment_length, batch_size=args.batch_size, repeats=args.repeats)
    print(result)
    return result


if __name__ == "__main__":
    main()
