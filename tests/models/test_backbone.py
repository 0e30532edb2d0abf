from pathlib import Path

import pytest

from longdoc.models import BackboneNotFoundError, resolve_backbone


def test_default_backbone_resolves_offline_to_the_packaged_bert():
    path = Path(resolve_backbone(None))
    assert (path / "config.json").exists() and (path / "vocab.txt").exists()
    assert '"BertModel"' in (path / "config.json").read_text()


def test_unknown_backbone_is_a_clear_error():
    with pytest.raises(BackboneNotFoundError, match="resolves to nothing"):
        resolve_backbone("no-such-org/no-such-model")


def test_directory_without_config(tmp_path):
    with pytest.raises(BackboneNotFoundError, match="without config.json"):
        resolve_backbone(str(tmp_path))


@pytest.mark.slow
def test_default_backbone_gives_a_real_embedding():
    import torch

    from longdoc.models import EncoderConfig, FirstP

    model = FirstP(EncoderConfig(pooling="mean", segment_length=64))
    vectors = model.encode_queries(["open and possibly create a file", "create a file", "send a signal to a process"])
    cos = torch.nn.functional.cosine_similarity(torch.tensor(vectors[:1]), torch.tensor(vectors[1:]))
    assert cos[0] > cos[1]  # pretrained weights, not random ones


def test_a_random_backbone_is_drawn_under_its_seed_alone_and_saved_with_bert_s_vocabulary(tmp_path, tokenizer):
    import torch
    from safetensors.torch import load_file

    from longdoc.models.backbone import load_backbone, random_backbone

    before = torch.random.get_rng_state()
    first = random_backbone(tmp_path / "a", hidden=16, layers=2, heads=2, positions=64, seed=3)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global generator is left as it was
    torch.manual_seed(123)  # other random work in between changes nothing
    torch.randn(1000)
    again = random_backbone(tmp_path / "b", hidden=16, layers=2, heads=2, positions=64, seed=3)
    other = random_backbone(tmp_path / "c", hidden=16, layers=2, heads=2, positions=64, seed=4)
    weights = [load_file(Path(p) / "model.safetensors") for p in (first, again, other)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert not torch.equal(
        weights[0]["embeddings.word_embeddings.weight"], weights[2]["embeddings.word_embeddings.weight"]
    )
    model, loaded_tokenizer = load_backbone(first)
    config = model.config
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (16, 2, 2)
    assert config.intermediate_size == 64 and config.max_position_embeddings == 64  # BERT's 4 x hidden
    assert loaded_tokenizer.vocab == tokenizer.vocab and config.vocab_size == len(tokenizer.vocab)
