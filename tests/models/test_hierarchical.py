"""Longtriever, Hi-Transformer and PARADE on tiny random BERTs (and once on the real backbone)."""

import numpy as np
import pytest
import torch
from transformers import BertModel

from longdoc.models import EncoderConfig, load_backbone
from longdoc.models.hi_transformer import HiTransformer
from longdoc.models.longtriever import Longtriever, LongtrieverConfig
from longdoc.models.parade import Parade, ParadeConfig
from longdoc.text import SegmentedCorpus

TEXTS = ["short page", "a somewhat longer page " * 6, "the longest page of them all with many words " * 9]
MODELS = {
    "Longtriever": (Longtriever, LongtrieverConfig),
    "Longtriever-IV": (Longtriever, lambda **kw: LongtrieverConfig(doc_token=False, **kw)),
    "Longtriever-V": (Longtriever, lambda **kw: LongtrieverConfig(doc_token=False, inter_block=False, **kw)),
    "Hi-Transformer": (HiTransformer, EncoderConfig),
    "PARADE": (Parade, ParadeConfig),
}


def make(name, tiny_bert, tokenizer, **kw):
    cls, config = MODELS[name]
    return cls(
        config(**{"segment_length": 16, "max_segments": 3, "max_query_length": 8, **kw}), tiny_bert, tokenizer
    ).eval()


def corpus(tokenizer):
    return SegmentedCorpus.build(tokenizer, ["a", "b", "c"], TEXTS, 16, 3)


def test_one_block_without_exchange_equals_plain_bert(tiny_bert, tokenizer):
    model = make("Longtriever-V", tiny_bert, tokenizer, max_segments=1)
    batch = model.doc_inputs([s[:1] for s in corpus(tokenizer).segments])
    reference = BertModel(tiny_bert.config, add_pooling_layer=False).eval()
    reference.load_state_dict(tiny_bert.state_dict())
    with torch.no_grad():
        states = model.encode_blocks(batch)
        plain = reference(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    torch.testing.assert_close(states.blocks[:, 0], plain[:, 0], atol=1e-5, rtol=1e-5)
    real = batch.attention_mask.bool()
    torch.testing.assert_close(states.tokens[real], plain[real], atol=1e-5, rtol=1e-5)


def test_pretrained_weights_reach_both_stacks():
    """Intra-block layer i is BERT layer i; inter-block layer i starts as a copy of it (upstream loaded neither)."""
    bert, tokenizer = load_backbone("minilm")
    fresh, _ = load_backbone("minilm")
    model = Longtriever(LongtrieverConfig(segment_length=32, max_segments=2), bert, tokenizer)
    for i, original in enumerate(fresh.encoder.layer):
        for (name, want), (_, intra), (_, inter) in zip(
            original.state_dict().items(),
            model.backbone.encoder.layer[i].state_dict().items(),
            model.inter_layers[i].state_dict().items(),
        ):
            assert torch.equal(intra, want), f"intra layer {i} {name}"
            assert torch.equal(inter, want), f"inter layer {i} {name}"
    assert (
        model.inter_layers[0].attention.self.query.weight.data_ptr()
        != bert.encoder.layer[0].attention.self.query.weight.data_ptr()
    )


@pytest.mark.parametrize("name", list(MODELS))
def test_ragged_blocks_shapes_and_batched_equals_alone(name, tiny_bert, tokenizer):
    model = make(name, tiny_bert, tokenizer)
    segmented = corpus(tokenizer)
    assert [len(s) for s in segmented.segments] == [1, 2, 3]
    q, docs, mask = model(model.query_inputs(["a query", "another query here"]), model.doc_inputs(segmented.segments))
    assert q.shape == (2, 32) and docs.shape == (3, 1, 32) and mask.all()
    vectors, owners = model.encode_corpus(segmented, max_tokens=40, progress=False)
    assert vectors.shape == (3, 32) and sorted(owners) == [0, 1, 2]
    for doc in range(3):
        alone, _ = model.encode_corpus(SegmentedCorpus(["x"], [segmented.segments[doc]]), progress=False)
        np.testing.assert_allclose(vectors[owners == doc], alone, atol=1e-5)


def test_padded_blocks_are_masked_in_longtriever(tiny_bert, tokenizer):
    model = make("Longtriever", tiny_bert, tokenizer)
    batch = model.doc_inputs(corpus(tokenizer).segments)
    with torch.no_grad():
        states = model.encode_blocks(batch)
    assert states.block_mask.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert torch.all(states.blocks[~states.block_mask] == 0)
    assert states.tokens.shape == batch.input_ids.shape + (32,)


def test_exchange_lets_tokens_see_other_blocks(tiny_bert, tokenizer):
    """Changing block 2 changes the token states of block 1 with the inter-block encoder, not without."""
    torch.manual_seed(0)
    sharp = BertModel(
        tiny_bert.config.__class__(**{**tiny_bert.config.to_dict(), "initializer_range": 0.3}), add_pooling_layer=False
    ).eval()  # std 0.02 attends almost uniformly: too weak a signal
    ids = tokenizer("one two three four five six seven", add_special_tokens=False)["input_ids"]
    other = tokenizer("completely different words here now", add_special_tokens=False)["input_ids"]
    for name, coupled in [("Longtriever", True), ("Longtriever-V", False), ("Hi-Transformer", True)]:
        model = make(name, sharp, tokenizer)
        with torch.no_grad():
            a = model.encode_blocks(model.doc_inputs([[ids, ids]])).tokens[0]
            b = model.encode_blocks(model.doc_inputs([[ids, other]])).tokens[0]
        assert ((a - b).abs().max() > 1e-3) == coupled, name


def test_intra_layers_run_once_per_layer_for_the_whole_batch(tiny_bert, tokenizer):
    model = make("Longtriever", tiny_bert, tokenizer)
    calls = []
    for layer in model.backbone.encoder.layer:  # the feed-forward of each intra-block layer
        layer.intermediate.register_forward_hook(lambda module, args, output: calls.append(tuple(output.shape[:2])))
    with torch.no_grad():
        batch = model.doc_inputs(corpus(tokenizer).segments)
        model.encode_blocks(batch)
    length = batch.input_ids.shape[1]
    assert calls == [(6, length), (6, length)]  # 2 layers, each over all 1 + 2 + 3 real blocks at once, no extra row


def test_doc_token_needs_inter_block():
    with pytest.raises(ValueError, match="inter_block"):
        LongtrieverConfig(doc_token=True, inter_block=False)


@pytest.mark.parametrize("name", ["Longtriever", "PARADE", "Hi-Transformer"])
def test_save_and_load_keep_the_extra_parameters(name, tiny_bert, tokenizer, tmp_path):
    model = make(name, tiny_bert, tokenizer)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    model.save(tmp_path / "m")
    again = type(model).load(tmp_path / "m").eval()
    np.testing.assert_allclose(model.encode_queries(["hello there"]), again.encode_queries(["hello there"]), atol=1e-6)
    with pytest.raises(ValueError, match="holds a"):
        (Parade if name != "PARADE" else Longtriever).load(tmp_path / "m")


def slot_formulation(model, batch):
    """Longtriever as the released code computes it: a slot in front of every block, masked in the
    first layer, refilled with the block's inter-block state after every layer and run as a query
    too (reference for the key/value-context implementation)."""
    from longdoc.models.attention import attention_bias
    from longdoc.models.biencoder import place_slots, slot_mask

    bert = model.backbone
    embedded = bert.embeddings(input_ids=batch.input_ids)
    rows, _, hidden = embedded.shape
    states = torch.cat([embedded.new_zeros(rows, 1, hidden), embedded], 1)
    keep = torch.cat([batch.attention_mask.new_zeros(rows, 1), batch.attention_mask], 1).bool()
    document = model.doc_embedding.expand(batch.num_docs, hidden)
    block_mask = slot_mask(batch.owner, batch.position, batch.num_docs, batch.max_segments)
    inter_bias = attention_bias(torch.cat([block_mask.new_ones(batch.num_docs, 1), block_mask], 1), states.dtype)
    for depth, layer in enumerate(bert.encoder.layer):
        states = layer(states, attention_mask=attention_bias(keep, states.dtype))
        blocks = place_slots(states[:, 1], batch.owner, batch.position, batch.num_docs, batch.max_segments)
        exchanged = model.inter_layers[depth](torch.cat([document[:, None], blocks], 1), attention_mask=inter_bias)
        document, exchanged = exchanged[:, 0], exchanged[:, 1:]
        states = torch.cat([exchanged[batch.owner, batch.position][:, None], states[:, 1:]], 1)
        keep = torch.cat([keep.new_ones(rows, 1), keep[:, 1:]], 1)
    return document, states[:, 1:]


def test_context_as_key_and_value_equals_the_released_slot_formulation(tiny_bert, tokenizer):
    model = make("Longtriever", tiny_bert, tokenizer)
    batch = model.doc_inputs(corpus(tokenizer).segments)  # ragged: 1, 2 and 3 blocks, a padded last block
    with torch.no_grad():
        ours = model.encode_blocks(batch)
        document, tokens = slot_formulation(model, batch)
    real = batch.attention_mask.bool()
    torch.testing.assert_close(ours.document, document, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.tokens[real], tokens[real], atol=1e-5, rtol=1e-5)
