import json

import pytest

from longdoc.data.errors import DataFormatError
from longdoc.experiments.longtriever import ABLATIONS, ablation_setup, pretraining_texts
from longdoc.experiments.profiles import parameters_for
from longdoc.models.longtriever import LongtrieverConfig
from longdoc.train.pretrain import PretrainConfig


def notebook(tmp_path, source):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": source}]}))
    return path


def test_a_notebook_gets_only_the_parameters_it_declares(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("profile: cpu\na: 1\nb: [1, 2]\nc: x\n")
    assert parameters_for(profile, notebook(tmp_path, "profile = 'smoke'\nb = [3]  # a comment\n")) == {"profile": "cpu", "b": [1, 2]}
    with pytest.raises(KeyError, match="does not set"):
        parameters_for(profile, notebook(tmp_path, "d = 1\n"))


def test_pretraining_texts_from_a_text_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("first document\nstill first\n\n\nsecond document\n")
    ids, texts = pretraining_texts(path)
    assert ids == ["corpus-0", "corpus-1"] and texts == ["first document\nstill first", "second document"]
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(DataFormatError, match="no document"):
        pretraining_texts(tmp_path / "empty.txt")
    with pytest.raises(FileNotFoundError):
        pretraining_texts(tmp_path / "missing.txt")


def test_ablation_rows_remove_one_component_after_another():
    encoder, pretrain = LongtrieverConfig(), PretrainConfig()
    rows = [ablation_setup(row, encoder, pretrain) for row in ABLATIONS]
    assert rows[0] == (encoder, pretrain)
    assert rows[1][1].lmae is False and rows[1][1].mlm_ratio == pretrain.mlm_ratio
    assert rows[2] == (encoder, None)
    assert rows[3][0].doc_token is False and rows[3][0].inter_block and rows[3][1] is None
    assert rows[4][0].doc_token is False and rows[4][0].inter_block is False


def test_starting_model_is_the_backbone_or_the_pretrained_checkpoint(tmp_path, monkeypatch):
    import torch

    from longdoc.experiments import cache
    from longdoc.experiments.longtriever import starting_model

    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "cache")
    (tmp_path / "corpus.txt").write_text("the kernel schedules threads\n\nsockets carry bytes between hosts\n")
    encoder = LongtrieverConfig(segment_length=16, max_segments=2, max_query_length=8)
    plain = starting_model(None, encoder, None)
    tuned = starting_model(None, encoder, PretrainConfig(batch_size=2, max_steps=1, warmup_ratio=0.0), str(tmp_path / "corpus.txt"))
    assert list(cache.CACHE_DIR.glob("pretrain/*/model/encoder_config.json"))
    changed = [k for k, v in plain.state_dict().items() if not torch.equal(v, tuned.state_dict()[k])]
    assert "doc_embedding" in changed and any(k.startswith("backbone.encoder.layer.") for k in changed)
