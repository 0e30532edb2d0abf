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
