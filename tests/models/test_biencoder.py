import numpy as np
import pytest
import torch

from longdoc.models import EncoderConfig, FirstP, MaxP
from longdoc.models.biencoder import maxp_scores
from longdoc.text import SegmentedCorpus


def make(cls, tiny_bert, tokenizer, **kw):
    config = EncoderConfig(**{"segment_length": 16, "max_segments": 3, "max_query_length": 8, **kw})
    return cls(config, tiny_bert, tokenizer)


TEXTS = ["short page", "a somewhat longer page " * 6, "the longest page of them all with many words " * 9]


def test_firstp_reads_one_segment(tiny_bert, tokenizer):
    with pytest.raises(ValueError, match="one segment"):
        make(FirstP, tiny_bert, tokenizer)
    model = make(FirstP, tiny_bert, tokenizer, max_segments=1)
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b", "c"], TEXTS, 16, 1)
    vectors, owners = model.encode_corpus(corpus, progress=False)
    assert vectors.shape == (3, 32) and sorted(owners) == [0, 1, 2]


def test_ragged_segments_shapes_and_masks(tiny_bert, tokenizer):
    model = make(MaxP, tiny_bert, tokenizer)
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b", "c"], TEXTS, 16, 3)
    assert [len(s) for s in corpus.segments] == [1, 2, 3]
    batch = model.doc_inputs(corpus.segments)
    assert batch.input_ids.shape[0] == 6 and batch.input_ids.shape[1] <= 16
    assert (batch.input_ids[:, 0] == tokenizer.cls_token_id).all()
    q, docs, mask = model(model.query_inputs(["a query"]), batch)
    assert docs.shape == (3, 3, 32) and mask.tolist() == [[True, False, False], [True, True, False], [True] * 3]
    assert torch.all(docs[0, 1:] == 0)


def test_batched_equals_per_document_encoding(tiny_bert, tokenizer):
    model = make(MaxP, tiny_bert, tokenizer)
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b", "c"], TEXTS, 16, 3)
    vectors, owners = model.encode_corpus(corpus, max_tokens=40, progress=False)
    for doc in range(3):
        alone, _ = model.encode_corpus(SegmentedCorpus(["x"], [corpus.segments[doc]]), progress=False)
        np.testing.assert_allclose(vectors[owners == doc], alone, atol=1e-5)


def test_maxp_scores_is_max_over_real_segments():
    torch.manual_seed(1)
    q, docs = torch.randn(4, 8), torch.randn(5, 3, 8)
    mask = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=torch.bool)
    got = maxp_scores(q, docs, mask)
    for i in range(4):
        for d in range(5):
            want = max(float(q[i] @ docs[d, s]) for s in range(3) if mask[d, s])
            assert got[i, d].item() == pytest.approx(want, abs=1e-5)


def test_save_and_load_round_trip(tiny_bert, tokenizer, tmp_path):
    model = make(MaxP, tiny_bert, tokenizer)
    model.save(tmp_path / "m")
    again = MaxP.load(tmp_path / "m")
    assert again.config.max_segments == 3
    a = model.encode_queries(["hello there"])
    b = again.encode_queries(["hello there"])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="pooling"):
        EncoderConfig(pooling="max")


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision"):
        EncoderConfig(precision="fp16")


@pytest.mark.parametrize("name", ["FirstP", "MaxP", "PARADE", "Hi-Transformer", "Longtriever"])
def test_bf16_precision_gives_fp32_vectors_close_to_fp32(name, tiny_bert, tokenizer):
    """Mixed precision changes the arithmetic, not the interface: fp32 vectors out, fp32 gradients."""
    from longdoc.models.registry import ENCODERS as MODELS

    segments = 1 if name == "FirstP" else 3
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b", "c"], TEXTS, 16, segments)
    encoded = {}
    for precision in ("fp32", "bf16"):
        config = MODELS[name].config_class(
            segment_length=16, max_segments=segments, max_query_length=8, precision=precision
        )
        model = MODELS[name](config, tiny_bert, tokenizer)
        vectors, _ = model.encode_corpus(corpus, progress=False)
        encoded[precision] = np.concatenate([vectors, model.encode_queries(["a query", "another query"])])
    assert encoded["bf16"].dtype == np.float32
    cosine = (
        (encoded["bf16"] * encoded["fp32"]).sum(1)
        / np.linalg.norm(encoded["bf16"], axis=1)
        / np.linalg.norm(encoded["fp32"], axis=1)
    )
    assert cosine.min() > 0.99 and not np.array_equal(encoded["bf16"], encoded["fp32"])
    q, docs, _ = model(model.query_inputs(["a query"]), model.doc_inputs(corpus.segments))
    assert q.dtype == docs.dtype == torch.float32
    (q @ docs[:, 0].T).sum().backward()
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in model.parameters())


def test_token_batches_hold_whole_documents_within_the_budget(tiny_bert, tokenizer):
    model = make(MaxP, tiny_bert, tokenizer)
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b", "c"], TEXTS, 16, 3)
    for budget in (16, 40, 100, 10_000):
        batches = model.token_batches(corpus, budget)
        assert sorted(i for batch in batches for i in batch) == [0, 1, 2]
        for batch in batches:
            segments = [s for i in batch for s in corpus.segments[i][:3]]
            assert len(batch) == 1 or len(segments) * (max(map(len, segments)) + 2) <= budget
    assert len(model.token_batches(corpus, 10_000)) == 1


def _registered_classes() -> list[str]:
    from longdoc.models.registry import ENCODERS

    return list({cls: name for name, cls in reversed(ENCODERS.items())}.values())  # a class once (MatchBERT is FirstP)


@pytest.mark.parametrize("name", _registered_classes())
def test_every_trainable_parameter_gets_a_gradient_as_several_processes_need(name, tiny_backbone):
    """DDP over several processes waits for a gradient of every trainable parameter: one that a model never
    reads stops its fit at the second step (HAN reads only BERT's word embeddings, so it freezes the rest);
    a query-document score and a matcher's document vectors both reach every one."""
    from longdoc.models.registry import build_encoder, encoder_class

    blocks = 1 if name == "FirstP" else 3
    config = encoder_class(name).config_class(backbone=tiny_backbone, segment_length=16, max_segments=blocks)
    for path in ("score", "document vectors"):
        model = build_encoder(name, config, 0).train()
        corpus = SegmentedCorpus.build(
            model.tokenizer, ["a", "b", "c"], [t + ". More. Words." for t in TEXTS], 16, blocks
        )
        batch = model.doc_inputs(corpus.segments)
        if path == "score":
            loss = model.score(*model(model.query_inputs(["a query"]), batch)).sum()
        else:
            loss = model.document_vectors(batch)[0].sum()
        loss.backward()
        assert [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None] == [], path
