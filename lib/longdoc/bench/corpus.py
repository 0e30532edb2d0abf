"""Paper-scale corpora in bounded memory: resident memory and time of loading, tokenizing, reading and
encoding a generated corpus of long documents, memory-mapped against in memory (a benchmark that prints
figures; nothing here is a timed test).

``python -m longdoc.bench.corpus --documents 25000 50000 100000`` writes a ``corpus.jsonl`` of that many
generated documents (words drawn from the backbone's vocabulary, lengths log-normal around MS MARCO's
mean of about 1,100 words), then runs each stage in a fresh process and reports its wall time and peak
resident memory (``ru_maxrss``, the import of torch and transformers included):

- ``store``: :func:`~longdoc.data.corpus_store.write_corpus_store` reads ``corpus.jsonl`` into a store;
- ``tokenize``: :meth:`~longdoc.text.segments.SegmentedCorpus.build` cuts every document into the
  papers' 4 x 512 blocks into a token store (``directory=``);
- ``read``: every document's blocks read in corpus order, as the encoders and samplers read them;
- ``encode``: a slice (``--encode``) encoded by MaxP over MiniLM at 4 x 512 (seconds per document here);
- ``in-memory`` (only up to ``--in-memory-up-to`` documents): the same corpus read into a dict and
  tokenized into Python lists, as before the store;
- ``bm25``: :class:`~longdoc.index.bm25.BM25Retriever` indexes the store on every core, then searches
  ``--bm25-queries`` queries of generated words for their top 100 (the seconds of each, and the cores).

Tokenizing and BM25 run on the CPU; the GPU-hour planner prices them in core-seconds per document (and,
for a search, per query and corpus document) from this file (:mod:`longdoc.bench.gpu_hours`).

The goal (issue 23): resident memory flat as the corpus grows and at most 2 GB at 100k documents.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

SEGMENT_LENGTH, MAX_SEGMENTS = 512, 4  # Longtriever's and SeDR's MS MARCO shape
MEAN_WORDS = 1100  # MS MARCO documents: 22 GB over 3.2M documents, about 6.9 KB or 1,100 words each


def generate(path: Path, documents: int, seed: int = 0) -> None:
    """``documents`` rows of ``corpus.jsonl``: whole words of the backbone's vocabulary, seeded."""
    import numpy as np

    from longdoc.models.backbone import load_tokenizer

    vocabulary = np.array([w for w in load_tokenizer("minilm").vocab if w.isalpha() and len(w) > 1])
    rng = np.random.default_rng(seed)
    lengths = np.maximum(20, rng.lognormal(np.log(MEAN_WORDS) - 0.5, 1.0, documents)).astype(int)
    with open(path, "w", encoding="utf-8") as handle:
        for number, length in enumerate(lengths):
            words = vocabulary[rng.integers(0, len(vocabulary), length)]
            row = {"_id": f"D{number}", "title": " ".join(words[:8]), "text": " ".join(words[8:])}
            handle.write(json.dumps(row) + "\n")


BM25_QUERY_WORDS = 6  # words per generated query (MS MARCO's queries average about six)


def bm25_stage(folder: Path, queries: int) -> dict:
    """Index the store with BM25 on every core, then search ``queries`` generated queries for 100 each."""
    import numpy as np

    from longdoc.data.corpus_store import CorpusStore
    from longdoc.index.bm25 import BM25Retriever, _cores, search_threads

    store = CorpusStore(folder / "store")
    started = time.perf_counter()
    retriever = BM25Retriever().index(store.ids, store.full_texts)
    indexed = time.perf_counter() - started
    rng = np.random.default_rng(1)
    words = [store.full_texts[int(i)].split() for i in rng.integers(0, len(store.ids), queries)]
    asked = {f"q{n}": " ".join(rng.choice(w, min(BM25_QUERY_WORDS, len(w)))) for n, w in enumerate(words)}
    started = time.perf_counter()
    retriever.search(asked, 100)
    searched = time.perf_counter() - started
    return {
        "index_seconds": round(indexed, 2),
        "search_seconds": round(searched, 2),
        "queries": queries,
        "cores": _cores(),
        "search_threads": search_threads(queries, len(store.ids)),
    }


def stage(name: str, folder: Path, encode: int, bm25_queries: int = 1000) -> dict:
    """One stage, in this process (called by :func:`measure` in a fresh one)."""
    from longdoc.data.corpus_store import CorpusStore, write_corpus_store
    from longdoc.models.backbone import load_tokenizer
    from longdoc.text.segments import SegmentedCorpus

    tokenizer = load_tokenizer("minilm")
    start = time.perf_counter()
    out = {}
    if name == "store":
        write_corpus_store(folder / "corpus.jsonl", folder / "store")
    elif name == "tokenize":
        shutil.rmtree(folder / "tokens", ignore_errors=True)  # an earlier run's store would be read, not built
        start = time.perf_counter()
        store = CorpusStore(folder / "store")
        corpus = SegmentedCorpus.build(
            tokenizer, store.ids, store.full_texts, SEGMENT_LENGTH, MAX_SEGMENTS, directory=folder / "tokens"
        )
        out["segments"] = corpus.num_segments
        out["cores"] = 1 if os.environ.get("TOKENIZERS_PARALLELISM", "").lower() in ("false", "0") else os.cpu_count()
    elif name == "read":
        store = CorpusStore(folder / "store")
        corpus = SegmentedCorpus.build(
            tokenizer, store.ids, store.full_texts, SEGMENT_LENGTH, MAX_SEGMENTS, directory=folder / "tokens"
        )
        out["tokens"] = sum(len(s) for i in range(len(corpus)) for s in corpus.segments[i])
    elif name == "encode":
        import torch

        from longdoc.models.biencoder import EncoderConfig, MaxP

        store = CorpusStore(folder / "store")
        corpus = SegmentedCorpus.build(
            tokenizer, store.ids, store.full_texts, SEGMENT_LENGTH, MAX_SEGMENTS, directory=folder / "tokens"
        )
        model = MaxP(EncoderConfig(segment_length=SEGMENT_LENGTH, max_segments=MAX_SEGMENTS, pooling="mean"))
        from longdoc.experiments.families.retrieval import corpus_subset

        part = corpus_subset(corpus, list(corpus.doc_ids[:encode]))
        start = time.perf_counter()
        model.encode_corpus(part, progress=False)
        out.update(documents_encoded=encode, threads=torch.get_num_threads())
    elif name == "bm25":
        out.update(bm25_stage(folder, bm25_queries))
    elif name == "in-memory":
        from longdoc.data.beir import read_corpus

        corpus = read_corpus(folder / "corpus.jsonl")
        texts = [d.full_text for d in corpus.values()]
        segmented = SegmentedCorpus.build(tokenizer, list(corpus), texts, SEGMENT_LENGTH, MAX_SEGMENTS)
        out["segments"] = segmented.num_segments
    else:
        raise ValueError(f"unknown stage {name!r}")
    out["seconds"] = round(time.perf_counter() - start, 2)
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def measure(name: str, folder: Path, encode: int, bm25_queries: int = 1000) -> dict:
    """:func:`stage` in a fresh process, so that its peak resident memory is its own."""
    command = [
        sys.executable,
        "-m",
        "longdoc.bench.corpus",
        "--stage",
        name,
        "--folder",
        str(folder),
        "--encode",
        str(encode),
        "--bm25-queries",
        str(bm25_queries),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(finished.stdout.strip().splitlines()[-1])


def baseline_rss() -> int:
    """Peak resident MiB of a process that only imports what the stages import (torch, transformers)."""
    code = (
        "import resource, torch, transformers, longdoc.text.segments, longdoc.data.corpus_store; "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)"
    )
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


STAGES = ("store", "tokenize", "read", "encode", "bm25")


def run(sizes: list[int], workdir: Path, encode: int, in_memory_up_to: int, bm25_queries: int = 1000) -> dict:
    rows = []
    for documents in sizes:
        folder = workdir / f"corpus-{documents}"
        folder.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        if not (folder / "corpus.jsonl").exists():
            generate(folder / "corpus.jsonl", documents)
        row = {
            "documents": documents,
            "generate_seconds": round(time.perf_counter() - start, 1),
            "corpus_mib": round((folder / "corpus.jsonl").stat().st_size / 2**20),
        }
        for name in STAGES:
            row[name] = measure(name, folder, encode, bm25_queries)
            print(documents, name, row[name], flush=True)
        if documents <= in_memory_up_to:
            row["in-memory"] = measure("in-memory", folder, encode)
            print(documents, "in-memory", row["in-memory"], flush=True)
        row["token_store_mib"] = round(sum(p.stat().st_size for p in (folder / "tokens").iterdir()) / 2**20)
        rows.append(row)
    return {
        "baseline_rss_mib": baseline_rss(),
        "segment_length": SEGMENT_LENGTH,
        "max_segments": MAX_SEGMENTS,
        "rows": rows,
    }


def per_million(result: dict) -> dict:
    """Seconds per million documents of each stage, from the largest corpus (encoding from its slice)."""
    row = result["rows"][-1]
    scale = 1e6 / row["documents"]
    out = {name: round(row[name]["seconds"] * scale) for name in ("store", "tokenize", "read")}
    out["encode_cpu"] = round(row["encode"]["seconds"] * 1e6 / row["encode"]["documents_encoded"])
    return out


def table(result: dict) -> str:
    lines = ["| documents | corpus MiB | stage | seconds | peak RSS MiB |", "|---|---|---|---|---|"]
    for row in result["rows"]:
        for name in (*STAGES, "in-memory"):
            if name in row:
                lines.append(
                    f"| {row['documents']:,} | {row['corpus_mib']:,} | {name} | {row[name]['seconds']:,} | "
                    f"{row[name]['peak_rss_mib']:,} |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[25_000, 50_000, 100_000])
    parser.add_argument("--workdir", type=Path, default=Path("data/cache/bench-corpus"))
    parser.add_argument("--encode", type=int, default=64, help="documents of the encoded slice")
    parser.add_argument("--in-memory-up-to", type=int, default=25_000)
    parser.add_argument("--bm25-queries", type=int, default=1000, help="queries the bm25 stage searches")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stage:
        print(json.dumps(stage(args.stage, args.folder, args.encode, args.bm25_queries)))
        return None
    result = run(sorted(args.documents), args.workdir, args.encode, args.in_memory_up_to, args.bm25_queries)
    result["seconds_per_million_documents"] = per_million(result)
    print(table(result))
    print("seconds per million documents:", result["seconds_per_million_documents"])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
