"""BM25 over a corpus: tokenized on several processes it is the index of one, saved and loaded it ranks
the same, and a study builds it once per corpus into its cache."""

import pytest

import longdoc.index.bm25 as bm25
from longdoc.index.bm25 import BM25Retriever

WORDS = "engine fuel piston valve spark plug gear clutch brake wheel tyre road lamp battery cable".split()
DOCS = {f"d{i}": " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 12 + i % 7)) for i in range(60)}
QUERIES = {"q1": "spark plug", "q2": "brake wheels", "q3": "the unknownword", "q4": "valve valve gear"}


def test_a_corpus_tokenized_on_several_processes_is_indexed_as_by_one(monkeypatch):
    one = BM25Retriever().index(list(DOCS), list(DOCS.values()), workers=1).search(QUERIES, 10)
    monkeypatch.setattr(bm25, "PARALLEL_FROM_DOCUMENTS", 10)
    monkeypatch.setattr(bm25, "CHUNK_DOCUMENTS", 7)
    several = BM25Retriever().index(list(DOCS), list(DOCS.values()), workers=2).search(QUERIES, 10)
    assert several == one and one["q1"]
    assert one.get("q3", {}) == {}  # a stop word and an unknown word match nothing


def test_a_saved_index_loads_and_ranks_the_same(tmp_path):
    built = BM25Retriever(k1=1.2, b=0.75).index(list(DOCS), list(DOCS.values()))
    built.save(tmp_path)
    loaded = BM25Retriever.load(tmp_path)
    assert loaded.params == built.params and loaded.doc_ids == list(DOCS)
    assert loaded.search(QUERIES, 5) == built.search(QUERIES, 5)


def test_a_study_builds_bm25_once_per_corpus_into_its_cache(monkeypatch, tmp_path):
    import longdoc.experiments.cache as cache
    from longdoc.data.beir import Document, RetrievalDataset
    from longdoc.experiments.families.retrieval import bm25_run

    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path)
    built = []
    real_index = BM25Retriever.index
    monkeypatch.setattr(BM25Retriever, "index", lambda self, *a, **k: built.append(1) or real_index(self, *a, **k))

    def dataset():
        corpus = {d: Document(d, "", text) for d, text in DOCS.items()}
        return RetrievalDataset("cars", corpus, {"q1": "spark plug"}, {"test": {"q1": {"d1": 1}}}, {"checksum": "c1"})

    first = bm25_run(dataset(), QUERIES, 10)
    again = bm25_run(dataset(), QUERIES, 10)  # another loaded copy of the same corpus: read from the cache
    assert first == again == BM25Retriever().index(list(DOCS), list(DOCS.values())).search(QUERIES, 10)
    assert len(built) == 2  # the cached build, and the direct one of the last line
    assert len(list((tmp_path / "bm25").glob("*/key.json"))) == 1
    with pytest.raises(ValueError, match="cannot index an empty corpus"):
        BM25Retriever().index([], [])


def test_the_index_of_term_lists_ranks_as_bm25s_own_token_ids_did():
    """The retriever indexes lists of terms; before, bm25s's own tokenizer handed it token ids (and the
    queries' ids of another vocabulary). Both rank alike, a stop-word-only document and query included."""
    import bm25s
    import Stemmer

    docs = {**DOCS, "stop": "the a of and"}
    queries = {**QUERIES, "stops": "the and"}
    stemmer = Stemmer.Stemmer("english")
    model = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    model.index(
        bm25s.tokenize(list(docs.values()), stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False
    )
    tokenized = bm25s.tokenize(list(queries.values()), stopwords="en", stemmer=stemmer, show_progress=False)
    ids, scores = model.retrieve(tokenized, k=10, show_progress=False, n_threads=1, backend_selection="numpy")
    by_ids = {
        qid: {list(docs)[int(d)]: float(s) for d, s in zip(ids[row], scores[row]) if s > 0}
        for row, qid in enumerate(queries)
    }
    assert BM25Retriever().index(list(docs), list(docs.values())).search(queries, 10) == by_ids
