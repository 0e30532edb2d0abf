import pytest

from longdoc.store_files import StoreDamaged
from longdoc.text import segment_ids
from longdoc.text.segments import MappedSegments, SegmentedCorpus, write_token_store


def test_segments_leave_room_for_special_tokens():
    chunks = segment_ids(list(range(25)), segment_length=10, max_segments=5)
    assert [len(c) for c in chunks] == [8, 8, 8, 1]
    assert sum(chunks, []) == list(range(25))


def test_max_segments_truncates_and_empty_doc_gives_one_segment():
    assert len(segment_ids(list(range(100)), 10, 2)) == 2
    assert segment_ids([], 10, 2) == [[]]
    with pytest.raises(ValueError, match="segment_length"):
        segment_ids([1], 2, 1)


TEXTS = [
    "A pipe is a unidirectional data channel. " * 9,
    "",
    "short",
    "Sentences here. Each one ends. Then another begins, and it runs on for a while with more words. " * 4,
    "naïve café ünïcode and a signal handler that reads a socket buffer",
]


@pytest.mark.parametrize(
    "shape",
    [
        dict(segment_length=12, max_segments=3),
        dict(segment_length=12, max_segments=4, document_tokens=25),
        dict(segment_length=16, max_segments=3, sentence_filling=True),
        dict(segment_length=512, max_segments=1),
    ],
)
def test_a_memory_mapped_token_store_holds_the_segments_of_the_lists(tokenizer, tmp_path, shape):
    ids = [f"d{i}" for i in range(len(TEXTS))]
    listed = SegmentedCorpus.build(tokenizer, ids, TEXTS, batch_size=2, **shape)
    mapped = SegmentedCorpus.build(tokenizer, ids, TEXTS, batch_size=2, directory=tmp_path / "tokens", **shape)
    assert isinstance(mapped.segments, MappedSegments) and isinstance(listed.segments, list)
    assert list(mapped.segments) == listed.segments and mapped.segments[-1] == listed.segments[-1]
    assert mapped.num_segments == listed.num_segments and len(mapped) == len(listed)
    for limit in (1, 2, 5):
        assert all((a == b).all() for a, b in zip(mapped.extents(limit), listed.extents(limit)))


def test_a_token_store_is_reused_for_its_shape_and_rebuilt_for_another(tokenizer, tmp_path):
    ids = [f"d{i}" for i in range(len(TEXTS))]
    SegmentedCorpus.build(tokenizer, ids, TEXTS, 12, 3, directory=tmp_path / "tokens")
    stamp = (tmp_path / "tokens" / "tokens.bin").stat().st_mtime_ns
    SegmentedCorpus.build(tokenizer, ids, TEXTS, 12, 3, directory=tmp_path / "tokens")
    assert (tmp_path / "tokens" / "tokens.bin").stat().st_mtime_ns == stamp
    wider = SegmentedCorpus.build(tokenizer, ids, TEXTS, 20, 3, directory=tmp_path / "tokens")
    assert list(wider.segments) == SegmentedCorpus.build(tokenizer, ids, TEXTS, 20, 3).segments


def test_a_vocabulary_beyond_uint16_is_stored_in_32_bits(tmp_path):
    documents = [[[70_000, 1], [65_536]], [[]]]
    store = MappedSegments(write_token_store(tmp_path / "tokens", documents, vocabulary=80_000, spec={}))
    assert store.spec["dtype"] == "uint32" and list(store) == documents and store.total == 3


def test_token_stores_are_keyed_by_what_the_tokenizer_does_not_where_it_was_saved(tokenizer, tmp_path):
    from longdoc.text.segments import token_store_path, tokenizer_fingerprint

    tokenizer.save_pretrained(tmp_path / "copy")
    copy = type(tokenizer).from_pretrained(tmp_path / "copy")
    assert copy.name_or_path != tokenizer.name_or_path
    tokenizer(["a call that sets truncation"], truncation=True, max_length=4)  # per-call state is not identity
    assert tokenizer_fingerprint(copy) == tokenizer_fingerprint(tokenizer)
    assert token_store_path(tmp_path, copy, 12, 3) == token_store_path(tmp_path, tokenizer, 12, 3)
    assert token_store_path(tmp_path, tokenizer, 12, 4) != token_store_path(tmp_path, tokenizer, 12, 3)
    assert token_store_path(tmp_path, tokenizer, 12, 3, documents="unjudged-x").name.startswith("unjudged-x-")


def test_token_batches_keep_the_order_of_sorting_documents_by_width_then_blocks(tiny_bert, tokenizer):
    """The numpy order equals the Python sort it replaced (widest first, then most blocks, stable)."""
    import random

    from longdoc.models.biencoder import EncoderConfig, MaxP

    model = MaxP(EncoderConfig(segment_length=12, max_segments=3), tiny_bert, tokenizer)
    rng = random.Random(0)
    documents = [[[1] * rng.randint(0, 10) for _ in range(rng.randint(1, 5))] for _ in range(60)]
    corpus = SegmentedCorpus([f"d{i}" for i in range(60)], documents)

    def extent(i):
        kept = documents[i][:3]
        return max(map(len, kept)) + 2, len(kept)

    order = sorted(range(60), key=lambda i: tuple(-v for v in extent(i)))
    batches = model.token_batches(corpus, max_tokens=40)
    assert [i for batch in batches for i in batch] == order
    assert all(len(b) == 1 or sum(extent(i)[1] for i in b) * max(extent(i)[0] for i in b) <= 40 for b in batches)


def test_a_damaged_token_store_is_refused_and_rebuilt_with_a_line_saying_so(tokenizer, tmp_path, capsys):

    ids = [f"d{i}" for i in range(len(TEXTS))]
    built = SegmentedCorpus.build(tokenizer, ids, TEXTS, 12, 3, directory=tmp_path / "tokens")
    expected = [built.segments[i] for i in range(len(ids))]
    with open(tmp_path / "tokens" / "tokens.bin", "r+b") as handle:
        handle.truncate(6)
    with pytest.raises(StoreDamaged, match=r"tokens.bin: is 6 bytes, store.json says [\d,]+ \(truncated\)"):
        MappedSegments(tmp_path / "tokens")
    again = SegmentedCorpus.build(tokenizer, ids, TEXTS, 12, 3, directory=tmp_path / "tokens")
    assert "tokens.bin: is 6 bytes" in capsys.readouterr().err
    assert [again.segments[i] for i in range(len(ids))] == expected
