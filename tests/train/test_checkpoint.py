"""A fine-tuning run killed with SIGKILL resumes from its saved state to the same final weights, dev
history and chosen step as an uninterrupted run (dropout on, so every random generator matters);
pre-training resumes the same way in either of its phases."""

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from longdoc.models.lmae import LongtrieverPretraining
from longdoc.models.longtriever import Longtriever, LongtrieverConfig
from longdoc.seeding import seeded
from longdoc.text import SegmentedCorpus
from longdoc.train.checkpoint import Checkpointer
from longdoc.train.pretrain import PretrainConfig, pretrain_encoder

CHILD = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel
    from longdoc.models import EncoderConfig, MaxP, resolve_backbone
    from longdoc.text import SegmentedCorpus
    from longdoc.train import TrainConfig, train_biencoder
    from longdoc.train.checkpoint import Checkpointer

    state_dir, out, kill_at, cache_size = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    words = ["kernel", "socket", "thread", "signal", "memory", "file", "clock", "locale"]
    corpus = SegmentedCorpus.build(tokenizer, [f"d{i}" for i in range(8)], [f"{w} " * 12 + "page about " + w for w in words], 16, 2)
    queries = {f"q{i}": w for i, w in enumerate(words)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(8)}
    negatives = {q: [d for d in corpus.doc_ids if d not in qrels[q]] for q in qrels}
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=128), add_pooling_layer=False)
    model = MaxP(EncoderConfig(segment_length=16, max_segments=2, max_query_length=8), bert, tokenizer)

    class Dev:
        def __init__(self):
            self.seen = []
        def state_dict(self):
            return {"seen": self.seen}
        def load_state_dict(self, state):
            self.seen = state["seen"]
        def __call__(self, model, step):
            if step == kill_at and not (state_dir / "killed").exists():
                (state_dir / "killed").write_text("")
                os.kill(os.getpid(), signal.SIGKILL)
            self.seen.append(step)
            with torch.no_grad():
                return float(sum(p.double().sum() for p in model.parameters())) % 1.0

    dev = Dev()
    config = TrainConfig(steps=10, batch_size=3, hard_negatives=1, learning_rate=1e-3, eval_every=2, seed=3, cache_size=cache_size)
    result = train_biencoder(model, queries, qrels, corpus, negatives, config, dev_eval=dev, progress=False,
                             checkpoint=Checkpointer(state_dir, every=1))
    torch.save(model.state_dict(), out)
    out.with_suffix(".json").write_text(json.dumps({"history": result.history, "best_step": result.best_step,
                                                     "best_dev": result.best_dev, "dev_seen": dev.seen}))
""")


def run_child(tmp_path: Path, name: str, kill_at: int, cache_size: int) -> subprocess.CompletedProcess:
    state = tmp_path / f"{name}_state"
    state.mkdir(exist_ok=True)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "LONGDOC_PROGRESS": "off", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(script), str(state), str(tmp_path / f"{name}.pt"), str(kill_at), str(cache_size)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("cache_size", [0, 4], ids=["in-batch negatives", "late-cache negatives"])
def test_a_killed_run_resumes_to_the_same_weights_and_metrics(tmp_path, cache_size):
    killed = run_child(tmp_path, "resumed", kill_at=6, cache_size=cache_size)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (tmp_path / "resumed.pt").exists()
    assert list((tmp_path / "resumed_state").glob(".*.tmp")) == []  # no half-written state
    resumed = run_child(tmp_path, "resumed", kill_at=6, cache_size=cache_size)
    assert resumed.returncode == 0, resumed.stderr
    straight = run_child(tmp_path, "straight", kill_at=-1, cache_size=cache_size)
    assert straight.returncode == 0, straight.stderr

    a, b = torch.load(tmp_path / "resumed.pt"), torch.load(tmp_path / "straight.pt")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    record_a = json.loads((tmp_path / "resumed.json").read_text())
    record_b = json.loads((tmp_path / "straight.json").read_text())
    assert record_a == record_b
    assert record_a["dev_seen"] == [2, 4, 6, 8, 10]  # the interrupted evaluation ran once, after the resume


class Interrupted(Exception):
    pass


class StopAfter(Checkpointer):
    """Saves like a Checkpointer, then stops the run after the ``n``-th save (a kill right after it)."""

    def __init__(self, directory, n):
        super().__init__(directory, every=1)
        self.n = n

    def save(self, state):
        super().save(state)
        self.n -= 1
        if self.n == 0:
            raise Interrupted


@pytest.mark.parametrize("stop_after", [1, 3], ids=["in the head phase", "in the full phase"])
def test_pretraining_resumes_in_either_phase_to_the_same_weights(tmp_path, tiny_bert, tokenizer, stop_after):
    texts = ["kernel socket thread signal memory file clock locale " * 4, "pipe mutex timer device network " * 5]
    corpus = SegmentedCorpus.build(tokenizer, ["a", "b"], texts, 24, 3)
    config = PretrainConfig(steps=4, head_warmup_steps=2, batch_size=1, learning_rate=3e-3, seed=5)

    def fresh_task():
        with seeded(1):
            return LongtrieverPretraining(
                Longtriever(LongtrieverConfig(segment_length=24, max_segments=3), copy.deepcopy(tiny_bert), tokenizer)
            )

    straight = fresh_task()
    expected = pretrain_encoder(straight, corpus, config, progress=False)
    resumed = fresh_task()
    with pytest.raises(Interrupted):
        pretrain_encoder(resumed, corpus, config, progress=False, checkpoint=StopAfter(tmp_path, stop_after))
    torch.manual_seed(123)  # whatever ran in between
    resumed = fresh_task()
    result = pretrain_encoder(resumed, corpus, config, progress=False, checkpoint=Checkpointer(tmp_path, every=1))
    assert result.history == expected.history
    a, b = resumed.state_dict(), straight.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
