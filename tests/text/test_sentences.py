import pytest

from longdoc.text.sentences import greedy_fill, sentence_blocks, split_sentences


def ids(n: int, start: int = 0) -> list[int]:
    return list(range(start, start + n))


def test_whole_sentences_are_packed_until_the_next_does_not_fit():
    # Figure 3: short natural sentences share a block; the one that does not fit opens the next block
    s1, s2, s3, s4 = ids(10, 100), ids(12, 200), ids(9, 300), ids(20, 400)
    assert greedy_fill([s1, s2, s3, s4], 32) == [s1 + s2 + s3, s4]
    assert greedy_fill([s1, s2, s3, s4], 31) == [s1 + s2 + s3, s4]  # exactly full
    assert greedy_fill([s1, s2, s3, s4], 30) == [s1 + s2, s3 + s4]


def test_a_sentence_longer_than_a_block_is_cut_and_its_rest_continues():
    short, long, tail = ids(5, 100), ids(70, 200), ids(3, 400)
    blocks = greedy_fill([short, long, tail], 32)
    assert blocks == [short, long[:32], long[32:64], long[64:] + tail]
    assert sum(map(len, blocks)) == 78  # no token is lost


def test_max_blocks_keeps_the_first_blocks_and_empty_documents_give_one_empty_block():
    sentences = [ids(20, 100 * i) for i in range(6)]
    assert greedy_fill(sentences, 32, max_blocks=2) == sentences[:2]
    assert greedy_fill([], 32) == [[]] and greedy_fill([[]], 32) == [[]]
    with pytest.raises(ValueError, match="content_length"):
        greedy_fill(sentences, 0)


def test_sentences_are_split_per_line(tokenizer):
    text = "NAME\nThe first sentence. The second one is here.\n\nint main(void);"
    assert split_sentences(text) == ["NAME", "The first sentence.", "The second one is here.", "int main(void);"]
    (blocks,) = sentence_blocks(tokenizer, [text], block_length=12)
    words = [tokenizer.decode(b) for b in blocks]
    assert words == ["name the first sentence.", "the second one is here.", "int main ( void ) ;"]
    assert all(len(b) <= 10 for b in blocks)
