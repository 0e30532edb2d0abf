import pytest
import torch

from longdoc.index.semantic_ids import IdTokenizer, hierarchical_ids
from longdoc.models.nci import NciConfig, NciModel
from longdoc.train.nci import identifier_batch


@pytest.fixture
def identifiers():
    torch.manual_seed(0)
    ids = hierarchical_ids(torch.randn(40, 6).numpy(), k=3, c=4, seed=0)
    return ids, IdTokenizer.fit(ids)


def build(tiny_bert, tokenizer, id_tokenizer, seed=0, **changes):
    torch.manual_seed(seed)
    fields = dict(
        backbone="tiny",
        vocab_size=id_tokenizer.vocab_size,
        max_id_length=id_tokenizer.depth + 1,
        decoder_layers=1,
        adaptor_layers=2,
        adaptor_rank=3,
    )
    config = NciConfig(**(fields | changes))
    return NciModel.build(config, tiny_bert, tokenizer).eval()


def batch(model, id_tokenizer, ids):
    inputs = model.query_inputs(["open a file", "send a signal to a process", "thread"])
    decoder_inputs, labels = identifier_batch([id_tokenizer.encode(i) for i in ids[:3]])
    return inputs, decoder_inputs, labels


def test_zero_adaptor_layers_is_the_plain_decoder(tiny_bert, tokenizer, identifiers):
    """logits = h W with W the tied token embedding (eq. 3), no adaptor parameters at all."""
    ids, id_tokenizer = identifiers
    model = build(tiny_bert, tokenizer, id_tokenizer, adaptor_layers=0)
    assert model.adaptor is None and not any(n.startswith("adaptor") for n, _ in model.named_parameters())
    inputs, decoder_inputs, _ = batch(model, id_tokenizer, ids)
    with torch.no_grad():
        memory = model.encode(inputs["input_ids"], inputs["attention_mask"])
        hidden = model.decoder_hidden(
            model.embedding(decoder_inputs), model.project_memory(memory, inputs["attention_mask"])
        )
        logits = model(**inputs, decoder_input_ids=decoder_inputs).logits
    torch.testing.assert_close(logits, hidden @ model.embedding.weight.T)


def test_a_new_pawa_decoder_starts_as_the_plain_decoder_and_then_depends_on_the_prefix(
    tiny_bert, tokenizer, identifiers
):
    ids, id_tokenizer = identifiers
    pawa = build(tiny_bert, tokenizer, id_tokenizer, adaptor_layers=2)
    plain = build(tiny_bert, tokenizer, id_tokenizer, adaptor_layers=0)
    plain.load_state_dict({k: v for k, v in pawa.state_dict().items() if not k.startswith("adaptor.")})
    inputs, decoder_inputs, _ = batch(pawa, id_tokenizer, ids)
    with torch.no_grad():
        torch.testing.assert_close(
            pawa(**inputs, decoder_input_ids=decoder_inputs).logits,
            plain(**inputs, decoder_input_ids=decoder_inputs).logits,
        )
        torch.nn.init.normal_(pawa.adaptor.to_v.weight, std=0.1)
        adapted = pawa(**inputs, decoder_input_ids=decoder_inputs).logits
        # step t's adapted weights depend on the prefix: change the token before the last step only
        changed = decoder_inputs.clone()
        changed[:, -1] = changed[:, -1] + 1
        moved = pawa(**inputs, decoder_input_ids=changed).logits
    assert not torch.allclose(adapted, plain(**inputs, decoder_input_ids=decoder_inputs).logits)
    torch.testing.assert_close(moved[:, :-1], adapted[:, :-1])  # causal: earlier steps unchanged


def test_pawa_parameters_are_proportionate(tiny_bert, tokenizer, identifiers):
    """The released adaptor projected d -> d·V; ours costs 2·d·d·r (+ the M3 layers), whatever V is."""
    ids, id_tokenizer = identifiers
    model = build(tiny_bert, tokenizer, id_tokenizer)
    d, rank = 32, 3
    projections = sum(p.numel() for n, p in model.adaptor.named_parameters() if n.startswith(("to_u", "to_v")))
    assert projections == 2 * (d * d * rank + d * rank)


def test_teacher_forcing_equals_step_by_step_decoding(tiny_bert, tokenizer, identifiers):
    """The parallel (teacher-forced) logits of step t equal those computed from the prefix alone."""
    ids, id_tokenizer = identifiers
    model = build(tiny_bert, tokenizer, id_tokenizer)
    torch.nn.init.normal_(model.adaptor.to_v.weight, std=0.1)
    inputs, decoder_inputs, _ = batch(model, id_tokenizer, ids)
    with torch.no_grad():
        full = model(**inputs, decoder_input_ids=decoder_inputs).logits
        for t in range(1, decoder_inputs.shape[1] + 1):
            torch.testing.assert_close(
                model(**inputs, decoder_input_ids=decoder_inputs[:, :t]).logits[:, -1], full[:, t - 1]
            )


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="vocab_size"):
        NciConfig(vocab_size=0, max_id_length=3)
    with pytest.raises(ValueError, match="adaptor_layers"):
        NciConfig(vocab_size=10, max_id_length=3, adaptor_layers=-1)


def test_cached_decoding_equals_recomputing_the_prefix(tiny_bert, tokenizer, identifiers):
    """Step-by-step decoding with the key-value cache gives the logits of a full recomputation."""
    ids, id_tokenizer = identifiers
    model = build(tiny_bert, tokenizer, id_tokenizer)
    torch.nn.init.normal_(model.adaptor.to_v.weight, std=0.1)
    inputs, decoder_inputs, _ = batch(model, id_tokenizer, ids)
    with torch.no_grad():
        full = model(**inputs, decoder_input_ids=decoder_inputs).logits
        cache = None
        for t in range(decoder_inputs.shape[1]):
            out = model(**inputs, decoder_input_ids=decoder_inputs[:, t : t + 1], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            torch.testing.assert_close(out.logits[:, 0], full[:, t], atol=1e-5, rtol=1e-5)


def test_the_adaptor_reads_the_prefix_and_the_query(tiny_bert, tokenizer, identifiers):
    """Eq. 4: W_ada^i = AdaptiveDecoder(e; r_1..r_{i-1}) W_i: with the decoder states held fixed, the
    adapted states change with an earlier prefix token and with the query embedding e."""
    ids, id_tokenizer = identifiers
    model = build(tiny_bert, tokenizer, id_tokenizer)
    torch.nn.init.normal_(model.adaptor.to_v.weight, std=0.1)
    torch.manual_seed(1)
    hidden = torch.randn(2, 3, 32)
    query = torch.randn(2, 32)
    prefix = model.embedding(torch.tensor([[5, 9, 13], [5, 9, 13]]))
    with torch.no_grad():
        base = model.adaptor(torch.cat([query[:, None], prefix[:, 1:]], 1), hidden, None)
        other_prefix = prefix.clone()
        other_prefix[:, 1] = model.embedding(torch.tensor(7))
        moved = model.adaptor(torch.cat([query[:, None], other_prefix[:, 1:]], 1), hidden, None)
        other_query = model.adaptor(torch.cat([torch.randn(2, 1, 32), prefix[:, 1:]], 1), hidden, None)
    assert torch.allclose(moved[:, 0], base[:, 0]) and not torch.allclose(moved[:, 1:], base[:, 1:])
    assert not torch.allclose(other_query, base)


def test_dsi_step_embedding_tells_the_steps_apart(tiny_bert, tokenizer, identifiers):
    """Over DSI's shared digits the same token at two steps gets two inputs; the cache keeps the offset."""
    ids, id_tokenizer = identifiers
    model = build(tiny_bert, tokenizer, id_tokenizer, adaptor_layers=0, step_embedding=True)
    inputs, decoder_inputs, _ = batch(model, id_tokenizer, ids)
    with torch.no_grad():
        full = model(**inputs, decoder_input_ids=decoder_inputs).logits
        cache = None
        for t in range(decoder_inputs.shape[1]):
            out = model(**inputs, decoder_input_ids=decoder_inputs[:, t : t + 1], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            torch.testing.assert_close(out.logits[:, 0], full[:, t], atol=1e-5, rtol=1e-5)
    assert model.steps is not None and model.steps.weight.shape[0] == id_tokenizer.depth + 1
