"""The explorer's logic on a tiny trained study: what is ready, rankings equal the study's own runs,
the deciding segment is the brute-force best one, disagreements are per-query differences."""

from types import SimpleNamespace

import numpy as np
import pytest
from tests.conftest import build_tiny_study

from longdoc.eval.metrics import per_query
from longdoc.experiments.cache import NotCached, cache_only
from longdoc.experiments.families.retrieval import BM25, Dense, bm25_run
from longdoc.experiments.settings import EncoderSettings
from longdoc.experiments.systems import System
from longdoc.explore.catalog import Entry, availability, catalog
from longdoc.explore.evidence import deciding_segment, highlight, identifier_path
from longdoc.explore.ranking import Searcher, disagreements, first_relevant_rank
from longdoc.explore.widgets import Explorer


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_backbone):
    """BM25, FirstP and MaxP of a tiny study, the two dense rows fine-tuned (cache in a temporary folder)."""
    from tests.conftest import write_tiny_dataset

    from longdoc import plots
    from longdoc.experiments import cache, records, study

    root = tmp_path_factory.mktemp("explore")
    patch = pytest.MonkeyPatch()
    patch.setattr(cache, "CACHE_DIR", root / "cache")
    for module in (records, study):
        patch.setattr(module, "RESULTS_DIR", root / "results")
    patch.setattr(study, "FIGURES_DIR", root / "figures")
    patch.setattr(plots, "FIGURES_DIR", root / "figures")
    tiny = build_tiny_study(write_tiny_dataset(root / "tiny"), tiny_backbone, learning_rates=[1e-3], seeds=[0])
    encoders = tiny.settings(EncoderSettings)
    systems = [
        System("BM25", BM25()),
        System("FirstP", Dense("FirstP", encoders.encoder("FirstP"))),
        System("MaxP", Dense("MaxP", encoders.encoder("MaxP")), paper_name="MaxP"),
    ]
    missing_before = availability(tiny, systems[2])
    tiny.run_all(systems)
    entries = [Entry(s.name, "01_baselines", s, tiny) for s in systems]
    yield SimpleNamespace(study=tiny, entries={e.name: e for e in entries}, missing_before=missing_before)
    patch.undo()


def test_a_row_without_its_fit_in_the_cache_is_listed_as_missing_with_the_notebook_that_makes_it(trained):
    assert trained.missing_before.startswith("not trained yet (finetune missing): run notebooks/01_baselines.ipynb")
    assert availability(trained.study, trained.entries["MaxP"].system) == ""  # trained since


def test_cache_only_reads_and_never_builds(tmp_path, monkeypatch):
    from longdoc.experiments import cache

    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path)
    built = []
    with cache_only(), pytest.raises(NotCached, match="no cached probe artefact"):
        cache.cached_directory("probe", lambda d: built.append(d), x=1)
    assert not built and not any(tmp_path.iterdir())
    cache.cached_directory("probe", lambda d: built.append(d), x=1)
    with cache_only():
        assert (cache.cached_directory("probe", lambda d: built.append(d), x=1) / "key.json").exists()
    assert len(built) == 1


def test_bm25_ranks_as_the_studys_bm25_run(trained):
    queries, _ = trained.study.split("test")
    qid, text = next(iter(queries.items()))
    hits = Searcher(trained.entries["BM25"]).search(text, 5)
    expected = bm25_run(trained.study.data, {qid: text}, 5)[qid]
    assert [d for d, _ in hits] == sorted(expected, key=lambda d: -expected[d])


def test_a_trained_row_ranks_with_its_kept_vectors_as_its_own_test_run(trained):
    """The explorer searches the fit's dev-best corpus vectors: the same top documents and scores as the
    test run the study reports for that fit."""
    entry = trained.entries["MaxP"]
    reported = trained.study.results["MaxP"].test_runs[0]
    queries, _ = trained.study.split("test")
    searcher = Searcher(entry)
    for qid in list(queries)[:3]:
        hits = searcher.search(queries[qid], 5)
        expected = sorted(reported[qid].items(), key=lambda item: -item[1])[:5]
        assert [d for d, _ in hits] == [d for d, _ in expected]
        assert [s for _, s in hits] == pytest.approx([s for _, s in expected], abs=1e-4)


def test_the_deciding_segment_is_the_best_of_the_documents_segments_encoded_one_by_one(trained):
    searcher = Searcher(trained.entries["MaxP"])
    query = trained.study.split("test")[0][next(iter(trained.study.split("test")[0]))]
    doc_id, score = searcher.search(query, 1)[0]
    evidence = deciding_segment(searcher, doc_id, query)
    model, corpus = searcher.model, searcher.corpus
    segments = corpus.segments[corpus.doc_ids.index(doc_id)]
    assert evidence.segments == len(segments) > 1
    q = model.encode_queries([query])[0]
    brute = []
    for segment in segments:  # each segment alone, as a one-segment document
        one = type(corpus)([doc_id], [[segment]])
        vectors, _ = model.encode_corpus(one, progress=False)
        brute.append(float(vectors[0] @ q))
    assert evidence.scores == pytest.approx(brute, abs=1e-4)
    assert evidence.segment == int(np.argmax(brute)) and max(brute) == pytest.approx(score, abs=1e-4)
    assert evidence.text == model.tokenizer.decode(segments[evidence.segment])
    firstp = Searcher(trained.entries["FirstP"])
    single = deciding_segment(firstp, firstp.search(query, 1)[0][0], query)
    assert single.segments == 1 and single.note == "the model read one segment"


def test_highlight_marks_the_querys_terms_and_escapes_the_text():
    marked = highlight("The <b>kernel</b> schedules kernels; Kernel!", "what is the kernel")
    assert marked.count("<mark>") == 2 and "&lt;b&gt;" in marked and "<mark>Kernel</mark>!" in marked
    assert "<mark>The</mark>" not in marked  # stop words are not marked


def test_disagreements_are_the_largest_per_query_differences(trained):
    queries, qrels = trained.study.split("test")
    bm25, maxp = Searcher(trained.entries["BM25"]), Searcher(trained.entries["MaxP"])
    frame = disagreements(bm25, maxp, queries, qrels, top=3)
    a = per_query(bm25.engine().search(queries, 100), qrels, ["MRR@100"])["MRR@100"]
    b = per_query(maxp.engine().search(queries, 100), qrels, ["MRR@100"])["MRR@100"]
    brute = sorted(((a[q] - b[q]) for q in queries), key=abs, reverse=True)[:3]
    assert list(frame["difference"]) == pytest.approx(brute)
    assert list(frame.columns[:4]) == ["query", "text", "BM25", "MaxP"]
    with pytest.raises(ValueError, match="two different systems"):
        disagreements(bm25, bm25, queries, qrels)


def test_first_relevant_rank():
    assert first_relevant_rank({"a": 3.0, "b": 2.0, "c": 1.0}, {"c": 1, "a": 0}) == 3
    assert first_relevant_rank({"a": 1.0}, {"z": 1}) is None


def test_nci_identifier_prefixes_count_the_documents_under_them():
    retriever = SimpleNamespace(doc_ids=["d0", "d1", "d2", "d3"], identifiers=[(0, 0), (0, 1), (0, 1, 0), (1, 0)])
    path = identifier_path(retriever, "d1")
    assert [(p["prefix"], p["documents"]) for p in path] == [("0", 3), ("0-1", 2)]
    assert path[1]["examples"] == "d2"


def test_the_explorer_shows_each_systems_top_k_side_by_side_with_marks_and_reasons(trained):
    explorer = Explorer(entries=list(trained.entries.values()), k=3)
    qid, text = next(iter(explorer.test_queries.items()))
    page = explorer.ranking_html(["BM25", "MaxP"], query_id=qid)
    shown = sum(
        len(explorer.searcher(n).search(text, 3)) for n in ("BM25", "MaxP")
    )  # BM25 names only matching documents
    assert page.count("class='longdoc-system'") == 2 and page.count("class='longdoc-hit'") == shown > 3
    assert "✔" in page or "✘" in page
    assert "segment" in page and "BM25: the document's terms" in page
    assert explorer.query_text(text.upper())[1] == explorer.all_qrels[qid]  # a typed judged query gets its marks
    assert explorer.query_text("nothing judged like this")[1] is None
    assert "Type a query" in explorer.ranking_html(["BM25"], "  ")
    with pytest.raises(ValueError, match="unknown system 'NCI'"):
        explorer.ranking_html(["NCI"], text)
    assert "differ most" in explorer.disagreement_html("BM25", "MaxP")
    assert explorer.default_systems() == ["BM25", "MaxP", "FirstP"]  # BM25, the papers' own rows, other trained rows


def test_the_widget_builds_with_the_classes_the_browser_check_finds(trained):
    explorer = Explorer(entries=list(trained.entries.values()), k=3)
    tabs = explorer.widget()
    classes = {c for box in tabs.children for w in box.children for c in getattr(w, "_dom_classes", ())}
    assert {"longdoc-query", "longdoc-pick", "longdoc-systems", "longdoc-rank", "longdoc-ranking"} <= classes


def test_the_catalog_names_what_is_missing_on_a_fresh_cache(tiny_dataset, isolated_outputs):
    entries = {e.name: e for e in catalog("smoke", str(tiny_dataset), notebooks=["01_baselines"])}
    assert entries and all(e.notebook == "01_baselines" for e in entries.values())
    ready = {n for n, e in entries.items() if e.ready}
    assert any(e.kind == "bm25" for n, e in entries.items() if n in ready)
    trained = [e for e in entries.values() if e.system.spec.trained]
    assert trained and all("run notebooks/01_baselines.ipynb under profile smoke" in e.missing for e in trained)
    with pytest.raises(ValueError, match="profile='nope'"):
        catalog("nope")


def test_a_system_on_another_corpus_is_not_shown_beside_the_others(trained, tiny_backbone):
    """A profile may subsample per notebook (cpu: NCI reads 300 documents): such a row is listed with
    the reason, never ranked beside rows of another corpus."""
    smaller = build_tiny_study(trained.study.params["dataset"], tiny_backbone, max_docs=12)
    other = Entry("BM25 (12 documents)", "40_nci_main", System("BM25 (12 documents)", BM25()), smaller)
    explorer = Explorer(entries=[*trained.entries.values(), other], k=3)
    assert "BM25 (12 documents)" not in explorer.ready
    assert explorer.missing["BM25 (12 documents)"].startswith("ranks another corpus (tiny[12], 12 documents)")
    assert "notebooks=['40_nci_main']" in explorer.missing["BM25 (12 documents)"]
