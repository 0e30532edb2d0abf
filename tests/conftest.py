import os
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def tokenizer():
    """The real bert-base-uncased WordPiece vocabulary (from the packaged default backbone)."""
    from longdoc.models import resolve_backbone

    return AutoTokenizer.from_pretrained(resolve_backbone("minilm"))


@pytest.fixture
def tiny_bert():
    """A tiny random BERT: unit tests never need trained weights."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, attn_implementation="sdpa")
    return BertModel(config, add_pooling_layer=False).eval()


@pytest.fixture
def tiny_bert_with(tiny_bert):
    """``tiny_bert_with(**config_changes)``: a fresh tiny random BERT (seed 0) with a changed config."""

    def build(**changes):
        torch.manual_seed(0)
        return BertModel(BertConfig(**{**tiny_bert.config.to_dict(), **changes}), add_pooling_layer=False)

    return build
