import pytest
import torch

from longdoc.index.nci_retriever import DecodingConfig, NciRetriever
from longdoc.index.semantic_ids import IdTokenizer, random_ids
from longdoc.models.nci import NciConfig, NciModel
from longdoc.train.nci import NciTrainConfig, identifier_batch, train_nci

TOPICS = ["kernel", "socket", "thread", "signal", "memory", "file", "clock", "pipe"]


def tiny_nci_config(id_tokenizer: IdTokenizer, **changes) -> NciConfig:
    """One decoder layer, one PAWA layer of rank 2 over the tiny backbone."""
    fields = dict(decoder_layers=1, adaptor_layers=1, adaptor_rank=2)
    return NciConfig(
        backbone="tiny",
        vocab_size=id_tokenizer.vocab_size,
        max_id_length=id_tokenizer.depth + 1,
        **(fields | changes),
    )


def test_identifier_batch_shifts_right_after_the_start_token():
    inputs, labels = identifier_batch([[5, 9, 1], [4, 1]])
    assert inputs.tolist() == [[0, 5, 9], [0, 4, 0]]
    assert labels.tolist() == [[5, 9, 1], [4, 1, -100]]


@pytest.mark.parametrize(("alpha", "precision"), [(0.0, "fp32"), (0.15, "fp32"), (0.15, "bf16")])
def test_nci_memorises_a_tiny_corpus(tiny_bert, tokenizer, alpha, precision):
    """Under bf16 autocast (the ``paper`` profile's precision) as in fp32."""
    ids = random_ids(len(TOPICS), k=2, c=3, seed=0)
    id_tokenizer = IdTokenizer.fit(ids)
    torch.manual_seed(0)
    model = NciModel.build(
        tiny_nci_config(id_tokenizer),
        tiny_bert,
        tokenizer,
    )
    examples = [(f"what is a {topic}", number) for number, topic in enumerate(TOPICS)]
    config = NciTrainConfig(
        steps=90,
        batch_size=4,
        encoder_learning_rate=1e-3,
        decoder_learning_rate=3e-3,
        alpha=alpha,
        eval_every=30,
        warmup_ratio=0.0,
        precision=precision,
    )
    result = train_nci(model, examples, [id_tokenizer.encode(i) for i in ids], config, progress=False)
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < losses[0] / 2
    retriever = NciRetriever(model, TOPICS, ids, id_tokenizer, DecodingConfig(beam_size=3))
    run = retriever.search({topic: f"what is a {topic}" for topic in TOPICS}, k=3)
    assert sum(max(hits, key=hits.get) == topic for topic, hits in run.items()) >= 6


def test_the_step_mask_keeps_each_position_s_digits_and_eos():
    positional, shared = IdTokenizer(base=3, depth=2), IdTokenizer(base=3, depth=2, positional=False)
    mask = positional.step_mask(3)
    assert [list(map(int, row)) for row in mask] == [
        [0, 1, 1, 1, 1, 0, 0, 0],
        [0, 1, 0, 0, 0, 1, 1, 1],
        [0, 1] + [0] * 6,
    ]
    assert shared.step_mask(2).tolist() == [[False, True, True, True, True]] * 2  # DSI: every digit, every step


def test_the_per_position_cross_entropy_is_the_softmax_over_the_position_s_tokens(tiny_bert_with, tokenizer):
    """As released: at the same weights, the first step's logged cross-entropy is the brute-force mean
    of -log softmax over each step's allowed tokens; over the whole vocabulary it is higher."""
    ids = random_ids(len(TOPICS), k=2, c=3, seed=0)
    id_tokenizer = IdTokenizer.fit(ids)
    config = tiny_nci_config(id_tokenizer, dropout=0.0)
    encoder = tiny_bert_with(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # same logits in train mode
    examples = [(f"what is a {topic}", number) for number, topic in enumerate(TOPICS)][:4]
    tokens = [id_tokenizer.encode(i) for i in ids]
    mask = id_tokenizer.step_mask(config.max_id_length)
    logged = {}
    for per_position in (True, False):
        torch.manual_seed(0)
        model = NciModel.build(config, encoder, tokenizer)
        train = NciTrainConfig(
            steps=1,
            batch_size=4,
            alpha=0.0,
            per_position=per_position,
            encoder_learning_rate=0.0,
            decoder_learning_rate=0.0,
            eval_every=1,
        )
        if per_position:
            torch.manual_seed(0)
            reference = NciModel.build(config, encoder, tokenizer)
            reference.eval()
            inputs = reference.query_inputs([q for q, _ in examples])
            decoder_inputs, labels = identifier_batch([tokens[n] for _, n in examples])
            with torch.no_grad():
                logits = reference(**inputs, decoder_input_ids=decoder_inputs).logits
            allowed = torch.from_numpy(mask[: logits.shape[1]])
            log_probs = logits.masked_fill(~allowed, float("-inf")).log_softmax(-1)
            chosen = labels != -100
            expected = -log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)[chosen].mean().item()
        result = train_nci(model, examples, tokens, train, progress=False, step_mask=mask)
        logged[per_position] = result.history[0]["terms"]["cross_entropy"]
    assert logged[True] == pytest.approx(expected, rel=1e-4) and logged[False] > logged[True]


def test_examples_outside_the_identifiers_are_refused(tiny_bert, tokenizer):
    model = NciModel.build(
        NciConfig(backbone="tiny", vocab_size=8, max_id_length=3, decoder_layers=1), tiny_bert, tokenizer
    )
    with pytest.raises(ValueError, match="outside"):
        train_nci(model, [("q", 5)], [[2, 1]], NciTrainConfig(steps=1), progress=False)
    with pytest.raises(ValueError, match="precision"):
        NciTrainConfig(steps=1, precision="fp16")


def test_pawa_learns_as_fast_as_the_plain_decoder_and_adapts_less_than_the_state(tokenizer):
    """At the project's width (d = 384, rank 8) and learning rates, the same steps and order: the PAWA
    decoder's training loss ends at most at the plain decoder's and falls at every evaluation, and its
    relative change |h A − h| / |h| stays below 0.6 (seen: 0.49; the unscaled build's 0.76–1.01 at ``cpu``
    is what the scale fixes). The unscaled adaptor (``scale = 1``, the build before the 1/√(d·r) scale)
    went from 1.87 up to 2.30 between two evaluations, with a relative change of 1.29: it fails the
    falling-loss and the change bounds (its last loss alone can still end below the plain decoder's)."""
    from longdoc.bench.nci_pawa import memorisation_model, memorisation_task

    ids, examples = memorisation_task(tokenizer)
    id_tokenizer = IdTokenizer.fit(ids)
    tokens = [id_tokenizer.encode(i) for i in ids]
    config = NciTrainConfig(steps=40, batch_size=16, alpha=0.0, eval_every=10, warmup_ratio=0.6)
    histories = {}
    for adaptor_layers in (0, 2):
        model = memorisation_model(id_tokenizer, tokenizer, 384, adaptor_layers)
        histories[adaptor_layers] = train_nci(model, examples, tokens, config, progress=False).history
    plain, pawa = ([h["train_loss"] for h in histories[n]] for n in (0, 2))
    assert plain[-1] < plain[0] * 0.6, f"the plain decoder did not learn the task: {plain}"
    assert pawa[-1] <= plain[-1] and all(b < a for a, b in zip(pawa, pawa[1:])), (pawa, plain)
    assert all(0 < h["terms"]["adaptor_change"] < 0.6 for h in histories[2][1:]), histories[2]
