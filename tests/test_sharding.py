"""Encoding and dense runs under two gloo processes equal those of one process (vectors, owners,
order, and the run built from them, which the first process holds)."""

import json

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from longdoc.sharding import gather_in_order, my_share

WORDS = ["kernel", "socket", "thread", "signal", "memory", "file", "clock", "locale", "pipe", "mutex", "timer"]


def encode_everything(out_file):
    from transformers import AutoTokenizer, BertConfig, BertModel

    from longdoc.experiments.families.retrieval import dense_run
    from longdoc.models import EncoderConfig, MaxP, resolve_backbone
    from longdoc.text import SegmentedCorpus

    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    torch.manual_seed(0)
    bert = BertModel(
        BertConfig(
            vocab_size=30522,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
        ),
        add_pooling_layer=False,
    )
    model = MaxP(EncoderConfig(segment_length=16, max_segments=3, max_query_length=8), bert, tokenizer)
    texts = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(5 + 7 * (i % 5))) for i in range(23)]
    corpus = SegmentedCorpus.build(tokenizer, [f"d{i}" for i in range(23)], texts, 16, 3)
    vectors, owners = model.encode_corpus(corpus, max_tokens=64, progress=False)
    queries = {f"q{i}": w for i, w in enumerate(WORDS)}
    query_vectors = model.encode_queries(list(queries.values()), batch_size=3)
    run = dense_run(model, corpus, queries, k=5, progress=False)
    np.savez(out_file, vectors=vectors, owners=owners, queries=query_vectors)
    with open(str(out_file) + ".json", "w") as handle:
        json.dump(run, handle)


def worker(rank, world, init_file, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    assert [p for p, _ in my_share(list("abcde"))] == list(range(rank, 5, world))
    assert gather_in_order(my_share(list("abcde"))) == list("abcde")
    encode_everything(f"{out_dir}/rank{rank}.npz")
    dist.barrier()  # both done with every collective before the group is torn down (gloo aborts otherwise, rarely)
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_encode_and_search_like_one(tmp_path):
    torch.set_num_threads(1)
    encode_everything(tmp_path / "single.npz")
    mp.spawn(worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    single = np.load(tmp_path / "single.npz")
    single_run = json.loads((tmp_path / "single.npz.json").read_text())
    assert len(single["owners"]) > 23  # several segments per document: batches really were shared
    for rank in (0, 1):
        shared = np.load(tmp_path / f"rank{rank}.npz")
        np.testing.assert_array_equal(shared["owners"], single["owners"])
        np.testing.assert_allclose(shared["vectors"], single["vectors"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(shared["queries"], single["queries"], rtol=0, atol=1e-6)
        run = json.loads((tmp_path / f"rank{rank}.npz.json").read_text())
        expected = single_run if rank == 0 else {}  # the first process searches; the vectors exist once
        assert {q: list(docs) for q, docs in run.items()} == {q: list(docs) for q, docs in expected.items()}


def test_one_process_shares_nothing():
    assert my_share([3, 1, 2]) == [(0, 3), (1, 1), (2, 2)]
    assert gather_in_order([(1, "b"), (0, "a")]) == ["a", "b"]
