import numpy as np
import pytest

from longdoc.index.semantic_ids import IdTokenizer, hierarchical_ids, random_ids


def check_tree(ids, n, k, c):
    assert len(ids) == n and len(set(ids)) == n  # unique
    for a in ids:
        for b in ids:
            assert a == b or b[: len(a)] != a  # no identifier is a prefix of another
    leaves = {}
    for identifier in ids:
        leaves.setdefault(identifier[:-1], []).append(identifier[-1])
        assert all(0 <= digit < k for digit in identifier[:-1])
    for positions in leaves.values():  # a leaf holds at most c documents, numbered 0..
        assert sorted(positions) == list(range(len(positions))) and len(positions) <= c


def test_hierarchical_kmeans_gives_unique_prefix_free_ids_and_respects_c():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 8)) * 5
    embeddings = np.concatenate([centre + rng.normal(size=(30, 8)) for centre in centres])
    ids = hierarchical_ids(embeddings, k=3, c=7, seed=0)
    check_tree(ids, 120, 3, 7)
    assert ids == hierarchical_ids(embeddings, k=3, c=7, seed=0)  # deterministic
    top = {}
    for row, identifier in enumerate(ids):
        top.setdefault(row // 30, set()).add(identifier[0])
    assert sum(len(v) == 1 for v in top.values()) >= 3  # well-separated groups mostly share a top-level cluster


def test_identical_embeddings_and_singletons_still_get_ids():
    embeddings = np.concatenate([np.zeros((25, 4)), np.ones((1, 4))])
    ids = hierarchical_ids(embeddings, k=2, c=3)
    check_tree(ids, 26, 2, 3)
    assert all(len(i) >= 2 for i in ids)  # the singleton's cluster still gives it a leaf digit


def test_random_ids_have_the_same_construction():
    ids = random_ids(50, k=3, c=4, seed=1)
    check_tree(ids, 50, 3, 4)
    assert ids != random_ids(50, k=3, c=4, seed=2)


def test_id_tokens_round_trip_and_carry_their_position():
    ids = [(0, 2, 1), (1, 0), (2, 1, 0)]
    tokenizer = IdTokenizer.fit(ids)
    assert tokenizer.base == 3 and tokenizer.depth == 3 and tokenizer.vocab_size == 11
    for identifier in ids:
        tokens = tokenizer.encode(identifier)
        assert tokens[-1] == IdTokenizer.EOS and tokenizer.decode(tokens) == identifier
        assert all(token in tokenizer.allowed_at(step) for step, token in enumerate(tokens[:-1]))
    assert tokenizer.encode((1,)) != tokenizer.encode((0, 1))[1:]  # the same digit at another depth: another token
    with pytest.raises(ValueError):
        tokenizer.decode([2 + 3 + 1, 1])  # a depth-1 token at step 0
    with pytest.raises(ValueError):
        tokenizer.encode((3,))


def test_dsi_tokens_share_one_vocabulary_across_depths():
    ids = [(0, 2, 1), (1, 0), (2, 1, 0)]
    tokenizer = IdTokenizer.fit(ids, positional=False)
    assert tokenizer.vocab_size == 5
    assert tokenizer.encode((1, 1)) == [3, 3, IdTokenizer.EOS]
    for identifier in ids:
        assert tokenizer.decode(tokenizer.encode(identifier)) == identifier
