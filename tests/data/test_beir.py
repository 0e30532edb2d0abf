import json

import pytest

from longdoc.data import DataFormatError, load_beir, save_beir


def test_fixture_loads_and_round_trips(fixtures, tmp_path):
    data = load_beir(fixtures / "beir")
    assert list(data.corpus) == ["d1", "d2"]
    assert data.split("test") == ({"q2": "noble gas"}, {"q2": {"d2": 1}})
    save_beir(data, tmp_path)
    again = load_beir(tmp_path)
    assert again.corpus == data.corpus and again.queries == data.queries and again.qrels == data.qrels


def copy_fixture(fixtures, tmp_path):
    for path in (fixtures / "beir").rglob("*"):
        if path.is_file():
            target = tmp_path / path.relative_to(fixtures / "beir")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return tmp_path


@pytest.mark.parametrize(
    "corrupt, message, line",
    [
        (
            lambda d: d.joinpath("corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n'),
            "duplicate document id 'd1'",
            2,
        ),
        (
            lambda d: d.joinpath("corpus.jsonl").write_text(
                '{"_id": "d1", "text": "a"}\n{"_id": "d2", "title": "", "text": "  "}\n'
            ),
            "is empty",
            2,
        ),
        (
            lambda d: d.joinpath("corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": \n'),
            "not valid JSON",
            2,
        ),
        (
            lambda d: d.joinpath("qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td9\t1\n"),
            "unknown document id 'd9'",
            2,
        ),
        (
            lambda d: d.joinpath("qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq7\td2\t1\n"),
            "unknown query id 'q7'",
            2,
        ),
        (
            lambda d: d.joinpath("qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\n"),
            "expected 3 tab-separated fields",
            2,
        ),
        (
            lambda d: d.joinpath("qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\tyes\n"),
            "not an integer",
            2,
        ),
        (
            lambda d: d.joinpath("queries.jsonl").write_text(
                '{"_id": "q1", "text": "x"}\n{"_id": "q1", "text": "y"}\n'
            ),
            "duplicate query id",
            2,
        ),
    ],
)
def test_malformed_input_names_file_and_line(fixtures, tmp_path, corrupt, message, line):
    directory = copy_fixture(fixtures, tmp_path)
    corrupt(directory)
    with pytest.raises(DataFormatError, match=message) as err:
        load_beir(directory)
    assert err.value.line == line and err.value.path.startswith(str(directory))
    assert f"line {line}" in str(err.value)


def test_empty_documents_can_be_skipped_and_counted(tmp_path):
    from longdoc.data.beir import read_corpus

    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"_id": "a", "text": "x"}, {"_id": "b", "text": ""}]) + "\n")
    stats = {}
    assert list(read_corpus(path, on_empty="skip", stats=stats)) == ["a"]
    assert stats == {"skipped_empty": 1}


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataFormatError, match="corpus.jsonl: missing"):
        load_beir(tmp_path)


def test_subsample_keeps_relevant_documents(fixtures):
    data = load_beir(fixtures / "beir")
    small = data.subsample(1, seed=0)
    assert len(small.corpus) == 1
    for judged in small.qrels.values():
        for docs in judged.values():
            assert set(docs) <= set(small.corpus)
