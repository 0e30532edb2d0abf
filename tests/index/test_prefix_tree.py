import pytest
import torch

from longdoc.index.prefix_tree import PrefixConstraint, PrefixTree
from longdoc.index.semantic_ids import IdTokenizer


def small_tree():
    ids = [(0, 0), (0, 1), (1, 0, 0), (1, 0, 1), (2,)]
    tokenizer = IdTokenizer.fit(ids)
    return ids, tokenizer, PrefixTree([tokenizer.encode(i) for i in ids], tokenizer.vocab_size)


def test_children_of_each_prefix_are_exactly_the_next_tokens_of_the_identifiers():
    ids, tokenizer, tree = small_tree()
    sequences = [tokenizer.encode(i) for i in ids]
    prefixes = {tuple(s[:n]) for s in sequences for n in range(len(s))}
    for prefix in prefixes:
        expected = {s[len(prefix)] for s in sequences if tuple(s[: len(prefix)]) == prefix}
        row = torch.tensor([[0, *prefix]])  # column 0: the decoder's start token
        assert set(torch.nonzero(tree.allowed_tokens(row)[0]).flatten().tolist()) == expected, prefix
    assert len(tree) == 5
    for number, sequence in enumerate(sequences):
        assert tree.sequence_number(sequence) == number
    assert tree.sequence_number(sequences[2][:-1]) is None  # a prefix is no document


def test_a_prefix_off_the_tree_may_only_end():
    _, tokenizer, tree = small_tree()
    off = torch.tensor([[0, tokenizer.encode((2,))[0], 3]])
    assert torch.nonzero(tree.allowed_tokens(off)[0]).flatten().tolist() == [IdTokenizer.EOS]


def test_constraint_masks_every_other_token():
    _, tokenizer, tree = small_tree()
    scores = torch.zeros(2, tokenizer.vocab_size)
    masked = PrefixConstraint(tree)(torch.tensor([[0], [0]]), scores)
    assert torch.isfinite(masked).sum(1).tolist() == [3, 3]  # the three first digits


def test_bad_identifier_sets_are_refused():
    with pytest.raises(ValueError, match="same sequence"):
        PrefixTree([[2, 1], [2, 1]], 4)
    with pytest.raises(ValueError, match="end with EOS"):
        PrefixTree([[2, 3]], 4)
    with pytest.raises(ValueError, match="at least one"):
        PrefixTree([], 4)
