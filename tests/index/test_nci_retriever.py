import pytest
import torch

from longdoc.index.nci_retriever import INVALID_PREFIX, DecodingConfig, NciRetriever, beam_search
from longdoc.index.semantic_ids import IdTokenizer, hierarchical_ids
from longdoc.models.nci import NciConfig, NciModel
from longdoc.types import Retriever

QUERIES = ["open a file", "send a signal to a process", "format a number", "wait"]


def random_model(tiny_bert, tokenizer, id_tokenizer, seed):
    torch.manual_seed(seed)
    config = NciConfig(
        backbone="tiny",
        vocab_size=id_tokenizer.vocab_size,
        max_id_length=id_tokenizer.depth + 1,
        decoder_layers=1,
        adaptor_layers=1,
        adaptor_rank=2,
    )
    model = NciModel.build(config, tiny_bert, tokenizer).eval()
    torch.nn.init.normal_(model.adaptor.to_v.weight, std=0.2)  # a PAWA decoder that really adapts
    torch.nn.init.normal_(model.embedding.weight, std=1.0)  # peaked distributions: rankings far from uniform
    return model


def brute_force(model, query, sequences, length_penalty):
    """Every identifier's sequence score, computed by teacher forcing: Σ log p / L^length_penalty."""
    inputs = model.query_inputs([query])
    scored = []
    with torch.no_grad():
        for sequence in sequences:
            decoder_inputs = torch.tensor([[0, *sequence[:-1]]])
            log_probs = torch.log_softmax(model(**inputs, decoder_input_ids=decoder_inputs).logits[0], -1)
            total = log_probs[torch.arange(len(sequence)), torch.tensor(sequence)].sum().item()
            scored.append((total / len(sequence) ** length_penalty, sequence))
    return sorted(scored, key=lambda pair: -pair[0])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("length_penalty", [1.0, 0.8])
def test_beam_as_wide_as_the_tree_returns_the_brute_force_ranking(tiny_bert, tokenizer, seed, length_penalty):
    """Identifiers of different lengths (hierarchical k-means on random points), a beam as wide as the tree."""
    torch.manual_seed(seed)
    ids = hierarchical_ids(torch.randn(14, 4).numpy(), k=2, c=3, seed=seed)
    id_tokenizer = IdTokenizer.fit(ids)
    assert len({len(i) for i in ids}) > 1 or seed  # seed 0's tree has identifiers of several lengths (1, 2: may not)
    model = random_model(tiny_bert, tokenizer, id_tokenizer, seed)
    retriever = NciRetriever(
        model,
        [f"d{i}" for i in range(len(ids))],
        ids,
        id_tokenizer,
        DecodingConfig(beam_size=len(ids), length_penalty=length_penalty),
    )
    found = beam_search(model, QUERIES, retriever.tree, retriever.config)
    sequences = [id_tokenizer.encode(i) for i in ids]
    for query, hits in zip(QUERIES, found):
        expected = brute_force(model, query, sequences, length_penalty)
        assert [tokens for tokens, _ in hits] == [s for _, s in expected]
        assert [score for _, score in hits] == pytest.approx([score for score, _ in expected], abs=1e-4)


def test_constrained_search_returns_only_corpus_documents_and_unconstrained_may_not(tiny_bert, tokenizer):
    torch.manual_seed(3)
    ids = hierarchical_ids(torch.randn(30, 4).numpy(), k=3, c=4, seed=0)
    id_tokenizer = IdTokenizer.fit(ids)
    model = random_model(tiny_bert, tokenizer, id_tokenizer, 3)
    doc_ids = [f"d{i}" for i in range(len(ids))]
    constrained = NciRetriever(model, doc_ids, ids, id_tokenizer, DecodingConfig(beam_size=8, batch_size=3))
    assert isinstance(constrained, Retriever)
    run = constrained.search({f"q{i}": q for i, q in enumerate(QUERIES)}, k=8)
    assert all(len(hits) == 8 and set(hits) <= set(doc_ids) for hits in run.values())
    free = NciRetriever(model, doc_ids, ids, id_tokenizer, DecodingConfig(beam_size=8, constrained=False))
    loose = free.search({f"q{i}": q for i, q in enumerate(QUERIES)}, k=8)
    assert any(d.startswith(INVALID_PREFIX) for hits in loose.values() for d in hits)  # a random model strays


def test_batched_decoding_equals_one_query_at_a_time(tiny_bert, tokenizer):
    torch.manual_seed(4)
    ids = hierarchical_ids(torch.randn(20, 4).numpy(), k=3, c=3, seed=0)
    id_tokenizer = IdTokenizer.fit(ids)
    model = random_model(tiny_bert, tokenizer, id_tokenizer, 4)
    queries = {f"q{i}": q for i, q in enumerate(QUERIES)}
    batched = NciRetriever(
        model, [f"d{i}" for i in range(20)], ids, id_tokenizer, DecodingConfig(beam_size=5, batch_size=4)
    )
    single = NciRetriever(
        model, [f"d{i}" for i in range(20)], ids, id_tokenizer, DecodingConfig(beam_size=5, batch_size=1)
    )
    a, b = batched.search(queries, 5), single.search(queries, 5)
    assert {q: list(h) for q, h in a.items()} == {q: list(h) for q, h in b.items()}
    for q in queries:
        assert list(a[q].values()) == pytest.approx(list(b[q].values()), abs=1e-4)
