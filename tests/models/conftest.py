import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from longdoc.models import resolve_backbone


@pytest.fixture(scope="session")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_backbone("minilm"))


@pytest.fixture
def tiny_bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, attn_implementation="sdpa")
    return BertModel(config, add_pooling_layer=False).eval()
