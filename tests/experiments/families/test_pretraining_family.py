"""Pre-training launched from the kernel in two processes (torchrun, gloo): the processes read the
documents' tokens from a token store the kernel writes, the first saves the model into the cache under
a key of its own, and the weights are those of one process (up to AdamW's float noise; exact equality
with plain SGD is tests/train/test_multiprocess_equivalence.py)."""

import json

import pytest

from longdoc.experiments.families.pretraining import Documents, pretrained
from longdoc.models.longtriever import Longtriever, LongtrieverConfig
from longdoc.seeding import seeded
from longdoc.train.pretrain import PretrainConfig

TEXTS = [
    f"the {t} of the system and its {t} calls, " * (1 + i % 4)
    for i, t in enumerate(["kernel", "socket", "thread", "signal", "memory", "file", "clock", "pipe"])
]


def weights(directory) -> dict:
    return {k: v.float() for k, v in Longtriever.load(directory).state_dict().items()}


@pytest.mark.slow
def test_pretraining_runs_in_two_processes_launched_from_the_kernel(still_backbone, isolated_outputs):
    documents = Documents("eight", [f"d{i}" for i in range(8)], TEXTS)
    encoder = LongtrieverConfig(backbone=still_backbone, segment_length=16, max_segments=3)
    config = PretrainConfig(steps=3, batch_size=4, learning_rate=1e-3, decoder_init="copy", seed=2)
    two = pretrained(documents, encoder, config, progress=False, n_devices=2)
    one = pretrained(documents, encoder, config, progress=False)
    assert two != one and json.loads((two.parent / "key.json").read_text())["processes"] == 2
    assert not list(two.parent.parent.glob("*.resume"))  # the token store went with the resume folder
    history = json.loads((two.parent / "history.json").read_text())
    assert len(history["history"]) == 3 and history["config"]["batch_size"] == 2  # per process
    with seeded(config.seed):  # the weights pre-training starts from
        start = {k: v.float() for k, v in Longtriever(encoder).state_dict().items()}
    a, b = weights(one), weights(two)
    moved = sum((a[k] - start[k]).abs().sum() for k in a)
    apart = sum((a[k] - b[k]).abs().sum() for k in a)
    assert apart < 1e-4 * moved  # measured: 8e-8; with masks drawn per process, 5e-2
    with pytest.raises(ValueError, match="pretrain_batch_size=4: not divisible by n_devices=3"):
        pretrained(documents, encoder, config, progress=False, n_devices=3)


def test_pretraining_on_a_memory_mapped_corpus_reads_a_token_store_beside_it(
    tiny_dataset, tiny_backbone, isolated_outputs
):
    """Transductive and unjudged pre-training on a corpus store tokenize into its ``segments`` folder (the
    documents never become Python lists); the unjudged documents are a lazy view, keyed by the dataset."""
    from longdoc.data.corpus_store import Subset
    from longdoc.data.registry import load_dataset
    from longdoc.experiments.families.pretraining import UNJUDGED, pretraining_texts

    data = load_dataset(str(tiny_dataset), store_dir=isolated_outputs / "stores", mapped=True)
    encoder = LongtrieverConfig(backbone=tiny_backbone, segment_length=16, max_segments=2)
    config = PretrainConfig(steps=1, batch_size=2, learning_rate=1e-3)
    ids, texts = pretraining_texts(UNJUDGED, data)
    assert isinstance(ids, Subset) and isinstance(texts, Subset) and len(ids) == 12  # 24 less dev's and test's
    assert list(ids) == pretraining_texts(UNJUDGED, load_dataset(str(tiny_dataset)))[0]
    pretrained(data, encoder, config, progress=False)
    pretrained(UNJUDGED, encoder, config, dataset=data, progress=False)
    stores = sorted(p.name.split("-")[0] for p in (data.corpus.directory / "segments").iterdir())
    assert stores == ["all", "unjudged"]
