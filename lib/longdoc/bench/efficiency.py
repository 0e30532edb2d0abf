"""Encode time and peak memory of long-document encoders at one shape (Longtriever Table 3).

Every model is built at the same size from a random BERT configuration (no trained weights are
needed to time an encoder) and encodes a batch of ``batch`` documents of ``length`` tokens: one
sequence for the full-length models (BERT-Document, Longformer, BigBird), ``length / block_size``
blocks for the hierarchical ones (PARADE, Hi-Transformer, Longtriever). Forward pass, no gradients:
the paper's memory figures (8.42 GiB for BERT-base at 16 x 2048) are those of inference.

On a GPU, time is the median over ``repeats`` synchronised runs after a warm-up and memory is
``torch.cuda.max_memory_allocated`` above the weights and inputs. On a CPU every measurement runs
in a fresh process, forked from a server that has imported torch and transformers once (a fresh
interpreter paid ~3 s of imports per measurement), and memory is the growth of its peak resident set
during the runs (Linux: the high-water mark is reset when the runs start).
"""

from __future__ import annotations

import multiprocessing
import re
import resource
import statistics
import time
import traceback
from dataclasses import asdict, dataclass

import torch

FULL_LENGTH = ("BERT-Document", "Longformer", "BigBird")
HIERARCHICAL = ("PARADE", "Hi-Transformer", "Longtriever")
MODELS = FULL_LENGTH + HIERARCHICAL


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

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.attention not in ("sdpa", "eager"):
            raise ValueError(f"attention must be 'sdpa' or 'eager', got {self.attention!r}")
        if self.length % self.block_size:
            raise ValueError(f"length ({self.length}) must be a multiple of block_size ({self.block_size})")


def _bert_config(shape: Shape, positions: int):
    from transformers import BertConfig

    return BertConfig(hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                      intermediate_size=4 * shape.hidden, max_position_embeddings=positions,
                      attn_implementation=shape.attention)


def build(shape: Shape, device: torch.device):
    """``(model, encode)``: ``encode()`` runs one forward pass over a random batch of the shape."""
    with torch.device(device):  # weights and inputs are created on the device
        return _build(shape)


def _build(shape: Shape):
    from transformers import BertModel

    ids = torch.randint(1000, 30000, (shape.batch, shape.length))
    if shape.model == "BERT-Document":
        model = BertModel(_bert_config(shape, shape.length), add_pooling_layer=False)
        return model, lambda: model(input_ids=ids)
    if shape.model == "Longformer":
        from transformers import LongformerConfig, LongformerModel

        config = LongformerConfig(**{k: v for k, v in _bert_config(shape, shape.length + 2).to_dict().items()
                                     if k not in ("model_type", "architectures", "transformers_version")},
                                  attention_window=shape.block_size)
        model = LongformerModel(config, add_pooling_layer=False)
        global_mask = torch.zeros_like(ids)
        global_mask[:, 0] = 1  # [CLS] attends globally, as for retrieval
        return model, lambda: model(input_ids=ids, global_attention_mask=global_mask)
    if shape.model == "BigBird":
        from transformers import BigBirdConfig, BigBirdModel

        config = BigBirdConfig(hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                               intermediate_size=4 * shape.hidden, max_position_embeddings=shape.length,
                               attention_type="block_sparse", block_size=64, num_random_blocks=3)
        model = BigBirdModel(config, add_pooling_layer=False)
        return model, lambda: model(input_ids=ids)
    from longdoc.models import EncoderConfig
    from longdoc.models.biencoder import DocBatch
    from longdoc.models.hi_transformer import HiTransformer
    from longdoc.models.longtriever import Longtriever, LongtrieverConfig
    from longdoc.models.parade import Parade, ParadeConfig
    from longdoc.models.backbone import load_tokenizer

    tokenizer = load_tokenizer()  # the bert-base-uncased vocabulary (its special token ids)
    blocks = shape.length // shape.block_size
    bert = BertModel(_bert_config(shape, shape.block_size + 1), add_pooling_layer=False)
    classes = {"PARADE": (Parade, ParadeConfig), "Hi-Transformer": (HiTransformer, EncoderConfig),
               "Longtriever": (Longtriever, LongtrieverConfig)}
    cls, config_class = classes[shape.model]
    model = cls(config_class(segment_length=shape.block_size, max_segments=blocks), bert, tokenizer)
    rows = shape.batch * blocks
    block_ids = ids.view(rows, shape.block_size)
    batch = DocBatch(block_ids, torch.ones_like(block_ids), torch.arange(shape.batch).repeat_interleave(blocks),
                     torch.arange(blocks).repeat(shape.batch), shape.batch, blocks)
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


def measure_here(shape: Shape, memory: bool = True) -> dict:
    """Measure in this process (GPU, or a CPU worker process when ``memory``; else time only)."""
    device = _device(shape)
    torch.manual_seed(0)
    model, encode = build(shape, device)
    model.eval()
    cuda = device.type == "cuda"

    def run() -> float:
        with torch.inference_mode():
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            encode()
            if cuda:
                torch.cuda.synchronize()
            return time.perf_counter() - start

    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    elif memory:
        _reset_peak_rss()
        base = _rss_bytes()
    run()  # warm-up
    times = [run() for _ in range(shape.repeats)]
    grown = float("nan")
    if cuda:
        grown = max(0, torch.cuda.max_memory_allocated() - base) / 2**30
    elif memory:
        grown = max(0, _peak_rss_bytes() - base) / 2**30
    return {**asdict(shape), "device": torch.cuda.get_device_name() if cuda else "cpu",
            "threads": torch.get_num_threads(), "time_ms": 1000 * statistics.median(times),
            "memory_gib": grown, "parameters": sum(p.numel() for p in model.parameters())}


_PRELOAD = ["longdoc.bench.efficiency", "longdoc.models.longtriever", "longdoc.models.parade", "longdoc.models.hi_transformer",
            "transformers.models.longformer.modeling_longformer", "transformers.models.big_bird.modeling_big_bird"]


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
        raise RuntimeError(f"the worker measuring {shape} exited ({worker.exitcode}) without a result; "
                           "a script that calls measure() needs an `if __name__ == \"__main__\":` guard") from None
    finally:
        worker.kill()
        worker.join()
    if status == "error":
        raise RuntimeError(f"measuring {shape} failed in its worker process:\n{value}")
    return value


def measure_all(models, isolate: bool = True, progress: bool = True, **shape) -> "pd.DataFrame":
    """One row per model (and per value of any list-valued ``shape`` field, e.g. ``length=[...]``)."""
    import itertools

    import pandas as pd
    from tqdm.auto import tqdm

    grid = {k: v if isinstance(v, (list, tuple)) else [v] for k, v in shape.items()}
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    jobs = [(model, combo) for combo in combos for model in models]
    rows = [measure(Shape(model, **combo), isolate=isolate)
            for model, combo in tqdm(jobs, desc="measuring", disable=not progress)]
    return pd.DataFrame(rows)
