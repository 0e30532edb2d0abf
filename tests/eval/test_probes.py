import pytest
import torch
import torch.nn.functional as F

from longdoc.eval.probes import in_batch_probe, probe_pairs
from longdoc.models import EncoderConfig, MaxP
from longdoc.models.biencoder import maxp_scores
from longdoc.models.longtriever import Longtriever, LongtrieverConfig
from longdoc.text import SegmentedCorpus

WORDS = ["kernel", "socket", "thread", "signal", "memory", "file", "clock"]


def toy(tokenizer):
    texts = [f"{w} " * (5 + 3 * i) + "manual page" for i, w in enumerate(WORDS)]
    corpus = SegmentedCorpus.build(tokenizer, [f"d{i}" for i in range(len(WORDS))], texts, 8, 3)
    queries = {f"q{i}": w for i, w in enumerate(WORDS)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(len(WORDS))}
    return corpus, queries, qrels


def test_pairs_give_each_document_one_query(tokenizer):
    corpus, queries, qrels = toy(tokenizer)
    qrels["q1"] = {"d0": 1, "d1": 1}  # d0 is taken by q0, so q1 gets d1
    qrels["q2"] = {"d0": 1}  # nothing left: q2 is skipped
    qrels["q3"] = {"unknown": 1}
    qids, numbers = probe_pairs(queries, qrels, corpus, size=4)
    assert qids == ["q0", "q1", "q4", "q5"] and numbers == [0, 1, 4, 5]


@pytest.mark.parametrize("model_class,config_class", [(MaxP, EncoderConfig), (Longtriever, LongtrieverConfig)])
def test_probe_equals_one_full_batch(model_class, config_class, tiny_bert_with, tokenizer):
    tiny_bert = tiny_bert_with(initializer_range=0.3)  # std-0.02 weights give near-equal scores: argmax is a coin toss
    corpus, queries, qrels = toy(tokenizer)
    model = model_class(config_class(segment_length=8, max_segments=3, max_query_length=8), tiny_bert, tokenizer).eval()
    result = in_batch_probe(model, corpus, queries, qrels, size=7, batch_size=3)  # chunks of 3, 3, 1 documents
    with torch.no_grad():
        q, docs, mask = model(model.query_inputs(list(queries.values())), model.doc_inputs(corpus.segments))
    scores = maxp_scores(q, docs, mask)
    targets = torch.arange(7)
    assert result["queries"] == 7 and 0.0 < result["accuracy"] < 1.0
    assert result["accuracy"] == pytest.approx((scores.argmax(1) == targets).float().mean().item())
    assert result["loss"] == pytest.approx(F.cross_entropy(scores, targets).item(), rel=1e-4)
    unit = F.normalize((docs * mask[..., None]).sum(1), dim=-1)
    assert result["cosine"] == pytest.approx(((unit @ unit.T).sum().item() - 7) / 42, rel=1e-4)


def test_probe_needs_two_queries(tiny_bert, tokenizer):
    corpus, queries, qrels = toy(tokenizer)
    model = MaxP(EncoderConfig(segment_length=8, max_segments=3, max_query_length=8), tiny_bert, tokenizer)
    with pytest.raises(ValueError, match="at least 2"):
        in_batch_probe(model, corpus, {"q0": queries["q0"]}, qrels)
