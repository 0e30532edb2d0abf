import pytest

from longdoc.text import segment_ids


def test_segments_leave_room_for_special_tokens():
    chunks = segment_ids(list(range(25)), segment_length=10, max_segments=5)
    assert [len(c) for c in chunks] == [8, 8, 8, 1]
    assert sum(chunks, []) == list(range(25))


def test_max_segments_truncates_and_empty_doc_gives_one_segment():
    assert len(segment_ids(list(range(100)), 10, 2)) == 2
    assert segment_ids([], 10, 2) == [[]]
    with pytest.raises(ValueError, match="segment_length"):
        segment_ids([1], 2, 1)
