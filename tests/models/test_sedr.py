"""SeDR's Segment-Interaction Transformer (eqs. 7-8): equivalences with MaxP, a per-document
reference for the batched interaction, no leakage across documents, ragged segment counts."""

import copy

import pytest
import torch

from longdoc.models import EncoderConfig, MaxP
from longdoc.models.attention import attention_mix, finish_layer, layer_with_context
from longdoc.models.sedr import SeDR, SeDRConfig, other_segments

WORDS = ["kernel", "socket", "thread", "signal", "memory", "file", "clock", "locale", "pipe", "mutex"]


def documents(tokenizer, counts=(1, 3, 2), seed=0):
    """Token segments of documents with ``counts`` segments each (ragged)."""
    ids = [tokenizer.convert_tokens_to_ids(w) for w in WORDS]
    generator = torch.Generator().manual_seed(seed)
    return [
        [
            [
                ids[int(i)]
                for i in torch.randint(
                    len(ids), (int(torch.randint(3, 9, (1,), generator=generator)),), generator=generator
                )
            ]
            for _ in range(n)
        ]
        for n in counts
    ]


def sedr(tiny_bert, tokenizer, zero_order=True, **changes):
    """A tiny SeDR; ``zero_order``: the segment-order embedding set to 0 (the equivalences need it)."""
    model = SeDR(SeDRConfig(segment_length=12, max_segments=3, **changes), copy.deepcopy(tiny_bert), tokenizer).eval()
    if zero_order:
        torch.nn.init.zeros_(model.segment_embedding.weight)
    return model


@torch.no_grad()
def test_without_interaction_and_a_zero_segment_embedding_each_segment_is_maxp(tiny_bert, tokenizer):
    model = sedr(tiny_bert, tokenizer, interaction="none")
    maxp = MaxP(EncoderConfig(segment_length=12, max_segments=3), copy.deepcopy(tiny_bert), tokenizer).eval()
    batch = model.doc_inputs(documents(tokenizer))
    torch.testing.assert_close(model.segment_states(batch)[:, 0], maxp.encode_segments(batch), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        model.encode_segments(batch), maxp.encode_segments(batch), rtol=1e-5, atol=1e-5
    )  # W = I, b = 0
    query = model.query_inputs(["kernel signal"])
    ids, mask = query["input_ids"], query["attention_mask"]
    torch.testing.assert_close(model.embed(ids, mask), maxp.embed(ids, mask), rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_single_segment_documents_have_nothing_to_interact_with(tiny_bert, tokenizer):
    model, plain = sedr(tiny_bert, tokenizer), sedr(tiny_bert, tokenizer, interaction="none")
    batch = model.doc_inputs(documents(tokenizer, counts=(1, 1, 1)))
    torch.testing.assert_close(model.encode_segments(batch), plain.encode_segments(batch), rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_the_batched_interaction_equals_one_document_at_a_time(tiny_bert, tokenizer):
    """Reference: each document alone, its segments attending to the other segments' [CLS] states
    of the previous layer (eq. 7), written out with explicit per-segment key lists."""
    model = sedr(tiny_bert, tokenizer)
    torch.nn.init.normal_(model.segment_embedding.weight, std=0.5)  # the order embedding in play too
    docs = documents(tokenizer, counts=(1, 3, 2, 3))
    batched = model.encode_segments(model.doc_inputs(docs))
    reference = []
    for doc in docs:
        batch = model.doc_inputs([doc])
        hidden = model.input_states(batch)
        for layer in model.backbone.encoder.layer:
            rows = []
            for i in range(len(doc)):
                real = batch.attention_mask[i].bool()
                own = hidden[i : i + 1, real]
                context = (
                    torch.stack([hidden[j, 0] for j in range(len(doc)) if j != i]).unsqueeze(0)
                    if len(doc) > 1
                    else own[:, :0]
                )
                out = layer_with_context(layer, own, torch.cat([own, context], 1), None)
                rows.append(torch.nn.functional.pad(out, (0, 0, 0, hidden.shape[1] - out.shape[1])))
            hidden = torch.cat(rows)
        reference.append(model.head(hidden[:, 0]))
    torch.testing.assert_close(batched, torch.cat(reference), rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_segments_see_their_own_document_only(tiny_bert, tokenizer):
    model = sedr(tiny_bert, tokenizer)
    docs = documents(tokenizer, counts=(3, 2))
    before = model.encode_segments(model.doc_inputs(docs))
    changed = [list(docs[0]), docs[1]]
    changed[0][2] = [tokenizer.convert_tokens_to_ids("printer")] * 6  # the third segment of document 0
    after = model.encode_segments(model.doc_inputs(changed))
    assert not torch.allclose(before[0], after[0], atol=1e-6)  # segment 1 of document 0 reads segment 3's [CLS]
    torch.testing.assert_close(before[3:], after[3:])  # document 1 is untouched
    plain = sedr(tiny_bert, tokenizer, interaction="none")
    torch.testing.assert_close(
        plain.encode_segments(plain.doc_inputs(docs))[:2], plain.encode_segments(plain.doc_inputs(changed))[:2]
    )  # SeDR-MaxP: independent


def test_other_segments_index_the_same_document_in_order(tokenizer, tiny_bert):
    model = sedr(tiny_bert, tokenizer)
    batch = model.doc_inputs(documents(tokenizer, counts=(2, 3, 1)))  # flat segments: 0-1 | 2-4 | 5
    others, present = other_segments(batch)
    assert others.tolist() == [[1, -1], [0, -1], [3, 4], [2, 4], [2, 3], [-1, -1]]
    assert present.tolist() == [[True, False], [True, False], [True, True], [True, True], [True, True], [False, False]]


def test_the_variant_parameter_changes_the_module_and_survives_a_save(tiny_bert, tokenizer, tmp_path):
    model = sedr(tiny_bert, tokenizer)
    batch = model.doc_inputs(documents(tokenizer))
    with torch.no_grad():
        assert not torch.allclose(
            model.encode_segments(batch), sedr(tiny_bert, tokenizer, interaction="none").encode_segments(batch)
        )
        model.segment_embedding.weight.normal_()
    model.save(tmp_path / "sedr")
    loaded = SeDR.load(tmp_path / "sedr").eval()
    assert loaded.config.interaction == "sit"
    with torch.no_grad():
        torch.testing.assert_close(loaded.encode_segments(batch), model.encode_segments(batch))
    with pytest.raises(ValueError, match="interaction"):
        SeDRConfig(interaction="longformer")


@torch.no_grad()
def test_the_transformer_head_mixes_a_documents_segment_vectors_only(tiny_bert, tokenizer):
    model = sedr(tiny_bert, tokenizer, interaction="head")
    plain = sedr(tiny_bert, tokenizer, interaction="none")
    assert hasattr(model, "segment_layer") and not hasattr(plain, "segment_layer")
    docs = documents(tokenizer, counts=(3, 1, 2))
    batch = model.doc_inputs(docs)
    torch.testing.assert_close(model.encode_segments(batch), plain.encode_segments(batch))  # gate 0: SeDR-MaxP
    model.segment_gate.fill_(0.7)
    independent = plain.segment_states(batch)[:, 0]  # SeDR-MaxP's [CLS] states, before the map
    reference = []
    for start, count in ((0, 3), (3, 1), (4, 2)):  # each document's segments alone through the head layer
        rows = independent[start : start + count].unsqueeze(0)
        reference.append(layer_with_context(model.segment_layer, rows, rows, None)[0])
    mixed = independent + 0.7 * (torch.cat(reference) - independent)
    torch.testing.assert_close(model.encode_segments(batch), model.head(mixed), rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_global_attention_cls_reads_the_whole_document_and_tokens_their_segment(tiny_bert, tokenizer):
    """Reference, one document at a time: tokens attend within their segment; each [CLS] attends to
    every real token of its document through the global projections."""
    model = sedr(tiny_bert, tokenizer, interaction="global")
    for projections in model.global_projections:  # global projections unlike the local ones
        for linear in projections.values():
            linear.weight.add_(0.3 * torch.randn_like(linear.weight))
    docs = documents(tokenizer, counts=(2, 1, 3))
    batched = model.encode_segments(model.doc_inputs(docs))
    reference = []
    for doc in docs:
        batch = model.doc_inputs([doc])
        hidden = model.input_states(batch)
        real = batch.attention_mask.bool()
        for layer, projections in zip(model.backbone.encoder.layer, model.global_projections):
            everything = torch.cat([hidden[i, real[i]] for i in range(len(doc))]).unsqueeze(0)
            rows = []
            for i in range(len(doc)):
                own = hidden[i : i + 1, real[i]]
                local = attention_mix(layer.attention.self, own, own, None)
                cls = attention_mix(layer.attention.self, own[:, :1], everything, None, projections)
                out = finish_layer(layer, torch.cat([cls, local[:, 1:]], 1), own)
                rows.append(torch.nn.functional.pad(out, (0, 0, 0, hidden.shape[1] - out.shape[1])))
            hidden = torch.cat(rows)
        reference.append(model.head(hidden[:, 0]))
    torch.testing.assert_close(batched, torch.cat(reference), rtol=1e-4, atol=1e-5)


def test_global_attention_adds_three_projections_per_layer_and_equals_maxp_on_one_segment(tiny_bert, tokenizer):
    model, plain = sedr(tiny_bert, tokenizer, interaction="global"), sedr(tiny_bert, tokenizer, interaction="none")
    hidden, layers = tiny_bert.config.hidden_size, tiny_bert.config.num_hidden_layers
    extra = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == layers * 3 * (hidden * hidden + hidden)
    with torch.no_grad():  # at the start the global projections are the local ones: one segment = SeDR-MaxP
        batch = model.doc_inputs(documents(tokenizer, counts=(1, 1)))
        torch.testing.assert_close(model.encode_segments(batch), plain.encode_segments(batch), rtol=1e-5, atol=1e-5)
        batch = model.doc_inputs(documents(tokenizer, counts=(2, 3)))
        assert not torch.allclose(model.encode_segments(batch), plain.encode_segments(batch), atol=1e-5)


def test_the_order_embedding_starts_at_zero_and_the_map_at_the_identity(tiny_bert, tokenizer):
    model = sedr(tiny_bert, tokenizer, zero_order=False)
    assert not model.segment_embedding.weight.any()
    assert torch.equal(model.head.weight, torch.eye(32)) and not model.head.bias.any()


@torch.no_grad()
def test_global_attention_collapses_a_documents_segment_vectors_as_the_paper_builds_it(tiny_bert, tokenizer):
    """As the paper and its release build it (no own-segment bias): every [CLS] of a document reads the
    same keys with a query that differs only by the (zero) order embedding, so its segment vectors are
    identical; the order embedding, once trained, is what tells them apart."""
    model = sedr(tiny_bert, tokenizer, interaction="global")
    assert not any("own_segment" in name for name, _ in model.named_parameters())
    batch = model.doc_inputs(documents(tokenizer, counts=(3, 2, 3)))

    def largest_gap_within_documents() -> float:
        vectors = model.encode_segments(batch)
        return max(float((vectors[batch.owner == d] - vectors[batch.owner == d][0]).abs().max()) for d in range(3))

    assert largest_gap_within_documents() < 1e-5
    model.segment_embedding.weight.normal_(0, 0.5)
    assert largest_gap_within_documents() > 1e-3
