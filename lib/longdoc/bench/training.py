"""What a GPU-hour estimate is made of: the study's own trainers timed at a shape (a benchmark that prints
figures; nothing here is a timed test).

``python -m longdoc.bench.training`` builds a backbone of random weights at ``--hidden``/``--layers``/
``--heads`` (bert-base-uncased's 768/12/12 by default, the papers' size; no trained weights are needed to
time a step), fills a corpus with random token ids (every document full: ``--blocks`` x ``--block``
tokens) and, for each job, runs the real training function of its family three times: ``--warmup``
steps untimed (the first kernels' selection and compilation), then ``--warmup`` steps and ``--warmup`` +
``--steps`` steps timed; it reports their difference per step (set-up and the optimizer's allocation
cancel out), the peak GPU memory, and the encoding
throughput of the retrieval encoders (:meth:`~longdoc.models.biencoder.BiEncoder.encode_corpus`).

Jobs (``--jobs``; batch sizes are per process, as in the papers' per-GPU batches):

- ``retrieval:NAME`` — :func:`~longdoc.train.loop.train_biencoder` with one hard negative per query
  (SeDR: the late cache of ``--cache-size``), ``--batch`` queries per step;
- ``encode:NAME`` — documents per second of ``encode_corpus`` over ``--encode-docs`` documents;
- ``matching:SMITH`` / ``matching:MatchBERT`` — :func:`~longdoc.train.matching.train_matcher`,
  ``--pair-batch`` pairs per step (SMITH: ``--sentence-blocks`` blocks of ``--sentence-block`` tokens);
- ``pretrain:Longtriever`` / ``pretrain:SMITH`` — :func:`~longdoc.train.pretrain.pretrain_encoder`
  (MLM + LMAE; SMITH's masked words and blocks), ``--pretrain-batch`` documents per step;
- ``nci`` — :func:`~longdoc.train.nci.train_nci` with two dropout views (α > 0), ``--nci-batch``
  examples per step over random identifiers of ``--nci-documents`` documents (k = c = 30);
- ``decode:nci`` — queries per second of the study's constrained beam search
  (:class:`~longdoc.index.nci_retriever.NciRetriever`) at ``--nci-beam`` beams, ``--nci-decode-batch``
  queries per call, over the same model and identifiers;
- ``generate:docT5query`` — documents per second of the study's query generation
  (:meth:`~longdoc.models.doc2query.Doc2Query.generate`) with a T5 of ``--hidden``/``--layers``/``--heads``
  (t5-base's size by default; random weights, the backbone's vocabulary): ``--qg-queries`` sampled queries of up to ``--qg-max-length`` tokens from
  ``--qg-input-length`` document tokens, ``--qg-batch`` documents per call. Random weights seldom sample the
  end token, so every query runs to its length limit: an upper bound on a trained generator's time.

A job that runs out of memory is reported as such (``oom``) and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import torch

from longdoc.models.backbone import random_backbone

DEFAULT_JOBS = (
    "retrieval:FirstP",
    "retrieval:MaxP",
    "retrieval:Longtriever",
    "retrieval:SeDR",
    "encode:FirstP",
    "encode:MaxP",
    "encode:Longtriever",
    "encode:SeDR",
    "matching:MatchBERT",
    "matching:SMITH",
    "pretrain:Longtriever",
    "pretrain:SMITH",
    "nci",
    "decode:nci",
    "generate:docT5query",
)


def random_corpus(documents: int, blocks: int, block: int, vocabulary: int, seed: int = 0):
    """``documents`` documents of ``blocks`` full blocks of random content ids (no special token)."""
    from longdoc.text.segments import SegmentedCorpus

    rng = random.Random(seed)
    segments = [[[rng.randrange(1000, vocabulary) for _ in range(block - 2)] for _ in range(blocks)]]
    # one random block pattern per document would cost minutes of Python at 4 x 512 x 10k; ids do not
    # change a step's cost, so documents share rotated copies of one drawn document
    shared = segments[0]
    return SegmentedCorpus(
        [f"d{i}" for i in range(documents)], [[s[i % 7 :] + s[: i % 7] for s in shared] for i in range(documents)]
    )


def _synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def per_step_seconds(train, warmup: int, steps: int) -> float:
    """Seconds per step: ``train(n)`` runs n steps; after one untimed call (the first kernels' selection and
    compilation), (time of warmup + steps) − (time of warmup), over steps."""
    train(warmup)
    times = []
    for n in (warmup, warmup + steps):
        _synchronize()
        started = time.perf_counter()
        train(n)
        _synchronize()
        times.append(time.perf_counter() - started)
    return (times[1] - times[0]) / steps


def _encoder_config(name: str, backbone: str, args):
    from longdoc.models.biencoder import EncoderConfig
    from longdoc.models.longtriever import LongtrieverConfig
    from longdoc.models.registry import encoder_class
    from longdoc.models.sedr import SeDRConfig
    from longdoc.models.smith import SmithConfig

    shared = dict(backbone=backbone, precision=args.precision, max_query_length=args.query_length)
    if name == "SMITH":
        return SmithConfig(
            segment_length=args.sentence_block,
            max_segments=args.sentence_blocks,
            sentence_layers=args.sentence_layers,
            sentence_filling=False,
            **shared,
        )
    if name == "MatchBERT":
        return EncoderConfig(segment_length=args.matchbert_length, max_segments=1, **shared)
    blocks = 1 if encoder_class(name).reads_one_block else args.blocks
    config_class = {"Longtriever": LongtrieverConfig, "SeDR": SeDRConfig}.get(name, EncoderConfig)
    return config_class(segment_length=args.block, max_segments=blocks, **shared)


def _queries(n: int, seed: int = 0) -> list[str]:
    words = "open file socket signal thread memory process network print time clock read write".split()
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=12)) for _ in range(n)]


def retrieval_job(name: str, backbone: str, args, device) -> dict:
    from longdoc.models.registry import build_encoder
    from longdoc.train.loop import TrainConfig, train_biencoder

    model = build_encoder(name, _encoder_config(name, backbone, args), seed=0).to(device)
    items = args.batch * (args.warmup + args.steps)
    corpus = random_corpus(2 * items, model.config.max_segments, args.block, model.tokenizer.vocab_size)
    queries = dict(zip((f"q{i}" for i in range(items)), _queries(items)))
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(items)}
    negatives = {f"q{i}": [f"d{items + i}"] for i in range(items)}
    cache = args.cache_size if name == "SeDR" else 0

    def train(n: int) -> None:
        config = TrainConfig(steps=n, batch_size=args.batch, hard_negatives=1, cache_size=cache)
        train_biencoder(model, queries, qrels, corpus, negatives, config, progress=False)

    return {"seconds_per_step": per_step_seconds(train, args.warmup, args.steps), "batch": args.batch}


def encode_job(name: str, backbone: str, args, device) -> dict:
    from longdoc.models.registry import build_encoder

    model = build_encoder(name, _encoder_config(name, backbone, args), seed=0).to(device)
    corpus = random_corpus(args.encode_docs, model.config.max_segments, args.block, model.tokenizer.vocab_size)
    model.encode_corpus(corpus, max_tokens=args.encode_tokens, progress=False)  # warm-up
    _synchronize()
    started = time.perf_counter()
    model.encode_corpus(corpus, max_tokens=args.encode_tokens, progress=False)
    _synchronize()
    seconds = time.perf_counter() - started
    return {"documents_per_second": args.encode_docs / seconds, "documents": args.encode_docs}


def matching_job(name: str, backbone: str, args, device) -> dict:
    from longdoc.data.pairs import DocumentPair
    from longdoc.models.matching import SiameseMatcher
    from longdoc.models.registry import build_encoder
    from longdoc.train.loop import TrainConfig
    from longdoc.train.matching import train_matcher

    config = _encoder_config(name, backbone, args)
    matcher = SiameseMatcher(build_encoder(name, config, seed=0)).to(device)
    pairs_needed = args.pair_batch * (args.warmup + args.steps)
    corpus = random_corpus(
        2 * pairs_needed, config.max_segments, config.segment_length, matcher.encoder.tokenizer.vocab_size
    )
    pairs = [DocumentPair(f"d{2 * i}", f"d{2 * i + 1}", i % 2) for i in range(pairs_needed)]

    def train(n: int) -> None:
        train_matcher(matcher, corpus, pairs, TrainConfig(steps=n, batch_size=args.pair_batch), progress=False)

    return {"seconds_per_step": per_step_seconds(train, args.warmup, args.steps), "batch": args.pair_batch}


def pretrain_job(name: str, backbone: str, args, device) -> dict:
    from longdoc.experiments.families.pretraining import pretraining_task
    from longdoc.train.pretrain import PretrainConfig, pretrain_encoder

    encoder_config = _encoder_config(name, backbone, args)
    if name == "Longtriever":
        encoder_config.max_segments = args.pretrain_blocks  # the paper pre-trains on 8 blocks
    model, task = pretraining_task(encoder_config, PretrainConfig())
    task.to(device)
    documents = args.pretrain_batch * (args.warmup + args.steps)
    corpus = random_corpus(
        documents, encoder_config.max_segments, encoder_config.segment_length, model.tokenizer.vocab_size
    )

    def train(n: int) -> None:
        pretrain_encoder(task, corpus, PretrainConfig(steps=n, batch_size=args.pretrain_batch), progress=False)

    seconds = per_step_seconds(train, args.warmup, args.steps)
    return {"seconds_per_step": seconds, "batch": args.pretrain_batch, "blocks": encoder_config.max_segments}


def _nci_model(backbone: str, args, device):
    """An NCI model of ``backbone`` over random identifiers of ``--nci-documents`` documents (k = c = 30)."""
    from longdoc.index.semantic_ids import IdTokenizer, random_ids
    from longdoc.models.nci import NciConfig, NciModel

    identifiers = random_ids(args.nci_documents, 30, 30, seed=0)
    ids = IdTokenizer.fit(identifiers)
    config = NciConfig(
        backbone=backbone,
        vocab_size=ids.vocab_size,
        max_id_length=ids.depth + 1,
        decoder_layers=args.nci_decoder_layers,
        adaptor_layers=args.nci_adaptor_layers,
        query_length=args.nci_query_length,
    )
    return NciModel.build(config).to(device), identifiers, ids


def nci_job(backbone: str, args, device) -> dict:
    from longdoc.train.nci import NciTrainConfig, train_nci

    model, identifiers, ids = _nci_model(backbone, args, device)
    tokens = [ids.encode(identifier) for identifier in identifiers]
    queries = _queries(args.nci_batch * (args.warmup + args.steps))
    examples = [(q, i % args.nci_documents) for i, q in enumerate(queries)]

    mask = ids.step_mask(ids.depth + 1)  # the model's max_id_length

    def train(n: int) -> None:
        train_config = NciTrainConfig(steps=n, batch_size=args.nci_batch, alpha=0.15)
        train_nci(model, examples, tokens, train_config, progress=False, step_mask=mask)

    return {"seconds_per_step": per_step_seconds(train, args.warmup, args.steps), "batch": args.nci_batch}


def _per_second(call, items: int) -> float:
    """Items per second of ``call()`` (one untimed call first)."""
    call()
    _synchronize()
    started = time.perf_counter()
    call()
    _synchronize()
    return items / (time.perf_counter() - started)


def decode_job(backbone: str, args, device) -> dict:
    from longdoc.index.nci_retriever import DecodingConfig, NciRetriever

    model, identifiers, ids = _nci_model(backbone, args, device)
    decoding = DecodingConfig(beam_size=args.nci_beam, batch_size=args.nci_decode_batch)
    retriever = NciRetriever(model, [f"d{i}" for i in range(len(identifiers))], identifiers, ids, decoding)
    queries = dict(zip((f"q{i}" for i in range(args.decode_queries)), _queries(args.decode_queries)))
    rate = _per_second(lambda: retriever.search(queries, args.nci_beam), args.decode_queries)
    return {"queries_per_second": rate, "beam": args.nci_beam, "batch": args.nci_decode_batch}


def generate_job(backbone: str, args, device) -> dict:
    from transformers import T5Config, T5ForConditionalGeneration

    from longdoc.models.backbone import load_tokenizer
    from longdoc.models.doc2query import Doc2Query, QueryGenerationConfig

    tokenizer = load_tokenizer(backbone)
    torch.manual_seed(0)
    special = dict(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.sep_token_id)
    size = dict(d_model=args.hidden, d_kv=args.hidden // args.heads, d_ff=4 * args.hidden, num_heads=args.heads)
    config = T5Config(
        vocab_size=tokenizer.vocab_size,
        num_layers=args.layers,
        decoder_start_token_id=tokenizer.pad_token_id,
        **size,
        **special,
    )
    model = T5ForConditionalGeneration(config).to(device)
    options = QueryGenerationConfig(
        queries_per_document=args.qg_queries,
        input_length=args.qg_input_length,
        max_query_length=args.qg_max_length,
        generate_batch_size=args.qg_batch,
    )
    generator = Doc2Query(model, tokenizer, options)
    words = _queries(args.qg_batch * args.qg_input_length // 12 + 1)
    texts = [" ".join(words[i :: args.qg_batch]) for i in range(args.qg_batch)]  # each above qg_input_length tokens
    rate = _per_second(lambda: generator.generate(texts), len(texts))
    return {"documents_per_second": rate, "queries": args.qg_queries, "batch": args.qg_batch}


def check_job(job: str) -> None:
    """Refuse a job this benchmark does not know, before anything is built."""
    from longdoc.models.registry import ENCODERS

    kind, _, name = job.partition(":")
    known = {
        "retrieval": set(ENCODERS) - {"MatchBERT", "SMITH"},
        "encode": set(ENCODERS) - {"MatchBERT", "SMITH"},
        "matching": {"MatchBERT", "SMITH"},
        "pretrain": {"Longtriever", "SMITH"},
        "nci": {""},
        "decode": {"nci"},
        "generate": {"docT5query"},
    }
    if kind not in known or name not in known[kind]:
        raise ValueError(
            f"--jobs: unknown job {job!r}; jobs are " + ", ".join(f"{k}:{sorted(v)}" for k, v in known.items())
        )


def run_job(job: str, backbone: str, args, device) -> dict:
    kind, _, name = job.partition(":")
    runners = {
        "retrieval": lambda: retrieval_job(name, backbone, args, device),
        "encode": lambda: encode_job(name, backbone, args, device),
        "matching": lambda: matching_job(name, backbone, args, device),
        "pretrain": lambda: pretrain_job(name, backbone, args, device),
        "nci": lambda: nci_job(backbone, args, device),
        "decode": lambda: decode_job(backbone, args, device),
        "generate": lambda: generate_job(backbone, args, device),
    }
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    row = {"job": job}
    try:
        row |= runners[kind]()
    except torch.OutOfMemoryError:
        row["oom"] = True
    if torch.cuda.is_available():
        row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return row


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", nargs="+", default=list(DEFAULT_JOBS))
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--backbone", default="", help="a saved backbone directory instead of random weights")
    p.add_argument(
        "--tokenizer", default="minilm", help="the random backbone's tokenizer (a backbone name or directory)"
    )
    p.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    p.add_argument("--block", type=int, default=512, help="tokens per block (with [CLS] and [SEP])")
    p.add_argument("--blocks", type=int, default=4, help="blocks per document (FirstP: 1)")
    p.add_argument("--query-length", type=int, default=32)
    p.add_argument("--batch", type=int, default=6, help="queries per step (Longtriever: 6 per GPU)")
    p.add_argument("--cache-size", type=int, default=50, help="SeDR's late cache C")
    p.add_argument("--encode-docs", type=int, default=2000)
    p.add_argument("--encode-tokens", type=int, default=65536, help="padded tokens per encoding batch")
    p.add_argument("--pair-batch", type=int, default=32, help="pairs per step (SMITH: 32)")
    p.add_argument("--matchbert-length", type=int, default=512)
    p.add_argument("--sentence-block", type=int, default=32)
    p.add_argument("--sentence-blocks", type=int, default=48)
    p.add_argument("--sentence-layers", type=int, default=6)
    p.add_argument("--pretrain-batch", type=int, default=3, help="documents per step (Longtriever: 3 per GPU)")
    p.add_argument("--pretrain-blocks", type=int, default=8, help="Longtriever's pre-training blocks")
    p.add_argument("--nci-batch", type=int, default=16, help="examples per step (NCI: 16 per GPU)")
    p.add_argument("--nci-documents", type=int, default=109739)
    p.add_argument("--nci-query-length", type=int, default=64)
    p.add_argument("--nci-decoder-layers", type=int, default=6)
    p.add_argument("--nci-adaptor-layers", type=int, default=4)
    p.add_argument("--nci-beam", type=int, default=100, help="decode:nci's beams (NCI: 100)")
    p.add_argument("--nci-decode-batch", type=int, default=16, help="queries per beam-search call")
    p.add_argument("--decode-queries", type=int, default=64, help="queries decode:nci times")
    p.add_argument("--qg-queries", type=int, default=15, help="queries generated per document (NCI: 15)")
    p.add_argument("--qg-input-length", type=int, default=512, help="document tokens the generator reads")
    p.add_argument("--qg-max-length", type=int, default=64, help="tokens per generated query at most")
    p.add_argument("--qg-batch", type=int, default=8, help="documents per generate() call")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--out", default="", help="write the rows here as JSON (after every job)")
    return p


def main(argv: list[str] | None = None) -> list[dict]:
    args = parser().parse_args(argv)
    for job in args.jobs:
        check_job(job)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    header = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "shape": {k: v for k, v in vars(args).items() if k not in ("jobs", "out")},
    }
    print(json.dumps(header))
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        backbone = args.backbone or random_backbone(
            Path(scratch) / "backbone", args.hidden, args.layers, args.heads, tokenizer=args.tokenizer
        )
        for job in args.jobs:
            started = time.perf_counter()
            row = run_job(job, backbone, args, device) | {"wall_seconds": time.perf_counter() - started}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
