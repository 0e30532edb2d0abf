import math

import pytest
import torch
import torch.nn.functional as F

from longdoc.losses.sentence_block import sentence_block_loss
from longdoc.models.han import HAN, HanConfig
from longdoc.models.smith import COMBINE_MODES, Smith, SmithConfig, SmithPretraining, sample_masked_blocks

DOCS = [
    [[2001, 2002, 2003]],
    [[2004, 2005], [2006, 2007, 2008, 2009], [2010]],
    [[2011], [2012, 2013], [2014, 2015, 2016], [2017, 2018]],
]  # 1, 3 and 4 blocks


def smith(backbone, **changes) -> Smith:
    torch.manual_seed(0)
    fields = dict(backbone=backbone, segment_length=8, max_segments=4, document_layers=1)
    return Smith(SmithConfig(**(fields | changes))).eval()


def test_shapes_with_ragged_block_counts(tiny_backbone):
    model = smith(tiny_backbone)
    batch = model.doc_inputs(DOCS)
    assert batch.input_ids.shape[0] == 8 and batch.max_segments == 4
    vectors = model.encode_documents(batch)
    assert vectors.shape == (3, 32)
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(3), atol=1e-5)


@pytest.mark.parametrize("combine", COMBINE_MODES)
def test_padding_changes_nothing_in_any_combine_mode(tiny_backbone, combine):
    model = smith(tiny_backbone, combine=combine)
    together = model.encode_documents(model.doc_inputs(DOCS))
    alone = torch.cat([model.encode_documents(model.doc_inputs([doc])) for doc in DOCS])
    assert together.shape[1] == (32 if combine == "normal" else 64)
    assert torch.allclose(together, alone, atol=1e-5)


def test_combine_modes_pool_the_real_blocks_only(tiny_backbone):
    model = smith(tiny_backbone, combine="mean-concat")
    batch = model.doc_inputs(DOCS)
    first = model.sentence_states(batch)[:, 0]
    blocks = model.block_vectors(first)
    mean_of_second = blocks[1:4].mean(0)  # the second document's three blocks
    out = model.encode_documents(batch)[1]
    document = out[32:]
    expected = F.normalize(torch.cat([mean_of_second, document / document.norm() * 1.0]), dim=-1)
    # the concatenation is normalised once: the pooled half keeps its direction relative to the document half
    ratio = out[:32].norm() / out[32:].norm()
    assert torch.allclose(ratio, mean_of_second.norm() / 1.0, atol=1e-5)
    assert torch.allclose(F.normalize(out[:32], dim=0), F.normalize(expected[:32], dim=0), atol=1e-5)


def test_one_block_and_no_document_layer_is_the_first_token_through_the_same_heads(tiny_backbone):
    model = smith(tiny_backbone, document_layers=0)
    batch = model.doc_inputs([[[2001, 2002, 2003]]])
    cls = model.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state[:, 0]
    block = F.normalize(model.block_dense(cls), dim=-1)
    position = model.block_position_embeddings.weight[0]
    expected = F.normalize(model.document_dense(model.document_norm(block + position)), dim=-1)
    assert torch.allclose(model.encode_documents(batch), expected, atol=1e-6)


def test_sentence_layers_take_the_first_backbone_layers_and_survive_saving(tiny_backbone, tmp_path):
    full = smith(tiny_backbone)
    model = smith(tiny_backbone, sentence_layers=1)
    assert len(model.backbone.encoder.layer) == 1
    assert torch.equal(
        model.backbone.encoder.layer[0].output.dense.weight, full.backbone.encoder.layer[0].output.dense.weight
    )
    model.save(tmp_path / "m")
    loaded = Smith.load(tmp_path / "m").eval()
    batch = model.doc_inputs(DOCS)
    assert torch.allclose(loaded.encode_documents(batch), model.encode_documents(batch), atol=1e-6)
    with pytest.raises(ValueError, match="sentence_layers"):
        smith(tiny_backbone, sentence_layers=3)


def test_random_init_draws_new_sentence_level_weights(tiny_backbone):
    model = smith(tiny_backbone)
    before = model.backbone.encoder.layer[0].output.dense.weight.clone()
    model.reinitialize()
    assert not torch.equal(before, model.backbone.encoder.layer[0].output.dense.weight)


def test_sentence_block_loss_against_a_hand_computation():
    predicted = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    original = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    expected = 0.0
    for j in range(3):
        logits = [sum(p * o for p, o in zip(predicted[j].tolist(), original[i].tolist())) for i in range(3)]
        expected -= math.log(math.exp(logits[j]) / sum(math.exp(x) for x in logits))
    assert sentence_block_loss(predicted, original).item() == pytest.approx(expected / 3, rel=1e-6)


def test_masked_blocks_are_real_and_leave_one_block_of_each_document():
    mask = torch.tensor([[True, False, False, False], [True, True, True, False], [True, True, True, True]])
    for seed in range(20):
        chosen = sample_masked_blocks(mask, 2, torch.Generator().manual_seed(seed))
        assert not (chosen & ~mask).any()
        assert chosen.sum(-1).tolist() == [0, 2, 2]
    assert sample_masked_blocks(mask, 5).sum(-1).tolist() == [0, 2, 3]


def test_pretraining_lowers_both_losses_on_a_tiny_model(tiny_backbone):
    torch.manual_seed(0)
    model = Smith(SmithConfig(backbone=tiny_backbone, segment_length=8, max_segments=4, document_layers=1))
    task = SmithPretraining(model, mlm_ratio=0.3, masked_blocks=1)
    batch = model.doc_inputs(DOCS * 2)
    optimizer = torch.optim.Adam(task.parameters(), lr=3e-3)
    history = []
    for step in range(40):
        losses = task(batch, torch.Generator().manual_seed(step % 4))
        optimizer.zero_grad()
        losses["loss"].backward()
        optimizer.step()
        history.append({k: float(v.detach()) for k, v in losses.items()})
    first, last = history[:4], history[-4:]
    for name in ("mlm", "sp"):
        assert sum(h[name] for h in last) < 0.7 * sum(h[name] for h in first)
    assert all(h["loss"] == pytest.approx(h["mlm"] + h["sp"], rel=1e-5) for h in history)


def test_han_ignores_padding(tiny_backbone):
    torch.manual_seed(0)
    model = HAN(HanConfig(backbone=tiny_backbone, segment_length=8, max_segments=4, gru_size=6)).eval()
    together = model.encode_documents(model.doc_inputs(DOCS))
    alone = torch.cat([model.encode_documents(model.doc_inputs([doc])) for doc in DOCS])
    assert together.shape == (3, 12)
    assert torch.allclose(together, alone, atol=1e-5)
    assert len(model.backbone.encoder.layer) == 0


def test_centring_the_block_head_zeroes_the_mean_projected_state(tiny_backbone):
    model = smith(tiny_backbone)
    segments = [doc for doc in DOCS]
    start = model.center_block_head(segments)
    batch = model.doc_inputs([[block] for doc in DOCS for block in doc])
    with torch.no_grad():
        projected = model.block_dense(model.sentence_states(batch)[:, 0])
    assert torch.allclose(projected.mean(0), torch.zeros(32), atol=1e-5)
    assert start["blocks"] == 8 and start["after"] < start["block cosine before centring"]
