"""The backbones the project builds: ``tiny-random-bert``, of random weights (the smoke profile's); the
MLM-trained ones are tested in tests/train/test_mlm_backbone.py."""

from pathlib import Path

import pytest

from conftest import build_tiny_study

RANDOM = "tiny-random-bert"


def test_a_study_names_the_random_backbone_by_its_folder_and_its_first_load_draws_it_once(
    isolated_outputs, tiny_dataset
):
    from longdoc.experiments import backbones
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.models.backbone import load_backbone, resolve_backbone

    study = build_tiny_study(tiny_dataset, RANDOM)
    named = study.settings(EncoderSettings).backbone
    folder = backbones.backbone_folder(RANDOM)
    assert named == f"cache:backbone/{folder.name}" and not folder.exists()  # named, not built
    assert study.params["backbone"] == RANDOM  # the record names it
    assert resolve_backbone(named) == str(folder) and (folder / "config.json").is_file()  # the first load drew it
    drawn = (folder / "model.safetensors").stat().st_mtime_ns
    assert resolve_backbone(named) == str(folder) and (folder / "model.safetensors").stat().st_mtime_ns == drawn
    model, _ = load_backbone(named)
    recipe = backbones.RANDOM_BACKBONES[RANDOM]
    assert (model.config.num_hidden_layers, model.config.hidden_size) == (recipe.layers, recipe.hidden)
    assert model.config.max_position_embeddings == backbones.POSITIONS == backbones.position_embeddings(named)


def test_the_random_backbone_is_keyed_by_its_recipe_and_the_code_that_draws_it(isolated_outputs, monkeypatch):
    import inspect

    from longdoc.experiments import backbones, cache
    from longdoc.models.backbone import random_backbone

    before = backbones.backbone_folder(RANDOM)
    wider = backbones.RandomBackbone(layers=6, hidden=128, heads=4, intermediate=512, init_std=0.1)
    monkeypatch.setitem(backbones.RANDOM_BACKBONES, RANDOM, wider)
    assert backbones.backbone_folder(RANDOM) != before
    monkeypatch.undo()
    drawing = Path(inspect.getsourcefile(random_backbone)).relative_to(cache.PACKAGE_DIR).as_posix()
    calling = Path(backbones.__file__).relative_to(cache.PACKAGE_DIR).as_posix()
    assert {drawing, calling, "seeding.py"} <= set(backbones.RANDOM_BUILDER_MODULES)
    monkeypatch.setattr(cache, "modules_fingerprint", lambda modules: "another draw")  # their code changed
    assert backbones.backbone_folder(RANDOM) != before


def test_a_random_draw_is_known_by_its_key_wherever_it_was_drawn(isolated_outputs, tiny_dataset):
    """A folder drawn by other code or other package versions (or imported) has another key than today's
    recipe: its key.json still says it is random weights, never an MLM-trained start."""
    import json

    from longdoc.experiments import backbones, cache

    other = cache.CACHE_DIR / "backbone" / "0123456789abcdef"
    other.mkdir(parents=True)
    (other / "key.json").write_text(json.dumps(backbones.determinants(RANDOM) | {"code": "older"}))
    assert backbones.is_random("cache:backbone/0123456789abcdef")
    assert backbones.backbone_training("cache:backbone/0123456789abcdef") == backbones.RANDOM_WEIGHTS
    trained = cache.CACHE_DIR / "backbone" / "fedcba9876543210"
    trained.mkdir()
    (trained / "key.json").write_text(json.dumps({"name": "manpages-mlm", "recipe": {}}))
    assert not backbones.is_random("cache:backbone/fedcba9876543210")
    assert not backbones.is_random("minilm") and not backbones.is_random("cache:backbone/missing")


def test_the_random_backbone_is_random_weights_to_every_rule_that_reads_a_start(isolated_outputs, tiny_dataset):
    from longdoc.experiments import backbones
    from longdoc.experiments.preconditions import RANDOM as RANDOM_WEIGHTS
    from longdoc.experiments.preconditions import start_trained_as
    from longdoc.experiments.settings import EncoderSettings

    assert backbones.is_built(RANDOM) and not backbones.is_mlm_built(RANDOM)  # built here, not MLM-trained
    assert backbones.RANDOM_WEIGHTS == RANDOM_WEIGHTS == backbones.backbone_training(RANDOM)
    study = build_tiny_study(tiny_dataset, RANDOM)
    named = study.settings(EncoderSettings).backbone
    assert backbones.is_random(named) and backbones.backbone_training(named) == RANDOM_WEIGHTS

    class Spec:  # a pre-trained row's spec, as start_trained_as reads it
        encoder = study.settings(EncoderSettings)

    assert start_trained_as(Spec) == RANDOM_WEIGHTS  # one of the starts the papers pre-train from
    assert "the backbone is random weights" in study.pooling_line()


def test_the_built_start_notebooks_say_a_random_backbone_is_not_their_start(isolated_outputs, tiny_dataset):
    from longdoc.experiments.papers import built_start

    study = build_tiny_study(tiny_dataset, RANDOM)
    backbone = built_start.backbone_learned(study)
    assert backbone.iloc[0]["random weights"] and not backbone.iloc[0]["learned language"]

    import pandas as pd

    learns = pd.DataFrame([{"train_steps": 4, "row": "I", "learns": True}])  # every row learns: the start decides
    words = built_start.decision(backbone, built_start.BudgetSearch(study, learns))
    assert "random weights drawn here and never trained, so it is not the MLM-trained start" in words
    assert "was not built here" not in words and "the pre-training claims stay not testable on it" in words


def test_the_random_backbone_needs_no_download_no_page_and_names_bert_s_tokenizer():
    from longdoc.experiments import backbones
    from longdoc.experiments.preflight import model_problem
    from longdoc.fetch import needs_download

    assert not needs_download(RANDOM) and backbones.build_problem(RANDOM) is None
    assert model_problem("backbone", RANDOM) is None
    assert "resolves to nothing" in model_problem("qg_generator", RANDOM)  # a backbone, not a query generator
    assert backbones.tokenizer_name(RANDOM) == backbones.TOKENIZER


def test_the_smoke_profile_and_every_notebook_default_read_the_random_backbone():
    import yaml

    from longdoc.experiments.profiles import PROFILES_DIR

    assert yaml.safe_load((PROFILES_DIR / "smoke.yaml").read_text())["backbone"] == RANDOM
    notebooks = [nb.read_text() for nb in sorted(Path(PROFILES_DIR).parent.glob("[0-9][0-9]_*.ipynb"))]
    defaults = [text for text in notebooks if '"backbone = ' in text]  # 14 times random configs of its own
    assert len(defaults) >= len(notebooks) - 1 and all(f'backbone = \\"{RANDOM}\\"' in t for t in defaults)


def test_the_command_refuses_to_time_a_backbone_that_is_never_trained(capsys):
    from longdoc.experiments import backbones

    with pytest.raises(SystemExit):
        backbones.main([RANDOM, "--measure"])
    assert "never trained" in capsys.readouterr().err


def test_the_random_backbone_s_documents_are_apart_so_its_rankings_are_not_rounding_noise(isolated_outputs, tokenizer):
    """At BERT's 0.02 a random 6-layer BERT gives every document the same [CLS] vector (cosine 0.99999)
    and scores 2e-6 apart, float32's resolution: the recipe's wider draw keeps documents and scores apart."""
    import random

    import torch

    from longdoc.experiments import backbones
    from longdoc.models.backbone import load_backbone

    model, tok = load_backbone(str(backbones.built_backbone(RANDOM)))
    words = sorted(w for w in tokenizer.vocab if w.isalpha() and len(w) > 3)
    rng = random.Random(0)
    documents = [" ".join(rng.choices(words, k=48)) for _ in range(60)]
    queries = [" ".join(rng.choices(words, k=6)) for _ in range(20)]
    with torch.no_grad():
        d = model.eval()(**tok(documents, return_tensors="pt", padding=True)).last_hidden_state[:, 0]
        q = model(**tok(queries, return_tensors="pt", padding=True)).last_hidden_state[:, 0]
    cosine = torch.nn.functional.cosine_similarity(d[:, None], d[None], dim=-1)
    assert cosine[~torch.eye(60, dtype=torch.bool)].mean() < 0.995
    gaps = torch.diff(torch.sort((q @ d.T).double(), dim=1).values, dim=1)
    assert (gaps < 1e-4).double().mean() < 0.05  # near-ties of adjacent scores are rare
