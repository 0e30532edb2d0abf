"""The MS MARCO converter in bounded memory: peak resident memory of ``python -m longdoc.data.convert
msmarco`` on generated files shaped as distributed (a benchmark that prints figures; nothing here is a
timed test).

``python -m longdoc.bench.convert_memory --gigabytes 0.25 1`` writes, for each size, a
``msmarco-docs.tsv.gz`` (``docid <TAB> url <TAB> title <TAB> body``, bodies of MS MARCO's mean length of
about 6.9 KB, gzip-compressed as distributed) with train queries and qrels judging every hundredth
document, converts it in a fresh process and reports the process's peak resident memory (``ru_maxrss``)
beside the input's size. ``--short-documents N`` adds a run of N documents of a few hundred bytes each: the
converter holds every document id (and its line), so that run, at MS MARCO's 3.2M documents, bounds the
part of memory that grows with the document count rather than the bytes.

The goal (issue 71): at most 1.5 GB for an input of 1 GB or more, and flat as the input grows.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEAN_BODY_BYTES = 6_900  # MS MARCO documents: 22 GB over 3.2M documents
GOAL_BYTES = 1.5e9


def _words(seed: int) -> str:
    """About 1 MB of text to cut bodies from (lowercase pseudo-words and punctuation)."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(5_000)]
    return " ".join(rng.choice(words) + ("." if rng.random() < 0.07 else "") for _ in range(170_000))


def generate(folder: Path, total_bytes: float, body_bytes: int = MEAN_BODY_BYTES, seed: int = 0) -> dict:
    """MS MARCO-shaped files in ``folder`` of about ``total_bytes`` of uncompressed documents: the documents
    (``.tsv.gz``), train queries (``.tsv``) and qrels (``qid 0 docid 1``) judging every hundredth document."""
    rng = random.Random(seed)
    text = _words(seed)
    written, documents = 0, 0
    with (
        gzip.open(folder / "msmarco-docs.tsv.gz", "wt", encoding="utf-8", compresslevel=1, newline="\n") as docs,
        open(folder / "queries.tsv", "w", encoding="utf-8") as queries,
        open(folder / "qrels.tsv", "w", encoding="utf-8") as qrels,
    ):
        while written < total_bytes:
            length = max(20, int(rng.lognormvariate(0, 0.8) * body_bytes * 0.73))
            start = rng.randrange(0, len(text) - length) if length < len(text) else 0
            body = text[start : start + length]
            doc_id = f"D{documents}"
            line = f"{doc_id}\thttp://example.org/{documents}\tDocument {documents}\t{body}\n"
            docs.write(line)
            written += len(line.encode())
            if documents % 100 == 0:
                queries.write(f"{documents}\t{body[:40].strip() or 'a query'}\n")
                qrels.write(f"{documents} 0 {doc_id} 1\n")
            documents += 1
    return {"documents": documents, "bytes": written}


def convert(folder: Path) -> dict:
    """Run the converter in a fresh process; its wall time and peak resident memory."""
    command = [
        sys.executable,
        "-m",
        "longdoc.data.convert",
        "msmarco",
        "--docs",
        str(folder / "msmarco-docs.tsv.gz"),
        "--split",
        f"train={folder / 'queries.tsv'},{folder / 'qrels.tsv'}",
        "--out",
        str(folder / "beir"),
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"the converter failed:\n{done.stderr}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB; the largest child so far: see main
    return {"seconds": seconds, "peak_bytes": peak * 1024, "output": done.stdout.splitlines()[0]}


def measure(total_bytes: float, body_bytes: int = MEAN_BODY_BYTES, scratch: Path | None = None) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="longdoc-convert-memory-", dir=scratch))
    try:
        facts = generate(folder, total_bytes, body_bytes)
        facts["compressed_bytes"] = (folder / "msmarco-docs.tsv.gz").stat().st_size
        return {**facts, **convert(folder)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _row(label: str, facts: dict) -> str:
    return (
        f"{label:<22} {facts['documents']:>10,} documents  {facts['bytes'] / 1e9:6.2f} GB "
        f"({facts['compressed_bytes'] / 1e9:.2f} GB gzip)  peak memory {facts['peak_bytes'] / 1e9:5.2f} GB  "
        f"{facts['seconds']:7.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, nargs="+", default=[0.25, 1.0], help="input sizes (uncompressed)")
    parser.add_argument("--short-documents", type=int, default=0, help="also a run of this many ~300-byte documents")
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the generated files (default TMPDIR)")
    args = parser.parse_args(argv)
    runs = [(f"{size:g} GB of documents", size * 1e9, MEAN_BODY_BYTES) for size in args.gigabytes]
    if args.short_documents:
        runs.append(("short documents", args.short_documents * 300, 240))  # about that many documents
    worst = 0.0
    for label, size, body in runs:
        # each size in its own process: ru_maxrss of children is the peak of the largest child so far
        done = subprocess.run(
            [sys.executable, "-c", _ONE, str(size), str(body), str(args.scratch or "")], capture_output=True, text=True
        )
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        facts = json.loads(done.stdout.strip().splitlines()[-1])
        worst = max(worst, facts["peak_bytes"])
        print(_row(label, facts), flush=True)
    verdict = "within" if worst <= GOAL_BYTES else "over"
    print(f"largest peak {worst / 1e9:.2f} GB: {verdict} the goal of {GOAL_BYTES / 1e9:.1f} GB")
    return 0 if worst <= GOAL_BYTES else 1


_ONE = """
import json, sys
from pathlib import Path
from longdoc.bench.convert_memory import measure
size, body, scratch = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
print(json.dumps(measure(size, body, Path(scratch) if scratch else None)))
"""


if __name__ == "__main__":
    sys.exit(main())
