"""The MLM-only backbone built here: deterministic, predicts masked positions only, reads no judged text, and
loads (with its MLM head) like every other backbone."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from longdoc.train.mlm_backbone import (
    RECORD,
    Masker,
    MlmBackboneConfig,
    Sequences,
    masked_loss,
    new_model,
    train_mlm_backbone,
)

TINY = MlmBackboneConfig(
    layers=1,
    hidden=32,
    heads=2,
    intermediate=64,
    sequence_length=32,
    steps=6,
    batch_size=4,
    learning_rate=1e-3,
    held_out_share=0.25,
    held_out_sequences=8,
    eval_every=3,
)
WORDS = "open read write close socket signal process thread memory file directory terminal shell option".split()


def pages(count: int = 24, seed: int = 0) -> tuple[list[str], list[str]]:
    draw = random.Random(seed)
    return [f"page{i}.1" for i in range(count)], [" ".join(draw.choices(WORDS, k=60)) for _ in range(count)]


def every_fourth(count: int) -> list[bool]:
    return [i % 4 == 0 for i in range(count)]


def test_a_config_out_of_range_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="hidden=30 is not a multiple of heads=4"):
        MlmBackboneConfig(hidden=30, heads=4)
    with pytest.raises(ValueError, match="steps"):
        MlmBackboneConfig(steps=0)
    with pytest.raises(ValueError, match="precision"):
        MlmBackboneConfig(precision="fp16")


def test_the_head_reads_only_the_masked_positions_and_the_loss_is_bert_s(tokenizer):
    ids, texts = pages()
    sequences = Sequences(tokenizer, texts, TINY.sequence_length)
    input_ids, attention = sequences.batch(range(4))
    inputs, labels = Masker(tokenizer, 0.15)(input_ids, attention, seed=3)
    model = new_model(TINY, tokenizer).eval()  # no dropout: two forward passes read the same network
    seen = []
    model.cls.register_forward_hook(lambda module, args, output: seen.append(args[0].shape[0]))
    total, count = masked_loss(model, inputs, attention, labels, "fp32")
    masked = int((labels != -100).sum())
    assert 0 < masked < int(attention.sum()) // 3
    assert seen == [masked] and int(count) == masked  # the head ran on the masked rows, once
    full = model(input_ids=inputs, attention_mask=attention).logits  # BERT's head over every position
    expected = F.cross_entropy(full.reshape(-1, full.shape[-1]), labels.reshape(-1), reduction="sum")
    torch.testing.assert_close(total, expected, rtol=1e-5, atol=1e-4)


def test_the_masks_choose_only_real_tokens_and_about_the_ratio(tokenizer):
    _, texts = pages(60)
    sequences = Sequences(tokenizer, texts, 64)
    input_ids, attention = sequences.batch(range(len(sequences)))
    _, labels = Masker(tokenizer, 0.15)(input_ids, attention, seed=0)
    chosen = labels != -100
    special = torch.isin(
        input_ids, torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    )
    assert not bool((chosen & special).any())
    share = float(chosen.sum()) / float((attention.bool() & ~special).sum())
    assert 0.10 < share < 0.20


def test_the_build_is_deterministic_for_a_seed_and_records_its_curve(tokenizer, tmp_path):
    ids, texts = pages()
    held = every_fourth(len(ids))
    first = train_mlm_backbone(ids, texts, held, tokenizer, TINY, tmp_path / "a", progress=False)
    second = train_mlm_backbone(ids, texts, held, tokenizer, TINY, tmp_path / "b", progress=False)
    other = train_mlm_backbone(ids, texts, held, tokenizer, replace(TINY, seed=1), tmp_path / "c", progress=False)
    assert first["curve"] == second["curve"] and first["curve"] != other["curve"]
    from safetensors.torch import load_file

    a, b = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [p["step"] for p in first["curve"]] == [0, 3, 6]
    assert set(first["held_out"]) == {"loss", "accuracy", "predicted", "majority_accuracy"}
    assert first["held_out"]["predicted"] > 0 and 0 < first["held_out"]["majority_accuracy"] < 1
    assert first["held_out_ids"] == [doc_id for doc_id, flag in zip(ids, held) if flag]
    assert first["pages"] == {"read": 24, "trained_on": 18, "held_out": 6}
    assert (tmp_path / "a" / RECORD).is_file()


def test_mlm_training_lowers_the_held_out_loss(tokenizer, tmp_path):
    ids = [f"page{i}.1" for i in range(40)]  # each word follows from the one before: context predicts it
    texts = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(60)) for i in range(40)]
    config = replace(TINY, steps=200, eval_every=200, learning_rate=3e-3)
    record = train_mlm_backbone(ids, texts, every_fourth(40), tokenizer, config, tmp_path / "m", progress=False)
    before, after = record["curve"][0]["held_out"], record["curve"][-1]["held_out"]
    assert after["loss"] < 0.5 * before["loss"] and after["accuracy"] > before["accuracy"]


def test_a_saved_backbone_loads_with_its_mlm_head_through_the_common_path(tokenizer, tmp_path):
    from longdoc.models.backbone import load_backbone
    from longdoc.models.lmae import prediction_head
    from longdoc.models.longtriever import Longtriever, LongtrieverConfig

    ids, texts = pages()
    train_mlm_backbone(ids, texts, every_fourth(len(ids)), tokenizer, TINY, tmp_path / "built", progress=False)
    model, loaded_tokenizer = load_backbone(str(tmp_path / "built"))
    assert model.config.num_hidden_layers == 1 and loaded_tokenizer.vocab == tokenizer.vocab
    encoder = Longtriever(LongtrieverConfig(backbone=str(tmp_path / "built"), segment_length=16, max_segments=2))
    head, pretrained = prediction_head(encoder)
    assert pretrained
    from safetensors.torch import load_file

    saved = load_file(tmp_path / "built" / "model.safetensors")
    torch.testing.assert_close(head.predictions.transform.dense.weight, saved["cls.predictions.transform.dense.weight"])
    torch.testing.assert_close(
        encoder.backbone.embeddings.word_embeddings.weight, saved["bert.embeddings.word_embeddings.weight"]
    )


def test_training_without_a_held_out_page_is_refused(tokenizer, tmp_path):
    ids, texts = pages(4)
    with pytest.raises(ValueError, match="4 pages: 4 to train on and 0 held out"):
        train_mlm_backbone(ids, texts, [False] * 4, tokenizer, TINY, tmp_path / "x", progress=False)


@pytest.fixture
def planted(tokenizer, tiny_dataset, isolated_outputs, monkeypatch, tmp_path):
    """A build of ``manpages-mlm`` at a tiny recipe whose installed pages include a dev-judged page of the
    excluded benchmark (the tiny dataset's d12) under its own id, and d14's body under another id, both
    rendered as installed pages are (a description line, then the body); six packages own the pages."""
    from longdoc.data import installed_pages
    from longdoc.data.beir import load_beir
    from longdoc.experiments import backbones

    dataset = load_beir(tiny_dataset)
    assert "d12" in dataset.qrels["dev"]["q12"] and "d14" in dataset.qrels["dev"]["q14"]
    ids, texts = pages(30)
    ids += ["d12", "planted-copy.1"]
    texts += [f"a page\n{dataset.corpus['d12'].text}", f"copy the page\n{dataset.corpus['d14'].text}"]
    root = tmp_path / "man"
    root.mkdir()
    for doc_id in ids:
        (root / doc_id).write_text("x")
    monkeypatch.setattr(backbones, "EXCLUDED_BENCHMARK", str(tiny_dataset))
    monkeypatch.setitem(backbones.BUILT_BACKBONES, "manpages-mlm", TINY)
    monkeypatch.setattr(installed_pages, "installed_pages", lambda *a, **k: sorted(root.iterdir()))
    monkeypatch.setattr(installed_pages, "installed_page_corpus", lambda *a, **k: (list(ids), list(texts)))
    monkeypatch.setattr(installed_pages, "page_packages", lambda *a, **k: {d: f"pkg{i % 6}" for i, d in enumerate(ids)})


@pytest.fixture
def planted_build(planted):
    from longdoc.experiments import backbones

    return backbones.built_backbone("manpages-mlm", progress=False)


def test_a_study_names_a_built_backbone_without_building_it_and_its_first_load_builds_it(planted, tiny_dataset):
    from conftest import build_tiny_study
    from longdoc.experiments import backbones
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.models.backbone import resolve_backbone

    named = build_tiny_study(tiny_dataset, "manpages-mlm").settings(EncoderSettings).backbone
    folder = backbones.backbone_folder("manpages-mlm")
    assert named == f"cache:backbone/{folder.name}" and not folder.exists()  # named, not built
    assert resolve_backbone(named) == str(folder) and (folder / RECORD).is_file()  # the first load built it
    with pytest.raises(Exception, match="no recipe here builds one of that key"):
        resolve_backbone("cache:backbone/0123456789abcdef")


def test_a_dev_judged_page_is_never_read(planted_build):
    record = json.loads((planted_build / RECORD).read_text())
    assert record["corpus"]["curation"]["dropped_as_benchmark_text"] == ["d12", "planted-copy.1"]
    read = (planted_build / "pages.txt").read_text().split()
    assert "d12" not in read and "planted-copy.1" not in read and len(read) == 30
    assert record["pages"]["read"] == 30


def test_a_built_backbone_is_cached_and_selected_by_name(planted_build, tiny_dataset):
    from longdoc.experiments import backbones
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.models.backbone import load_backbone

    assert backbones.built_backbone("manpages-mlm", progress=False) == planted_build  # found, not rebuilt
    assert Path(planted_build).parent.name == "backbone"
    assert backbones.backbone_path("minilm") == "minilm"
    from conftest import build_tiny_study

    study = build_tiny_study(tiny_dataset, "manpages-mlm")
    assert study.settings(EncoderSettings).backbone == f"cache:backbone/{Path(planted_build).name}"  # portable
    assert study.params["backbone"] == "manpages-mlm"  # the record names it
    model, _ = load_backbone(study.settings(EncoderSettings).backbone)
    assert model.config.hidden_size == TINY.hidden


def test_a_built_backbone_s_tokenizer_is_had_without_building_it(planted_build, tokenizer):
    from longdoc.experiments.backbones import tokenizer_name
    from longdoc.models.backbone import load_tokenizer

    assert tokenizer_name("minilm") == "minilm"
    assert load_tokenizer(tokenizer_name("manpages-mlm")).vocab == load_tokenizer(str(planted_build)).vocab


def test_a_built_name_is_a_backbone_not_a_query_generator():
    from longdoc.experiments.preflight import model_problem

    assert "resolves to nothing" in model_problem("qg_generator", "manpages-mlm")


def test_a_built_backbone_s_positions_are_known_without_building_it(planted, tiny_dataset, tokenizer, monkeypatch):
    from conftest import build_tiny_study
    from longdoc.experiments import backbones
    from longdoc.experiments.papers.baselines import passage_baselines
    from longdoc.experiments.settings import EncoderSettings

    assert new_model(TINY, tokenizer).config.max_position_embeddings == backbones.POSITIONS

    def no_build(*args, **kwargs):
        raise AssertionError("naming a built backbone's rows built it")

    monkeypatch.setattr(backbones, "built_backbone", no_build)
    study = build_tiny_study(tiny_dataset, "manpages-mlm", max_blocks=16, block_size=64)
    named = study.settings(EncoderSettings).backbone
    assert named.startswith("cache:backbone/") and backbones.position_embeddings(named) == backbones.POSITIONS
    lengths = {s.spec.encoder.segment_length for s in passage_baselines(study) if s.name.startswith("zero-shot")}
    assert lengths == {backbones.POSITIONS}  # 16 x 64 capped at the positions, and nothing built
