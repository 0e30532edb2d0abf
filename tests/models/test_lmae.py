import pytest
import torch

from longdoc.models.lmae import LMAEDecoder, LongtrieverPretraining
from longdoc.models.longtriever import Longtriever, LongtrieverConfig
from longdoc.seeding import seeded
from longdoc.text import SegmentedCorpus
from longdoc.train.pretrain import PretrainConfig, pretrain_encoder

TEXTS = [
    "the quick brown fox jumps over the lazy dog " * 8,
    "man pages describe system calls and library functions " * 5,
]


def encoder(tiny_bert, tokenizer, **kw):
    return Longtriever(
        LongtrieverConfig(segment_length=24, max_segments=3, max_query_length=8, **kw), tiny_bert, tokenizer
    )


def test_decoder_follows_its_mask(tiny_bert):
    """A query row's output depends only on the key columns its mask leaves visible."""
    decoder = LMAEDecoder(tiny_bert.encoder.layer[-1]).eval()
    queries, keys = torch.randn(1, 4, 32), torch.randn(1, 5, 32)
    keep = torch.ones(1, 4, 5, dtype=torch.bool)
    keep[0, 2, 3] = False
    changed = keys.clone()
    changed[0, 3] += 5.0
    with torch.no_grad():
        a, b = decoder(queries, keys, keep), decoder(queries, changed, keep)
    assert torch.allclose(a[0, 2], b[0, 2], atol=1e-6)
    assert not torch.allclose(a[0, 1], b[0, 1], atol=1e-3)


def test_losses_and_their_switches(tiny_bert, tokenizer):
    task = LongtrieverPretraining(encoder(tiny_bert, tokenizer))
    assert not task.head_pretrained
    assert task.head.predictions.decoder.weight is task.encoder.backbone.embeddings.word_embeddings.weight
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b"], TEXTS, 24, 3)
    losses = task(task.encoder.doc_inputs(corpus.segments), torch.Generator().manual_seed(0))
    assert set(losses) == {"mlm", "lmae", "loss"} and torch.isclose(losses["loss"], losses["mlm"] + losses["lmae"])
    mlm_only = LongtrieverPretraining(encoder(tiny_bert, tokenizer), lmae=False)
    assert set(mlm_only(mlm_only.encoder.doc_inputs(corpus.segments))) == {"mlm", "loss"}


def test_bf16_losses_are_fp32_and_close_to_fp32_losses(tiny_bert, tokenizer):
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b"], TEXTS, 24, 3)
    losses = {}
    for precision in ("fp32", "bf16"):
        with seeded(0):
            task = LongtrieverPretraining(encoder(tiny_bert, tokenizer, precision=precision)).eval()
        losses[precision] = task(task.encoder.doc_inputs(corpus.segments), torch.Generator().manual_seed(0))
    for name in ("mlm", "lmae", "loss"):
        assert losses["bf16"][name].dtype == torch.float32
        assert abs(losses["bf16"][name].item() - losses["fp32"][name].item()) < 0.02 * losses["fp32"][name].item(), name


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_pretraining_loss_decreases(precision, tiny_bert, tokenizer):
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b"], TEXTS, 24, 3)
    task = LongtrieverPretraining(encoder(tiny_bert, tokenizer, precision=precision))
    result = pretrain_encoder(
        task, corpus, PretrainConfig(epochs=30, batch_size=2, learning_rate=3e-3, warmup_ratio=0.0), progress=False
    )
    losses = [r["loss"] for r in result.history]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < 0.85 * sum(losses[:5]) / 5


def test_decoder_starts_random_or_as_a_copy_of_the_last_layer(tiny_bert, tokenizer):
    last = tiny_bert.encoder.layer[-1].state_dict()
    copied = LongtrieverPretraining(encoder(tiny_bert, tokenizer), decoder_init="copy").decoder.layer.state_dict()
    with seeded(0):
        random = LongtrieverPretraining(encoder(tiny_bert, tokenizer), decoder_init="random").decoder.layer.state_dict()
    assert all(torch.equal(copied[k], last[k]) for k in last)
    assert not torch.equal(random["attention.self.query.weight"], last["attention.self.query.weight"])
    with pytest.raises(ValueError, match="decoder_init"):
        LongtrieverPretraining(encoder(tiny_bert, tokenizer), decoder_init="warm")
    with pytest.raises(ValueError, match="decoder_init"):
        PretrainConfig(decoder_init="warm")


def test_head_warmup_trains_the_head_and_decoder_with_the_encoder_frozen(tiny_bert, tokenizer):
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b"], TEXTS, 24, 3)
    with seeded(0):
        task = LongtrieverPretraining(encoder(tiny_bert, tokenizer))
    before = {k: v.clone() for k, v in task.state_dict().items()}
    config = PretrainConfig(steps=0, epochs=1, batch_size=2, head_warmup_steps=3, warmup_ratio=0.0)
    result = pretrain_encoder(task, corpus, config, progress=False)
    assert [r["phase"] for r in result.history] == ["head"] * 3 + ["full"]
    changed = {k for k, v in task.state_dict().items() if not torch.equal(v.cpu(), before[k])}  # on a GPU: moved
    assert any(k.startswith("encoder.") for k in changed)  # the one full step
    with seeded(0):
        task2 = LongtrieverPretraining(encoder(tiny_bert_copy(tiny_bert), tokenizer))
    start = {k: v.clone() for k, v in task2.state_dict().items()}
    pretrain_encoder(
        task2,
        corpus,
        PretrainConfig(steps=1, batch_size=2, head_warmup_steps=3, warmup_ratio=0.0, learning_rate=0.0),
        progress=False,
    )
    moved = {k for k, v in task2.state_dict().items() if not torch.equal(v.cpu(), start[k])}
    assert moved and all(k.startswith(("head.", "decoder.")) for k in moved), moved  # lr 0 in the full phase
    assert all(p.requires_grad for p in task2.parameters())


def tiny_bert_copy(model):
    import copy

    return copy.deepcopy(model)
