import pytest

from longdoc.text.pseudo_queries import document_as_queries


def test_first_terms_then_distinct_random_windows():
    text = " ".join(f"w{i}" for i in range(300))
    queries = document_as_queries("open.2", text, terms=64, windows=10, seed=0)
    assert len(queries) == 11
    assert queries[0] == " ".join(f"w{i}" for i in range(64))
    starts = [int(q.split()[0][1:]) for q in queries[1:]]
    assert len(set(starts)) == 10 and all(1 <= s <= 236 for s in starts)
    for query, start in zip(queries[1:], starts):
        assert query.split() == [f"w{i}" for i in range(start, start + 64)]
    assert queries == document_as_queries("open.2", text, seed=0)  # seeded by document id and seed
    assert queries != document_as_queries("close.2", text, seed=0)


def test_short_documents_give_what_they_have():
    assert document_as_queries("a", "one two three", terms=64) == ["one two three"]
    assert len(document_as_queries("a", " ".join(["x"] * 66), terms=64, windows=10)) == 3  # starts 1 and 2 only
    assert document_as_queries("a", "   ") == []
    with pytest.raises(ValueError, match="terms"):
        document_as_queries("a", "x", terms=0)
