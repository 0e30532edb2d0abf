"""The memory-mapped corpus store equals the in-memory corpus: the same documents in the same order,
the same lookups, the same errors naming the same lines, and a dataset read through it equals one read
into a dict."""

import json
import re

import pytest
from tests.conftest import add_further_set

from longdoc.data import corpus_store
from longdoc.data.beir import load_beir, read_corpus
from longdoc.data.corpus_store import CorpusStore, open_corpus_store, write_corpus_store
from longdoc.data.errors import DataFormatError
from longdoc.data.registry import load_dataset
from longdoc.store_files import StoreDamaged

ROWS = [
    {"_id": "d1", "title": "Pipe", "text": "pipe(2): create a pipe"},
    {"_id": "zß-ü", "title": "", "text": "naïve café — ünïcode text"},
    {"_id": 7, "title": "Numbers only", "text": None},
    {"_id": "a", "title": "Shortest id", "text": "sorts first"},
    {"_id": "d10", "text": "no title field at all"},
]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def test_the_store_is_the_in_memory_corpus_in_the_same_order(tmp_path):
    source = write_rows(tmp_path / "corpus.jsonl", ROWS)
    expected = read_corpus(source)
    store = CorpusStore(write_corpus_store(source, tmp_path / "store"))
    assert list(store) == list(expected) == ["d1", "zß-ü", "7", "a", "d10"]
    assert len(store) == len(expected)
    assert all(store[d] == expected[d] for d in expected)
    assert list(store.ids) == list(expected) and store.ids[-1] == "d10" and store.ids[1:3] == ["zß-ü", "7"]
    assert list(store.full_texts) == [d.full_text for d in expected.values()]
    for absent in ("d", "d100", "zz", "", "d1\0", 7, "x" * 200):
        assert absent not in store and store.get(absent) is None
    with pytest.raises(KeyError):
        store["d2"]


def test_a_dataset_read_through_a_store_equals_the_in_memory_one(tiny_dataset, tmp_path):
    memory = load_beir(tiny_dataset)
    mapped = load_beir(tiny_dataset, store_dir=tmp_path / "stores")
    assert isinstance(mapped.corpus, CorpusStore) and not isinstance(memory.corpus, CorpusStore)
    assert list(mapped.doc_ids) == memory.doc_ids and list(mapped.texts) == memory.texts
    assert (mapped.queries, mapped.qrels, mapped.checksum) == (memory.queries, memory.qrels, memory.checksum)
    assert dict(mapped.corpus.items()) == memory.corpus
    assert mapped.subsample(10, seed=3).corpus == memory.subsample(10, seed=3).corpus


def test_a_store_is_built_once_and_opened_after(tiny_dataset, tmp_path):
    first = load_beir(tiny_dataset, store_dir=tmp_path / "stores").corpus
    stamp = (first.directory / "text.bin").stat().st_mtime_ns
    again = load_beir(tiny_dataset, store_dir=tmp_path / "stores").corpus
    assert again.directory == first.directory and (again.directory / "text.bin").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "stores").iterdir()] == [first.directory.name]  # no temporaries left


@pytest.mark.parametrize(
    ("rows", "message", "line"),
    [
        (ROWS[:2] + [{"_id": "d1", "text": "again"}], "duplicate document id 'd1' (first on line 1)", 3),
        (  # the earliest repeat in the file, not the first in sorted order ('a' < 'b')
            [
                {"_id": "b", "text": "x"},
                {"_id": "a", "text": "x"},
                {"_id": "b", "text": "y"},
                {"_id": "a", "text": "y"},
            ],
            "duplicate document id 'b' (first on line 1)",
            3,
        ),
        (
            ROWS[:1] + [{"_id": "e\u0000", "text": "x"}],
            "document id 'e\\x00' contains the invisible character U+0000",
            2,
        ),
        (ROWS[:1] + [{"_id": "e", "title": " ", "text": ""}], "document 'e' is empty", 2),
        (ROWS[:1] + [{"_id": "e", "text": ["a list"]}], "field 'text' must be a string", 2),
        ([], "the corpus holds no documents", None),
    ],
)
def test_a_bad_corpus_gives_the_in_memory_readers_error_and_leaves_no_store(tmp_path, rows, message, line):
    source = write_rows(tmp_path / "corpus.jsonl", rows)
    with pytest.raises(DataFormatError, match=re.escape(message)) as raised:
        open_corpus_store(source, tmp_path / "stores" / "one")
    assert raised.value.line == line and raised.value.path == str(source)
    assert not any((tmp_path / "stores").iterdir())


def test_a_store_is_kept_under_the_corpus_files_checksum(tiny_dataset, tmp_path):
    """New judgements (another qrels split) change the dataset's checksum but not its corpus store."""
    first = load_beir(tiny_dataset, store_dir=tmp_path / "stores")
    add_further_set(tiny_dataset, "dl19")
    again = load_beir(tiny_dataset, store_dir=tmp_path / "stores")
    assert again.checksum != first.checksum and again.corpus.directory == first.corpus.directory


def test_load_dataset_maps_a_large_corpus_when_given_a_store_folder(tiny_dataset, tmp_path, monkeypatch):
    assert not isinstance(load_dataset(str(tiny_dataset), store_dir=tmp_path).corpus, CorpusStore)  # small
    monkeypatch.setattr(corpus_store, "MAPPED_FROM_BYTES", 1)
    assert isinstance(load_dataset(str(tiny_dataset), store_dir=tmp_path).corpus, CorpusStore)
    assert not isinstance(load_dataset(str(tiny_dataset)).corpus, CorpusStore)  # no folder given: a dict
    assert not isinstance(load_dataset(str(tiny_dataset), store_dir=tmp_path, mapped=False).corpus, CorpusStore)
    with pytest.raises(ValueError, match="needs store_dir"):
        load_dataset(str(tiny_dataset), mapped=True)


def truncate(path, keep):
    with open(path, "r+b") as handle:
        handle.truncate(keep)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: truncate(d / "text.bin", 20), r"text.bin: is 20 bytes, store.json says [\d,]+ \(truncated\)"),
        (lambda d: truncate(d / "bounds.npy", 100), r"bounds.npy: is 100 bytes, store.json says [\d,]+ \(truncated\)"),
        (lambda d: (d / "store.json").write_text("{not json"), r"store.json: is not the JSON its builder wrote"),
        (lambda d: (d / "ids.npy").unlink(), r"ids.npy: missing: the store is damaged"),
    ],
    ids=["text.bin truncated", "bounds.npy truncated", "store.json not JSON", "ids.npy missing"],
)
def test_a_damaged_store_is_refused_naming_its_file_and_rebuilt_from_its_source(tmp_path, capsys, damage, message):

    corpus = write_rows(tmp_path / "corpus.jsonl", ROWS)
    store = write_corpus_store(corpus, tmp_path / "store")
    damage(store)
    with pytest.raises(StoreDamaged, match=message):
        CorpusStore(store)
    rebuilt = open_corpus_store(corpus, store)
    assert re.search(message + r".*; rebuilding it from .*corpus.jsonl\n\Z", capsys.readouterr().err)
    assert dict(rebuilt) == read_corpus(corpus)  # never a document cut short
    rebuilt.verify()


def test_verify_finds_a_changed_byte_that_keeps_the_size(tmp_path):
    store = write_corpus_store(write_rows(tmp_path / "corpus.jsonl", ROWS), tmp_path / "store")
    raw = bytearray((store / "text.bin").read_bytes())
    raw[0] ^= 1
    (store / "text.bin").write_bytes(raw)

    opened = CorpusStore(store)  # sizes match: opening is cheap and passes
    with pytest.raises(StoreDamaged, match=r"text.bin: its SHA-256 differs from the one in store.json"):
        opened.verify()


def test_a_file_cut_short_after_opening_is_an_error_not_a_short_document(tmp_path):

    store = CorpusStore(write_corpus_store(write_rows(tmp_path / "corpus.jsonl", ROWS), tmp_path / "store"))
    truncate(store.directory / "text.bin", 10)
    with pytest.raises(StoreDamaged, match=r"text.bin: read \d+ of \d+ bytes"):
        list(store.full_texts)
