import pytest
import torch

from longdoc.text.masking import IGNORE, candidates, continuation_table, lmae_attention_mask, whole_word_mlm, word_index


@pytest.fixture(scope="module")
def block(tokenizer):
    encoded = tokenizer(["the unbelievably tokenizable sentence goes here", "short"], padding=True, return_tensors="pt")
    return encoded["input_ids"], encoded["attention_mask"]


def test_word_index_groups_wordpieces(tokenizer, block):
    ids, _ = block
    words = word_index(ids, continuation_table(tokenizer))
    tokens = tokenizer.convert_ids_to_tokens(ids[0])
    for j in range(1, len(tokens)):
        assert (words[0, j] == words[0, j - 1]) == tokens[j].startswith("##")


def test_whole_word_mlm_masks_words_as_units_and_never_specials(tokenizer, block):
    ids, mask = block
    ids, mask = ids.repeat(200, 1), mask.repeat(200, 1)
    words = word_index(ids, continuation_table(tokenizer))
    maskable = candidates(ids, mask, [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    generator = torch.Generator().manual_seed(0)
    inputs, labels = whole_word_mlm(ids, words, maskable, 0.3, tokenizer.mask_token_id, len(tokenizer), generator)
    chosen = labels != IGNORE
    assert not (chosen & ~maskable).any()
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])
    for row in range(len(ids)):  # all pieces of a word share one decision
        for w in words[row][maskable[row]].unique():
            pieces = chosen[row][(words[row] == w) & maskable[row]]
            assert pieces.all() or not pieces.any()
    assert 0.25 < chosen.sum() / maskable.sum() < 0.40  # about 0.3 of the tokens (words of unequal length)
    replaced = (inputs == tokenizer.mask_token_id)[chosen].float().mean()
    assert 0.72 < replaced < 0.88


def test_lmae_mask_structure(tokenizer, block):
    ids, mask = block
    words = word_index(ids, continuation_table(tokenizer))
    maskable = candidates(ids, mask, [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    keep = lmae_attention_mask(words, maskable, mask, 0.5, torch.Generator().manual_seed(1))
    rows, length = ids.shape
    assert keep.shape == (rows, length, length + 1)
    assert keep[:, :, :2].all()  # s_d and c̃_i always visible
    tokens = keep[:, :, 1:]  # column j <-> token j (column 0 here is c̃_i standing in for [CLS])
    for r in range(rows):
        for i in range(1, length):
            assert not tokens[r, i, i]  # a row never sees the token it reconstructs
        assert not tokens[r][:, ~mask[r].bool()].any()  # never padding
        sep = (ids[r] == tokenizer.sep_token_id).nonzero().item()
        assert tokens[r, :, sep][torch.arange(length) != sep].all()  # [SEP] is never hidden from other rows


def test_lmae_mask_ratio_and_rows_differ(tokenizer):
    ids = tokenizer(["word " * 60], return_tensors="pt")["input_ids"].repeat(20, 1)
    mask = torch.ones_like(ids)
    words = word_index(ids, continuation_table(tokenizer))
    maskable = candidates(ids, mask, [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    for ratio in (0.1, 0.5, 0.9):
        keep = lmae_attention_mask(words, maskable, mask, ratio, torch.Generator().manual_seed(2))
        hidden = ~keep[:, 1:-1, 2:-1]  # token rows 1..L-2 x the columns of tokens 1..L-2 (column j + 1 holds token j)
        assert hidden.diagonal(dim1=1, dim2=2).all()  # each row's own token: always hidden
        off_diagonal = hidden.float().sum() - hidden.diagonal(dim1=1, dim2=2).float().sum()
        assert abs(off_diagonal / (hidden.numel() - hidden.shape[0] * hidden.shape[1]) - ratio) < 0.01
    assert not torch.equal(keep[0, 1], keep[0, 2])  # a fresh draw per row


def test_ratios_are_checked(tokenizer, block):
    ids, mask = block
    with pytest.raises(ValueError, match="lmae ratio"):
        lmae_attention_mask(ids, mask.bool(), mask, 1.5)


def test_per_document_draws_do_not_depend_on_the_batch_around_a_document(tokenizer):
    """A document's MLM corruption, LMAE mask and masked blocks are the same alone, beside another
    document (a wider one: more padding) or second in its batch: what several processes need to train as one."""
    from longdoc.models.smith import sample_masked_blocks
    from longdoc.text.masking import DocumentDraws, document_seed

    short = ["signal handlers run", "on the thread"]  # two blocks
    long = ["the unbelievably tokenizable sentence goes on and on here", "x", "y"]  # three, wider

    def masks(documents, numbers, at):  # the masks of documents[at], the short one
        rows = [text for document in documents for text in document]
        owner = torch.tensor([k for k, document in enumerate(documents) for _ in document])
        encoded = tokenizer(rows, padding=True, return_tensors="pt")
        ids, attention = encoded["input_ids"], encoded["attention_mask"]
        words = word_index(ids, continuation_table(tokenizer))
        maskable = candidates(ids, attention, [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
        draws = DocumentDraws([document_seed(7, 3, n) for n in numbers], owner, width=32, blocks=4)
        inputs, labels = whole_word_mlm(ids, words, maskable, 0.5, tokenizer.mask_token_id, len(tokenizer), draws)
        keep = lmae_attention_mask(words, maskable, attention, 0.5, draws)
        blocks = sample_masked_blocks(torch.ones(len(documents), 3, dtype=torch.bool), 2, draws)
        rows = owner == at
        width = int(attention[rows].sum(-1).max())
        return inputs[rows, :width], labels[rows, :width], keep[rows, :width, : width + 1], blocks[at]

    alone = masks([short], [11], 0)
    for batch, numbers, at in (([short, long], [11, 12], 0), ([long, short], [12, 11], 1)):
        beside = masks(batch, numbers, at)
        assert all(torch.equal(a, b) for a, b in zip(alone, beside))
    other = masks([short], [13], 0)  # another document number: other draws
    assert not all(torch.equal(a, b) for a, b in zip(alone, other))
    with pytest.raises(ValueError, match="rows of each document together"):
        DocumentDraws([1, 2], torch.tensor([1, 0]), width=8, blocks=2)
