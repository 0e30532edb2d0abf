"""Every trainer in two gloo processes equals one process holding the same global batch (dropout off, so
that the two runs see the same numbers): the weights after a few steps agree. Each process takes half of
each step's items from the same seeded order; DDP averages the gradients, so any loss that is a mean over
something other than equal shares (tokens, in-batch negatives) must say so, or the two runs part.

The trainers' AdamW is replaced by plain SGD here: Adam divides each gradient by its own scale, which
turns float noise in a gradient that should be zero (a key bias) into a full step and hides a gradient
scaled by a constant; with SGD the weights differ exactly as much as the summed gradients do."""

import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from transformers import AutoTokenizer, BertModel

TOPICS = ["kernel", "socket", "thread", "signal", "memory", "file", "clock", "pipe"]
GLOBAL_BATCH, STEPS = 4, 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _process(rank: int, world: int, port: int, job, args) -> None:
    """One process of ``world``, in the environment torchrun gives (Accelerate reads it)."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
    )
    job(world, *args)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def weights_in_one_and_two_processes(job, tmp_path, *args) -> tuple[dict, dict]:
    from longdoc.train import nci, pretrain, steps

    kept = steps.adamw_with_warmup, nci.two_learning_rates, pretrain.adamw_with_warmup
    try:
        job(1, tmp_path / "one.pt", *args)
    finally:
        steps.adamw_with_warmup, nci.two_learning_rates, pretrain.adamw_with_warmup = kept
    mp.spawn(_process, args=(2, free_port(), job, (tmp_path / "two.pt", *args)), nprocs=2, join=True)
    return torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")


def assert_same_weights(one: dict, two: dict) -> None:
    assert one.keys() == two.keys()
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-6, msg=name)


def plain_sgd(model: torch.nn.Module, total_steps: int, *unused, **also_unused):
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)


def with_plain_sgd() -> None:
    """This process's trainers step with :func:`plain_sgd`."""
    from longdoc.train import nci, pretrain, steps

    steps.adamw_with_warmup = lambda model, *args, **kwargs: plain_sgd(model, 0)
    pretrain.adamw_with_warmup = lambda model, *args, **kwargs: plain_sgd(model, 0)
    nci.two_learning_rates = lambda config: plain_sgd


def save_from_first(model: torch.nn.Module, out) -> None:
    if not dist.is_initialized() or dist.get_rank() == 0:
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, out)


# -- matching ---------------------------------------------------------------------------------------
def matching_job(world: int, out, backbone: str) -> None:
    with_plain_sgd()
    from longdoc.data.pairs import DocumentPair
    from longdoc.experiments.families.matching import build_matcher
    from longdoc.models.registry import encoder_class
    from longdoc.text.segments import SegmentedCorpus
    from longdoc.train.loop import TrainConfig
    from longdoc.train.matching import train_matcher

    encoder = encoder_class("MatchBERT").config_class(backbone=backbone, segment_length=16, max_segments=1)
    matcher = build_matcher("MatchBERT", encoder, seed=0)
    texts = [f"the {topic} of the system and its {topic} calls" for topic in TOPICS]
    corpus = SegmentedCorpus.build(matcher.encoder.tokenizer, TOPICS, texts, 16, 1)
    pairs = [DocumentPair(TOPICS[i], TOPICS[(i + 1 + i % 3) % 8], i % 2) for i in range(8)]
    config = TrainConfig(steps=STEPS, batch_size=GLOBAL_BATCH // world, learning_rate=1e-3, hard_negatives=0)
    train_matcher(matcher, corpus, pairs, config, progress=False)
    save_from_first(matcher, out)


@pytest.mark.slow
def test_the_matching_trainer_in_two_processes_equals_one(still_backbone, tmp_path):
    assert_same_weights(*weights_in_one_and_two_processes(matching_job, tmp_path, still_backbone))


# -- NCI (two views, eq. 5 over the batch's other queries, identifiers of different lengths) -----------
IDS = [(0, 0), (1,), (0, 1), (2, 0, 0), (0, 2), (3,), (2, 0, 1), (2, 1)]  # the first step: 8 tokens vs 4


def nci_job(world: int, out, backbone: str, alpha: float) -> None:
    with_plain_sgd()
    from longdoc.index.semantic_ids import IdTokenizer
    from longdoc.models.nci import NciConfig, NciModel
    from longdoc.train.nci import NciTrainConfig, train_nci

    id_tokenizer = IdTokenizer.fit(IDS)
    torch.manual_seed(0)
    config = NciConfig(
        backbone="still",
        vocab_size=id_tokenizer.vocab_size,
        max_id_length=id_tokenizer.depth + 1,
        decoder_layers=1,
        adaptor_layers=1,
        adaptor_rank=2,
        dropout=0.0,
    )
    model = NciModel.build(config, BertModel.from_pretrained(backbone), AutoTokenizer.from_pretrained(backbone))
    examples = [(f"what is a {topic}", number) for number, topic in enumerate(TOPICS)]
    train = NciTrainConfig(
        steps=STEPS,
        batch_size=GLOBAL_BATCH // world,
        encoder_learning_rate=1e-3,
        decoder_learning_rate=3e-3,
        alpha=alpha,
    )
    train_nci(model, examples, [id_tokenizer.encode(i) for i in IDS], train, progress=False)
    save_from_first(model, out)


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.0, 0.15])
def test_the_nci_trainer_in_two_processes_equals_one(still_backbone, tmp_path, alpha):
    assert_same_weights(*weights_in_one_and_two_processes(nci_job, tmp_path, still_backbone, alpha))


# -- the query generator (token means over queries of different lengths) --------------------------------
def doc2query_job(world: int, out, backbone: str) -> None:
    with_plain_sgd()
    from longdoc.models.doc2query import Doc2Query, QueryGenerationConfig
    from longdoc.train.doc2query import train_doc2query

    torch.manual_seed(0)
    config = QueryGenerationConfig(
        input_length=16, max_query_length=8, train_steps=STEPS, batch_size=GLOBAL_BATCH // world, learning_rate=1e-3
    )
    generator = Doc2Query.from_backbone(backbone, config)
    pairs = [(f"the {t} of the system " * 2, " ".join([t] * (1 + i % 4))) for i, t in enumerate(TOPICS)]
    train_doc2query(generator, pairs, [], progress=False)
    save_from_first(generator.model, out)


@pytest.mark.slow
def test_the_query_generator_trainer_in_two_processes_equals_one(still_backbone, tmp_path):
    assert_same_weights(*weights_in_one_and_two_processes(doc2query_job, tmp_path, still_backbone))


# -- pre-training (masks per document, token means over every process, SMITH's in-batch blocks) ----------
LONG_TEXTS = [f"the {t} of the system and its {t} calls, " * (1 + i % 4) for i, t in enumerate(TOPICS)]  # 1-3 blocks


def pretraining_job(world: int, out, backbone: str, system: str) -> None:
    with_plain_sgd()
    from longdoc.models.lmae import LongtrieverPretraining
    from longdoc.models.longtriever import Longtriever, LongtrieverConfig
    from longdoc.models.smith import Smith, SmithConfig, SmithPretraining
    from longdoc.seeding import seeded
    from longdoc.text.segments import SegmentedCorpus
    from longdoc.train.pretrain import PretrainConfig, pretrain_encoder

    with seeded(1):
        if system == "Longtriever":
            encoder = Longtriever(LongtrieverConfig(backbone=backbone, segment_length=16, max_segments=3))
            task = LongtrieverPretraining(encoder, mlm_ratio=0.3, lmae_ratio=0.5, decoder_init="copy")
        else:
            encoder = Smith(SmithConfig(backbone=backbone, segment_length=16, max_segments=3, document_layers=1))
            task = SmithPretraining(encoder, mlm_ratio=0.3, masked_blocks=1)
    corpus = SegmentedCorpus.build(encoder.tokenizer, TOPICS[:7], LONG_TEXTS[:7], 16, 3)  # step 2: 3 documents
    config = PretrainConfig(steps=STEPS, batch_size=GLOBAL_BATCH // world, learning_rate=1e-3, seed=3)
    result = pretrain_encoder(task, corpus, config, progress=False)
    save_from_first(task, out)
    if not dist.is_initialized() or dist.get_rank() == 0:
        Path(out).with_suffix(".json").write_text(json.dumps(result.history))


@pytest.mark.slow
@pytest.mark.parametrize("system", ["Longtriever", "SMITH"])
def test_pretraining_in_two_processes_equals_one(still_backbone, tmp_path, system):
    """Longtriever's MLM + LMAE and SMITH's L_wp + L_sp (blocks contrasted across the global batch), over an
    epoch whose last global batch is short (7 documents, 4 a step: 2 + 1 in two processes); the history
    logs the global batch's losses either way."""
    assert_same_weights(*weights_in_one_and_two_processes(pretraining_job, tmp_path, still_backbone, system))
    one, two = (json.loads((tmp_path / name).read_text()) for name in ("one.json", "two.json"))
    assert [r["epoch"] for r in one] == [1, 1, 2]
    for a, b in zip(one, two, strict=True):
        assert a.pop("phase") == b.pop("phase") and b == pytest.approx(a, rel=1e-5, abs=1e-6)


def token_store_job(world: int, folder, tokenizer_path: str) -> None:
    """Every process builds the same token store: the first writes it, the others open it."""
    from transformers import AutoTokenizer

    from longdoc.experiments.families.worker import join_processes
    from longdoc.text import segments

    written = Path(folder) / "written"
    original = segments.write_token_store

    def counted(*args, **kwargs):
        with written.open("a") as handle:
            handle.write(f"{os.getpid()}\n")
        return original(*args, **kwargs)

    segments.write_token_store = counted
    join_processes()  # what torchrun's worker does first
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    corpus = segments.SegmentedCorpus.build(tokenizer, TOPICS, LONG_TEXTS, 16, 3, directory=Path(folder) / "tokens")
    (Path(folder) / f"read{dist.get_rank() if world > 1 else 0}").write_text(json.dumps(list(corpus.segments)))


def test_several_processes_build_one_token_store_once(still_backbone, tmp_path):
    mp.spawn(_process, args=(2, free_port(), token_store_job, (tmp_path, still_backbone)), nprocs=2, join=True)
    assert len((tmp_path / "written").read_text().split()) == 1
    assert (tmp_path / "read0").read_text() == (tmp_path / "read1").read_text() != "[]"


def test_fewer_items_than_one_step_across_processes_is_refused_before_training():
    """Two processes of 4 items each and 6 items: one would get none and wait in a gather for ever."""
    from types import SimpleNamespace

    from longdoc.train.loop import TrainConfig
    from longdoc.train.steps import run_steps

    two = SimpleNamespace(num_processes=2, process_index=0)
    config = TrainConfig(steps=1, batch_size=4, hard_negatives=0)
    with pytest.raises(ValueError, match="6 training items, fewer than one step's 8 .2 processes x 4."):
        run_steps(torch.nn.Linear(2, 2), list(range(6)), config, None, description="toy", accelerator=two)
