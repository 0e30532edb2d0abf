"""Encode time, peak memory and FLOPs of long-document encoders at one shape (Longtriever Table 3).

Every model is built at the same size from a random BERT configuration (no trained weights are
needed to time an encoder) and encodes a batch of ``batch`` documents of ``length`` tokens: one
sequence for the full-length models (BERT-Document, Longformer, BigBird), ``length / block_size``
blocks for the hierarchical ones (PARADE, Hi-Transformer, Longtriever) and for XLNet, which reads
the blocks one after another with the previous block's states as memory (Transformer-XL recurrence,
``mem_len = block_size``; "XLNet (4*512)" in Table 3). Forward pass, no gradients: the paper's memory
figures (8.42 GiB for BERT-base at 16 x 2048) are those of inference. ``precision="bf16"`` runs the
forward under bf16 autocast, as the study's models do. ``compile`` times the forward compiled by
``torch.compile`` in one of its modes ("reduce-overhead" replays CUDA graphs: the cure for a model whose
many small kernels leave the GPU waiting on launches); its FLOPs are still counted on the eager pass.

Memory is given twice: ``memory_gib``, what the forward pass adds above the built model and its
inputs (activations), and ``total_memory_gib``, the peak above what the process held before the
model was built (weights + inputs + activations). On a GPU, time is the median over ``repeats``
synchronised runs after a warm-up and memory comes from ``torch.cuda.max_memory_allocated``. On a
CPU every measurement runs in a fresh process, forked from a server that has imported torch and
transformers once, and memory is the growth of its peak resident set (Linux: the high-water mark is
reset before the model is built).

Every measurement also counts the forward pass's floating-point operations (``flops``: its warm-up run
under ``torch.utils.flop_counter``; :func:`flops` alone counts one shape); the ratio of a model's
FLOPs to BERT-Document's over the same tokens is the compute floor of its time ratio.

BigBird: Hugging Face's ``BigBirdModel`` silently falls back to full attention when a sequence is not
longer than ``(5 + 2 * num_random_blocks) * block_size`` tokens (704 here); :func:`bigbird_attention`
says which one a shape gets, and the benchmark reports it beside the time.
"""

from __future__ import annotations

import multiprocessing
import re
import resource
import statistics
import time
import traceback
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import pandas as pd

FULL_LENGTH = ("BERT-Document", "Longformer", "BigBird")
HIERARCHICAL = ("PARADE", "Hi-Transformer", "Longtriever", "SMITH")
RECURRENT = ("XLNet",)
MODELS = FULL_LENGTH + HIERARCHICAL + RECURRENT
COMPILE_MODES = ("", "default", "reduce-overhead", "max-autotune")
BIGBIRD_BLOCK, BIGBIRD_RANDOM_BLOCKS = 64, 3  # Hugging Face's defaults (the BigBird paper's ITC setting)


@dataclass
class Shape:
    model: str
    batch: int = 16
    length: int = 2048
    block_size: int = 512
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    repeats: int = 3
    device: str = "auto"
    attention: str = "sdpa"  # of the BERT-based models; "eager" materialises the attention matrix
    precision: str = "fp32"  # "bf16": the forward pass under bf16 autocast
    compile: str = ""  # a torch.compile mode ("default", "reduce-overhead": CUDA graphs, "max-autotune"); "": eager

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.attention not in ("sdpa", "eager"):
            raise ValueError(f"attention must be 'sdpa' or 'eager', got {self.attention!r}")
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {self.precision!r}")
        if self.compile not in COMPILE_MODES:
            raise ValueError(f"compile must be one of {COMPILE_MODES}, got {self.compile!r}")
        if self.length % self.block_size:
            raise ValueError(f"length ({self.length}) must be a multiple of block_size ({self.block_size})")


def _bert_config(shape: Shape, positions: int):
    from transformers import BertConfig

    return BertConfig(
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=4 * shape.hidden,
        max_position_embeddings=positions,
        attn_implementation=shape.attention,
    )


def build(shape: Shape, device: torch.device):
    """``(model, encode)``: ``encode()`` runs one forward pass over a random batch of the shape."""
    with torch.device(device):  # weights and inputs are created on the device ...
        model, encode = _build(shape)
    return model.to(device), encode  # ... except XLNet's legacy ``torch.FloatTensor`` parameters


def _build(shape: Shape):
    from transformers import BertModel

    ids = torch.randint(1000, 30000, (shape.batch, shape.length))
    if shape.model == "BERT-Document":
        model = BertModel(_bert_config(shape, shape.length), add_pooling_layer=False)
        return model, lambda: model(input_ids=ids)
    if shape.model == "Longformer":
        from transformers import LongformerConfig, LongformerModel

        config = LongformerConfig(
            **{
                k: v
                for k, v in _bert_config(shape, shape.length + 2).to_dict().items()
                if k not in ("model_type", "architectures", "transformers_version")
            },
            attention_window=shape.block_size,
        )
        model = LongformerModel(config, add_pooling_layer=False)
        global_mask = torch.zeros_like(ids)
        global_mask[:, 0] = 1  # [CLS] attends globally, as for retrieval
        return model, lambda: model(input_ids=ids, global_attention_mask=global_mask)
    if shape.model == "BigBird":
        from transformers import BigBirdConfig, BigBirdModel

        config = BigBirdConfig(
            hidden_size=shape.hidden,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            intermediate_size=4 * shape.hidden,
            max_position_embeddings=shape.length,
            attention_type="block_sparse",
            block_size=BIGBIRD_BLOCK,
            num_random_blocks=BIGBIRD_RANDOM_BLOCKS,
        )
        model = BigBirdModel(config, add_pooling_layer=False)
        return model, lambda: model(input_ids=ids)
    if shape.model == "XLNet":
        from transformers import XLNetConfig, XLNetModel

        config = XLNetConfig(
            d_model=shape.hidden,
            n_layer=shape.layers,
            n_head=shape.heads,
            d_inner=4 * shape.hidden,
            mem_len=shape.block_size,
            use_mems_eval=True,
        )
        model = XLNetModel(config)
        blocks = ids.view(shape.batch, shape.length // shape.block_size, shape.block_size) % config.vocab_size

        def recurrent():
            memory = None
            for i in range(blocks.shape[1]):  # block i attends to itself and to block i - 1's states
                out = model(input_ids=blocks[:, i], mems=memory, use_mems=True)
                memory = out.mems
            return out

        return model, recurrent
    from longdoc.models import EncoderConfig
    from longdoc.models.backbone import load_tokenizer
    from longdoc.models.biencoder import DocBatch
    from longdoc.models.hi_transformer import HiTransformer
    from longdoc.models.longtriever import Longtriever, LongtrieverConfig
    from longdoc.models.parade import Parade, ParadeConfig
    from longdoc.models.smith import Smith, SmithConfig

    tokenizer = load_tokenizer()  # the bert-base-uncased vocabulary (its special token ids)
    blocks = shape.length // shape.block_size
    bert = BertModel(_bert_config(shape, shape.block_size + 1), add_pooling_layer=False)
    classes = {
        "PARADE": (Parade, ParadeConfig),
        "Hi-Transformer": (HiTransformer, EncoderConfig),
        "Longtriever": (Longtriever, LongtrieverConfig),
        "SMITH": (Smith, SmithConfig),
    }
    cls, config_class = classes[shape.model]
    model = cls(config_class(segment_length=shape.block_size, max_segments=blocks), bert, tokenizer)
    rows = shape.batch * blocks
    block_ids = ids.view(rows, shape.block_size)
    batch = DocBatch(
        block_ids,
        torch.ones_like(block_ids),
        torch.arange(shape.batch).repeat_interleave(blocks),
        torch.arange(blocks).repeat(shape.batch),
        shape.batch,
        blocks,
    )
    return model, lambda: model.encode_documents(batch)


def _device(shape: Shape) -> torch.device:
    if shape.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(shape.device)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def _reset_peak_rss() -> None:
    """Linux (>= 4.0): the peak resident set ("VmHWM") starts again from the current one."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as handle:
        return int(re.search(r"VmHWM:\s+(\d+) kB", handle.read()).group(1)) * 1024


def bigbird_attention(length: int) -> str:
    """The attention Hugging Face's BigBird really uses for a sequence of ``length`` tokens."""
    return "block_sparse" if length > (5 + 2 * BIGBIRD_RANDOM_BLOCKS) * BIGBIRD_BLOCK else "original_full"


def measure_here(shape: Shape, memory: bool = True) -> dict:
    """Measure in this process (GPU, or a CPU worker process when ``memory``; else time only)."""
    device = _device(shape)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    elif memory:
        _reset_peak_rss()
        before = _rss_bytes()
    torch.manual_seed(0)
    model, encode = build(shape, device)
    model.eval()

    def run() -> float:
        with (
            torch.inference_mode(),
            torch.autocast(device.type, dtype=torch.bfloat16, enabled=shape.precision == "bf16"),
        ):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            encode()
            if cuda:
                torch.cuda.synchronize()
            return time.perf_counter() - start

    if cuda:
        built = torch.cuda.memory_allocated()
    elif memory:
        built = _rss_bytes()
    from torch.utils.flop_counter import FlopCounterMode

    _count_cpu_fused_attention()
    with FlopCounterMode(display=False) as counter:
        run()  # warm-up, its operations counted (eager: the count is the model's, not the compiler's)
    if shape.compile:  # ``run`` calls the compiled forward from here on
        encode = torch.compile(encode, mode=None if shape.compile == "default" else shape.compile)
        for _ in range(3):  # compilation, then (reduce-overhead) the CUDA graph's recording
            run()
    times = [run() for _ in range(shape.repeats)]
    grown = total = float("nan")
    if cuda:
        peak = torch.cuda.max_memory_allocated()
        grown, total = max(0, peak - built) / 2**30, max(0, peak - before) / 2**30
    elif memory:
        peak = _peak_rss_bytes()
        grown, total = max(0, peak - built) / 2**30, max(0, peak - before) / 2**30
    row = {
        **asdict(shape),
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "threads": torch.get_num_threads(),
        "time_ms": 1000 * statistics.median(times),
        "memory_gib": grown,
        "total_memory_gib": total,
        "parameters": sum(p.numel() for p in model.parameters()),
        "flops": counter.get_total_flops(),
    }
    row["attention used"] = bigbird_attention(shape.length) if shape.model == "BigBird" else shape.attention
    return row


def _count_cpu_fused_attention() -> None:
    """torch's flop counter knows the GPU fused-attention kernels, not the CPU one: count it the same way."""
    from torch.utils import flop_counter

    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    if op not in flop_counter.flop_registry:
        flop_counter.register_flop_formula(op)(
            lambda query, key, value, *args, out_shape=None, **kwargs: flop_counter.sdpa_flop_count(query, key, value)
        )


def flops(shape: Shape) -> int:
    """Floating-point operations (multiply and add counted apart) of one forward pass of ``shape``,
    counted by ``torch.utils.flop_counter`` on one document on the CPU and scaled by the batch."""
    from torch.utils.flop_counter import FlopCounterMode

    _count_cpu_fused_attention()
    one = Shape(**{**asdict(shape), "batch": 1, "device": "cpu", "precision": "fp32", "attention": "sdpa"})
    torch.manual_seed(0)
    model, encode = build(one, torch.device("cpu"))
    model.eval()
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        encode()
    return counter.get_total_flops() * shape.batch


_PRELOAD = [
    "longdoc.bench.efficiency",
    "longdoc.models.longtriever",
    "longdoc.models.parade",
    "longdoc.models.hi_transformer",
    "transformers.models.longformer.modeling_longformer",
    "transformers.models.big_bird.modeling_big_bird",
    "transformers.models.xlnet.modeling_xlnet",
]


def _workers() -> multiprocessing.context.BaseContext:
    """Fresh CPU worker processes forked from a server that preloads the model code (no OpenMP pool
    exists in it yet, so forking is safe). As with any multiprocessing start method but "fork", a
    calling script must guard its entry point with ``if __name__ == "__main__":``."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


def _measure_and_send(shape: Shape, connection) -> None:
    try:
        connection.send(("ok", measure_here(shape)))
    except BaseException:
        connection.send(("error", traceback.format_exc()))


def measure(shape: Shape, isolate: bool = True, timeout: int = 1800) -> dict:
    """One measurement; on a CPU in a fresh process (``isolate``), so that the peak memory is this
    model's own. Without isolation a CPU run reports time only (memory is NaN)."""
    if _device(shape).type == "cuda":
        return measure_here(shape)
    if not isolate:
        return measure_here(shape, memory=False)
    context = _workers()
    receive, send = context.Pipe(duplex=False)
    worker = context.Process(target=_measure_and_send, args=(shape, send), daemon=True)
    worker.start()
    send.close()
    try:
        if not receive.poll(timeout):
            raise RuntimeError(f"measuring {shape} took more than {timeout} s")
        status, value = receive.recv()
    except EOFError:
        worker.join()
        raise RuntimeError(
            f"the worker measuring {shape} exited ({worker.exitcode}) without a result; "
            'a script that calls measure() needs an `if __name__ == "__main__":` guard'
        ) from None
    finally:
        worker.kill()
        worker.join()
    if status == "error":
        raise RuntimeError(f"measuring {shape} failed in its worker process:\n{value}")
    return value


def measure_all(models, isolate: bool = True, progress: bool = True, **shape) -> pd.DataFrame:
    """One row per model (and per value of any list-valued ``shape`` field, e.g. ``length=[...]``)."""
    import itertools

    import pandas as pd

    from longdoc.progress import tqdm

    grid = {k: v if isinstance(v, (list, tuple)) else [v] for k, v in shape.items()}
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    jobs = [(model, combo) for combo in combos for model in models]
    rows = [
        measure(Shape(model, **combo), isolate=isolate)
        for model, combo in tqdm(jobs, desc="measuring", disable=not progress)
    ]
    return pd.DataFrame(rows)


EAGER_LIMIT_GIB = 2.0  # eager attention is measured only where one layer's attention matrices fit in this


def eager_fits(batch: int, length: int, heads: int, limit_gib: float = EAGER_LIMIT_GIB) -> bool:
    """Whether eager full attention over ``length`` tokens materialises at most ``limit_gib`` of scores
    per layer (fp32); beyond it a CPU run takes minutes and more memory than a notebook may use."""
    return batch * heads * length * length * 4 / 2**30 <= limit_gib


READABLE = {  # column → (header with its unit, divisor)
    "time_ms": ("time (ms)", 1),
    "memory_gib": ("memory (GiB)", 1),
    "total_memory_gib": ("total memory (GiB)", 1),
    "parameters": ("parameters (M)", 1e6),
    "flops": ("GFLOP", 1e9),
}


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """A measurement table for reading: units in the headers, parameters in millions, FLOPs in GFLOP
    (the records keep the raw columns)."""
    present = {column: spec for column, spec in READABLE.items() if column in frame}
    out = frame.assign(**{column: frame[column] / divisor for column, (_, divisor) in present.items()})
    return out.rename(columns={column: header for column, (header, _) in present.items()})


def against_reference(measured: pd.DataFrame, reference: str = "BERT-Document") -> pd.DataFrame:
    """Each row's time, memory and FLOPs divided by the reference model's at the same length, batch
    and attention kernel; ``× floor`` = time ratio / FLOP ratio (1.0: as fast as its FLOPs allow,
    relative to the reference)."""
    keys = ["length", "batch", "attention"]
    base = measured[measured.model == reference].set_index(keys)
    out = measured.copy()
    joined = out.join(base[["time_ms", "memory_gib", "flops"]], on=keys, rsuffix="_reference")
    out["time ratio"] = joined["time_ms"] / joined["time_ms_reference"]
    out["memory ratio"] = joined["memory_gib"] / joined["memory_gib_reference"]
    out["FLOP ratio"] = joined["flops"] / joined["flops_reference"]
    out["× floor"] = out["time ratio"] / out["FLOP ratio"]
    return out


def efficiency_claims(
    table3: pd.DataFrame, curve: pd.DataFrame, paper: pd.DataFrame, floor_from: int = 1024, tolerance: float = 0.10
) -> pd.DataFrame:
    """Table 3's claims, and the compute-floor target, judged from the measured ratios (fused
    attention rows; single measurements, the median of ``repeats`` runs each)."""
    import pandas as pd

    sdpa = table3[table3.attention == "sdpa"].set_index("model")
    lt, bert = sdpa.loc["Longtriever"], sdpa.loc["BERT-Document"]
    paper = paper.set_index("our_name")
    paper_ratio = paper.loc["Longtriever", "time_ms"] / paper.loc["BERT-Document", "time_ms"]
    paper_memory = paper.loc["Longtriever", "memory_gib"] / paper.loc["BERT-Document", "memory_gib"]
    hierarchical = sdpa.loc[list(HIERARCHICAL), "time_ms"].max()
    full = sdpa.loc[list(FULL_LENGTH), "time_ms"].min()
    rows = [
        (
            "Longtriever is faster than BERT-Document",
            f"{paper_ratio:.2f}×",
            f"{lt.time_ms / bert.time_ms:.2f}×",
            lt.time_ms < bert.time_ms,
        ),
        (
            "Longtriever needs less memory than BERT-Document",
            f"{paper_memory:.2f}×",
            f"{lt.memory_gib / bert.memory_gib:.2f}× (activations), {lt.total_memory_gib / bert.total_memory_gib:.2f}× (with weights)",
            lt.memory_gib < bert.memory_gib,
        ),
        (
            "the hierarchical models are faster than every full-length model",
            "< 700 ms vs ≈ 1,000 ms",
            f"slowest hierarchical {hierarchical:.0f} ms vs fastest full-length {full:.0f} ms",
            hierarchical < full,
        ),
    ]
    if "XLNet" in sdpa.index:
        others = sdpa.drop(index="XLNet")["time_ms"].max()
        rows.append(
            (
                "XLNet is the slowest (its recurrence runs block after block)",
                "2,463 ms vs ≤ 1,084 ms",
                f"{sdpa.loc['XLNet', 'time_ms']:.0f} ms vs ≤ {others:.0f} ms",
                sdpa.loc["XLNet", "time_ms"] > others,
            )
        )
    ours = curve[(curve.model == "Longtriever") & (curve.attention == "sdpa") & (curve.length >= floor_from)]
    worst = ours["× floor"].max()
    rows.append(
        (
            f"(our target) Longtriever within {tolerance:.0%} of its compute floor against fused-attention "
            f"BERT-Document from {floor_from:,} tokens on",
            "—",
            ", ".join(f"{int(r.length)}: {r['× floor']:.2f}" for _, r in ours.iterrows()),
            worst <= 1 + tolerance,
        )
    )
    return pd.DataFrame(
        [
            {"claim": c, "paper": p, "ours": o, "verdict": "holds" if ok else "not met / reversed"}
            for c, p, o, ok in rows
        ]
    )


def main(argv: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``python -m longdoc.bench.efficiency --profile paper``: notebook 14's measurements (Table 3 at one
    shape, eager beside fused attention, and the growth curve) at a profile's ``bench_*`` parameters,
    printed and written as CSV; for GPU nodes without Jupyter."""
    import argparse
    from pathlib import Path

    import pandas as pd

    from longdoc.data.registry import REPO_ROOT
    from longdoc.experiments.paper import paper_results
    from longdoc.experiments.profiles import parameters_for

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper", help="a name under notebooks/profiles/ or a YAML path")
    parser.add_argument("--precision", choices=["fp32", "bf16"], help="instead of the profile's")
    parser.add_argument(
        "--eager-limit-gib",
        type=float,
        default=EAGER_LIMIT_GIB,
        help="measure eager BERT-Document where one layer's scores fit in this (GiB)",
    )
    parser.add_argument("--out", type=Path, help="a folder for table3.csv and growth.csv")
    args = parser.parse_args(argv)
    profile = (
        Path(args.profile)
        if args.profile.endswith(".yaml")
        else REPO_ROOT / "notebooks" / "profiles" / f"{args.profile}.yaml"
    )
    p = parameters_for(profile, REPO_ROOT / "notebooks" / "14_efficiency.ipynb")
    shape = dict(
        hidden=p["bench_hidden"],
        layers=p["bench_layers"],
        heads=p["bench_heads"],
        block_size=p["block_size"],
        repeats=p["bench_repeats"],
        device=p["bench_device"],
        precision=args.precision or p["precision"],
    )
    one = dict(length=p["bench_length"], batch=p["bench_batch"], isolate=p["bench_isolate"])
    table3 = against_reference(
        pd.concat(
            [
                measure_all(MODELS, **one, **shape),
                measure_all(["BERT-Document", "Longtriever"], **one, **shape | {"attention": "eager"}),
            ]
        )
    )
    batch = p["bench_curve_batch"]
    eager = [n for n in p["bench_lengths"] if eager_fits(batch, n, p["bench_heads"], args.eager_limit_gib)]
    curve = against_reference(
        pd.concat(
            [
                measure_all(MODELS, isolate=p["bench_isolate"], length=p["bench_lengths"], batch=batch, **shape),
                measure_all(
                    ["BERT-Document"],
                    isolate=p["bench_isolate"],
                    length=eager,
                    batch=batch,
                    **shape | {"attention": "eager"},
                ),
            ]
        )
    )
    curve["label"] = curve.model + " (" + curve.attention + ")"
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(
            f"{table3.device.iloc[0]}, torch {torch.__version__}, {shape['precision']}, hidden {shape['hidden']}, "
            f"{shape['layers']} layers, blocks of {shape['block_size']}, median of {shape['repeats']}"
        )
        print(
            table3[
                [
                    "model",
                    "attention",
                    "attention used",
                    "time_ms",
                    "memory_gib",
                    "total_memory_gib",
                    "flops",
                    "time ratio",
                    "memory ratio",
                    "FLOP ratio",
                    "× floor",
                ]
            ]
            .round(3)
            .to_string(index=False)
        )
        for value in ("time_ms", "memory_gib"):
            print(
                f"\n{value}, batch {batch}\n"
                + curve.pivot(index="length", columns="label", values=value).round(2).to_string()
            )
        print(
            "\n× floor (sdpa)\n"
            + curve[curve.attention == "sdpa"]
            .pivot(index="length", columns="model", values="× floor")
            .round(3)
            .to_string()
        )
        print("\n" + efficiency_claims(table3, curve, paper_results("longtriever_efficiency")).to_string(index=False))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        table3.to_csv(args.out / "table3.csv", index=False)
        curve.to_csv(args.out / "growth.csv", index=False)
    return table3, curve


if __name__ == "__main__":
    main()
