import json

import pytest
import torch

from longdoc.data.errors import DataFormatError
from longdoc.experiments.families.pretraining import pretraining_texts, unjudged_documents
from longdoc.experiments.profiles import parameters_for


def notebook(tmp_path, source):
    path = tmp_path / "nb.ipynb"
    path.write_text(
        json.dumps({"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": source}]})
    )
    return path


def test_a_notebook_gets_only_the_parameters_it_declares(tmp_path):
    profile = tmp_path / "cpu.yaml"
    profile.write_text("profile: cpu\nseeds: [1, 2]\nbatch_size: 3\n")
    declared = notebook(tmp_path, "profile = 'smoke'\nseeds = [3]  # a comment\n")
    assert parameters_for(profile, declared) == {"profile": "cpu", "seeds": [1, 2]}
    with pytest.raises(ValueError, match="does not set"):
        parameters_for(profile, notebook(tmp_path, "seed = 1\n"))


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


def test_ablation_rows_remove_one_component_after_another(tiny_dataset, tiny_backbone, tiny_study):
    from longdoc.experiments.papers.longtriever import ABLATIONS, ablation_systems

    study = tiny_study(tiny_dataset, tiny_backbone)
    rows = ablation_systems(study)
    assert [r.name for r in rows] == list(ABLATIONS)
    full, mlm, plain, no_doc, no_inter = (r.spec for r in rows)
    assert full.pretrain.lmae and not mlm.pretrain.lmae and mlm.pretrain.mlm_ratio == full.pretrain.mlm_ratio
    assert plain.pretrain is None and plain.encoder == full.encoder
    assert not no_doc.encoder.doc_token and no_doc.encoder.inter_block and no_doc.pretrain is None
    assert not no_inter.encoder.doc_token and not no_inter.encoder.inter_block
    assert all(r.settings_from is rows[0] for r in rows[1:])  # one learning rate for the whole ablation


def test_unjudged_documents_leave_out_every_dev_and_test_judgement(tiny_dataset):
    from longdoc.data import load_dataset

    data = load_dataset(str(tiny_dataset))
    ids, texts = unjudged_documents(data)
    judged = {d for split in ("dev", "test") for docs in data.qrels[split].values() for d in docs}
    assert ids and not set(ids) & judged and set(ids) | judged == set(data.doc_ids)
    assert pretraining_texts("unjudged", data) == (ids, texts)
    with pytest.raises(ValueError, match="needs the dataset"):
        pretraining_texts("unjudged")


def test_the_starting_model_is_the_backbone_or_the_pretrained_checkpoint(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    from longdoc.experiments.families.retrieval import Dense
    from longdoc.experiments.papers.longtriever import pretrain_config
    from longdoc.experiments.settings import EncoderSettings

    study = tiny_study(tiny_dataset, tiny_backbone)
    encoder = study.settings(EncoderSettings).encoder("Longtriever")
    plain = Dense("Longtriever", encoder).starting_model(study)
    tuned = Dense("Longtriever", encoder, pretrain=pretrain_config(study)).starting_model(study)
    assert list((isolated_outputs / "cache").glob("pretrain/*/model/encoder_config.json"))
    changed = [k for k, v in plain.state_dict().items() if not torch.equal(v, tuned.state_dict()[k])]
    assert "doc_embedding" in changed and any(k.startswith("backbone.encoder.layer.") for k in changed)


def test_pretraining_variants_probe_each_start_beside_the_plain_one(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    from longdoc.experiments.papers.start_points import pretraining_variants

    study = tiny_study(tiny_dataset, tiny_backbone, pretrain_steps=2)
    table = pretraining_variants(
        study, {"random decoder": {"decoder_init": "random"}, "copied decoder": {"decoder_init": "copy"}}
    )
    assert list(table.index) == ["without pre-training", "random decoder", "copied decoder"]
    assert table.loc["without pre-training", "losses"] == "" and "MLM" in table.loc["random decoder", "losses"]
    assert len(list((isolated_outputs / "cache").glob("pretrain/*"))) == 2
