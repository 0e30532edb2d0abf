import numpy as np
import pytest
import torch

from longdoc.data.beir import Document
from longdoc.data.matching import MatchingDataset
from longdoc.data.pairs import DocumentPair
from longdoc.eval.classification import accuracy_threshold, classification_metrics, pair_outcomes
from longdoc.experiments.families.matching import build_matcher, document_ranking, load_into
from longdoc.models.smith import Smith, SmithConfig
from longdoc.text.segments import SegmentedCorpus
from longdoc.train.loop import TrainConfig
from longdoc.train.matching import train_matcher


def test_accuracy_threshold_is_the_best_cut_on_dev():
    labels, scores = [0, 0, 1, 0, 1, 1], [0.1, 0.3, 0.35, 0.4, 0.8, 0.9]
    threshold = accuracy_threshold(labels, scores)
    best = max(classification_metrics(labels, scores, t)["Accuracy"] for t in np.linspace(0, 1, 201))
    assert classification_metrics(labels, scores, threshold)["Accuracy"] == best == pytest.approx(5 / 6)
    assert pair_outcomes(labels, scores, threshold).mean() == pytest.approx(5 / 6)


def test_document_ranking_equals_brute_force_and_leaves_the_source_out():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(9, 4)).astype(np.float32)
    owners = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4])
    ids = ["a", "b", "c", "d", "e"]
    run = document_ranking(vectors, owners, ids, ["a", "c"], k=3)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for source in ("a", "c"):
        mine = unit[owners == ids.index(source)]
        brute = {d: float((mine @ unit[owners == n].T).max()) for n, d in enumerate(ids) if d != source}
        expected = sorted(brute, key=lambda d: -brute[d])[:3]
        assert list(run[source]) == expected
        assert all(run[source][d] == pytest.approx(brute[d], abs=1e-5) for d in expected)


def test_subsampled_matching_dataset_keeps_whole_pairs_and_links():
    corpus = {d: Document(d, "", f"text {d}") for d in "abcdefgh"}
    pairs = {
        "train": [DocumentPair("a", "b", 1), DocumentPair("a", "c", 0)],
        "dev": [DocumentPair("d", "e", 1), DocumentPair("d", "f", 0)],
        "test": [DocumentPair("g", "h", 1), DocumentPair("g", "a", 0)],
    }
    data = MatchingDataset("toy", corpus, pairs, {"test": {"g": {"h", "b", "a"}}})
    assert data.ranking_qrels("test") == {"g": {"h": 1, "b": 1}}  # a: g's negative pair, not a relevant page
    small = data.subsample(4, seed=1)
    kept = {d for rows in small.pairs.values() for p in rows for d in (p.source, p.target)}
    assert kept <= set(small.corpus) and len(small.corpus) <= 4
    assert MatchingDataset("toy", corpus, pairs).ranking_qrels("dev") == {"d": {"e": 1}}  # no links: positive partners


def test_a_pretrained_smith_loads_into_fewer_blocks_and_another_combine_mode(tiny_backbone, tmp_path):
    torch.manual_seed(0)
    saved = Smith(SmithConfig(backbone=tiny_backbone, segment_length=8, max_segments=4, document_layers=1))
    saved.save(tmp_path / "pretrained")
    config = SmithConfig(
        backbone=tiny_backbone, segment_length=8, max_segments=2, document_layers=1, combine="attention"
    )
    model = load_into(Smith, config, tmp_path / "pretrained")
    assert torch.equal(model.block_position_embeddings.weight, saved.block_position_embeddings.weight[:2])
    assert torch.equal(model.document_dense.weight, saved.document_dense.weight)
    assert model.config.combine == "attention"
    longer = load_into(
        Smith,
        SmithConfig(backbone=tiny_backbone, segment_length=8, max_segments=6, document_layers=1),
        tmp_path / "pretrained",
    )
    assert torch.equal(longer.block_position_embeddings.weight[:4], saved.block_position_embeddings.weight)


def test_matcher_training_lowers_the_pair_loss(tiny_backbone):
    ids = [f"d{i}" for i in range(8)]
    topics = [[2001 + i % 2 * 50 + j for j in range(6)] for i in range(8)]  # two topics: even and odd documents
    corpus = SegmentedCorpus(ids, [[t[:3], t[3:]] for t in topics])
    pairs = [DocumentPair(ids[i], ids[j], int(i % 2 == j % 2)) for i in range(8) for j in range(i + 1, 8)]
    matcher = build_matcher(
        "SMITH", SmithConfig(backbone=tiny_backbone, segment_length=8, max_segments=2, document_layers=1), 0
    )
    config = TrainConfig(steps=20, batch_size=8, hard_negatives=0, learning_rate=3e-3, warmup_ratio=0.0)
    result = train_matcher(matcher, corpus, pairs, config, dev_eval=lambda m, step: -float(step), progress=False)
    assert result.best_step == 4  # evaluated after each pass of 4 steps; the first of a falling dev score is kept
    assert result.history[-1]["train_loss"] < 0.7 * result.history[0]["train_loss"]
    matcher.eval()
    from longdoc.train.matching import pair_batch

    batch, sources, targets = pair_batch(matcher, corpus, {d: i for i, d in enumerate(ids)}, pairs)
    with torch.no_grad():
        cosines = matcher(batch, sources, targets)
    labels = torch.tensor([p.label for p in pairs], dtype=torch.float)
    assert cosines[labels == 1].mean() > cosines[labels == 0].mean()


def _two_process_pairs(folder):
    """A tiny matching dataset whose fine-tuning takes two steps of 2 pairs per process."""
    import json

    from longdoc.data.matching import load_matching
    from longdoc.data.pairs import save_pairs

    words = ["kernel", "socket", "printf", "signal", "thread", "memory", "file", "pipe"]
    folder.mkdir()
    with (folder / "corpus.jsonl").open("w") as handle:
        for i in range(8):
            text = ". ".join(" ".join(words[(i + j) % 8] for j in range(5)) for _ in range(3))
            handle.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
    save_pairs(
        {
            "train": [DocumentPair(f"d{i}", f"d{(i + 1) % 8}", i % 2) for i in range(8)],
            "dev": [DocumentPair("d0", "d4", 1), DocumentPair("d1", "d5", 0)],
            "test": [DocumentPair("d2", "d6", 1), DocumentPair("d3", "d7", 0)],
        },
        folder,
    )
    return load_matching(str(folder))


@pytest.mark.slow
def test_a_matcher_fine_tunes_in_two_processes_launched_from_the_kernel(tiny_backbone, isolated_outputs, monkeypatch):
    """n_devices=2: torchrun starts two gloo processes (one per GPU on a GPU node), each takes half of a
    step's pairs; the first writes model, history and the dev-best scores into the cache, under a key of
    its own (tests/train/test_multiprocess_equivalence.py: the two processes equal one). Over two nodes
    (LONGDOC_NODES=2: two torchrun launchers meeting at a c10d rendezvous, here both on this machine) the
    fit is the one of two processes on one node."""
    import json

    import longdoc.experiments.cache as cache
    from longdoc.experiments.families.matching import finetune_matcher
    from longdoc.models.registry import encoder_class

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # each process one thread, one node or two: the same sums
    data = _two_process_pairs(isolated_outputs / "pairs-data")
    encoder = encoder_class("MatchBERT").config_class(backbone=tiny_backbone, segment_length=16, max_segments=1)
    train = TrainConfig(steps=2, batch_size=2, hard_negatives=0, learning_rate=1e-3)
    fit = finetune_matcher("MatchBERT", data, encoder, train, progress=False, n_devices=2)
    assert set(fit.outputs) == {"dev", "test", "ranking"} and len(fit.outputs["dev"]) == 2
    assert fit.last["steps_per_epoch"] == 2  # 8 pairs, 2 per process and step
    key = json.loads((fit.directory / "key.json").read_text())
    assert key["processes"] == 2
    assert not list(fit.directory.parent.glob("*.resume"))
    single = finetune_matcher("MatchBERT", data, encoder, train, progress=False)
    assert single.directory != fit.directory

    monkeypatch.setattr(cache, "CACHE_DIR", isolated_outputs / "two-nodes-cache")
    monkeypatch.setenv("LONGDOC_NODES", "2")
    monkeypatch.setenv("LONGDOC_LAUNCHER", "local")
    over_two_nodes = finetune_matcher("MatchBERT", data, encoder, train, progress=False, n_devices=2)
    assert over_two_nodes.directory.parent.parent == isolated_outputs / "two-nodes-cache"
    assert over_two_nodes.outputs == fit.outputs  # the dev-best checkpoint scores every pair alike


def test_smith_keeps_its_pretrained_block_head_and_centres_one_from_the_backbone(tiny_backbone, tmp_path):
    """The start rule centres SMITH's block head on the training documents only when fine-tuning starts
    from the backbone; a pre-trained checkpoint keeps the head its document layers were trained with."""
    from longdoc.experiments.families.matching import start_rule

    corpus = SegmentedCorpus(
        [f"d{i}" for i in range(4)], [[[2001 + i, 2002, 2003], [2010 + i, 2011]] for i in range(4)]
    )
    pairs = {
        "train": [DocumentPair("d0", "d1", 1), DocumentPair("d2", "d3", 0)],
        "dev": [DocumentPair("d0", "d2", 0)],
        "test": [DocumentPair("d1", "d3", 1)],
    }
    data = MatchingDataset("toy", {d: Document(d, "", d) for d in corpus.doc_ids}, pairs)
    config = SmithConfig(backbone=tiny_backbone, segment_length=8, max_segments=2, document_layers=1)
    fresh = build_matcher("SMITH", config, 0)
    before = fresh.encoder.block_dense.bias.clone()
    centred = start_rule(fresh, corpus, data, pretrained=False)
    assert not torch.equal(fresh.encoder.block_dense.bias, before) and "after" in centred
    fresh.encoder.save(tmp_path / "pretrained")
    resumed = build_matcher("SMITH", config, 0, init=tmp_path / "pretrained")
    saved = resumed.encoder.block_dense.bias.clone()
    kept = start_rule(resumed, corpus, data, pretrained=True)
    assert torch.equal(resumed.encoder.block_dense.bias, saved) and "block cosine (head kept)" in kept


def test_a_fit_from_a_pretrained_smith_starts_from_its_block_head_and_one_from_the_backbone_centres_it(
    tiny_backbone, isolated_outputs
):
    """Item 4 through the fit itself: with a learning rate too small to move anything, the fine-tuned
    SMITH's block head is the pre-trained one when the fit starts from a checkpoint, and the centred one
    (not the backbone's) when it starts from the backbone; the fit's record says which rule ran."""
    from longdoc.experiments.families.matching import finetune_matcher

    words = ["kernel", "socket", "printf", "signal", "thread", "memory", "file", "pipe"]
    texts = {f"d{i}": ". ".join(" ".join(words[(i + j) % 8] for j in range(5)) for _ in range(3)) for i in range(6)}
    pairs = {
        "train": [DocumentPair("d0", "d1", 1), DocumentPair("d2", "d3", 0)],
        "dev": [DocumentPair("d0", "d4", 1), DocumentPair("d1", "d5", 0)],
        "test": [DocumentPair("d4", "d5", 1)],
    }
    data = MatchingDataset("toy", {d: Document(d, "", t) for d, t in texts.items()}, pairs)
    config = SmithConfig(backbone=tiny_backbone, segment_length=8, max_segments=2, document_layers=1)
    train = TrainConfig(steps=1, batch_size=2, hard_negatives=0, learning_rate=1e-12, warmup_ratio=0.0)
    pretrained = build_matcher("SMITH", config, 0)
    with torch.no_grad():  # a head no centring would produce, so that keeping it is visible
        pretrained.encoder.block_dense.bias.add_(0.5)
    pretrained.encoder.save(isolated_outputs / "pretrained")
    kept_head = pretrained.encoder.block_dense.bias.clone()
    from_checkpoint = finetune_matcher(
        "SMITH", data, config, train, init=isolated_outputs / "pretrained", progress=False
    )
    assert torch.allclose(from_checkpoint.model().encoder.block_dense.bias, kept_head, atol=1e-6)
    assert "block cosine (head kept)" in from_checkpoint.history["start"]
    backbone_head = build_matcher("SMITH", config, 0).encoder.block_dense.bias.clone()
    from_backbone = finetune_matcher("SMITH", data, config, train, progress=False)
    assert not torch.allclose(from_backbone.model().encoder.block_dense.bias, backbone_head, atol=1e-4)
    assert "after" in from_backbone.history["start"]


def test_the_start_probe_is_the_roc_auc_of_the_untrained_cosines_on_dev(tiny_backbone):
    """SMITH's start (block head centred as fine-tuning would) scores the dev pairs as the brute-force
    encoding of the whole corpus does; the row without pre-training is the same spec without it."""
    from types import SimpleNamespace

    from sklearn.metrics import roc_auc_score

    from longdoc.experiments.families.matching import Matcher, block_corpus, start_rule
    from longdoc.models.matching import stored_pair_cosines
    from longdoc.train.pretrain import PretrainConfig

    words = ["kernel", "socket", "printf", "signal", "thread", "memory", "file", "pipe"]
    texts = {f"d{i}": ". ".join(" ".join(words[(i + j) % 8] for j in range(5)) for _ in range(3)) for i in range(8)}
    pairs = {
        "train": [DocumentPair("d0", "d1", 1), DocumentPair("d2", "d3", 0)],
        "dev": [
            DocumentPair("d0", "d4", 1),
            DocumentPair("d1", "d5", 0),
            DocumentPair("d2", "d6", 1),
            DocumentPair("d3", "d7", 0),
        ],
        "test": [DocumentPair("d4", "d5", 1)],
    }
    data = MatchingDataset("toy", {d: Document(d, "", t) for d, t in texts.items()}, pairs)
    config = SmithConfig(backbone=tiny_backbone, segment_length=8, max_segments=2, document_layers=1)
    spec = Matcher("SMITH", config)
    probe = spec.start_probe(SimpleNamespace(data=data, seeds=[0]))
    matcher = build_matcher("SMITH", config, 0)
    corpus = block_corpus(matcher.encoder, data)
    start_rule(matcher, corpus, data, pretrained=False)
    vectors, owners = matcher.encoder.encode_corpus(corpus, progress=False)
    number = {d: i for i, d in enumerate(corpus.doc_ids)}
    dev = pairs["dev"]
    cosines = stored_pair_cosines(vectors, owners, [number[p.source] for p in dev], [number[p.target] for p in dev])
    assert probe["score"] == pytest.approx(roc_auc_score([p.label for p in dev], cosines))
    assert 0.5 <= probe["accuracy"] <= 1.0 and "dev pairs (4" in probe["probe"]
    pretrained = Matcher("SMITH", config, pretrain=PretrainConfig(steps=1, batch_size=2, learning_rate=1e-4))
    assert pretrained.without_pretraining() == spec and spec.without_pretraining() is None
