"""Dev selection over a candidate set (``dev_candidates``): the candidates are BM25's top k per dev query
and the judged documents; over every document it scores as the whole corpus does; a fit that selects
on candidates still reports runs over the whole corpus, and records what it ranked."""

from tests.conftest import add_further_set

from longdoc.data.registry import load_dataset
from longdoc.experiments.families.retrieval import (
    Dense,
    RetrievalEvaluation,
    bm25_run,
    dev_candidate_ids,
    segment_corpus,
)
from longdoc.experiments.settings import EncoderSettings
from longdoc.experiments.systems import System
from longdoc.models.registry import build_encoder


def test_candidates_are_each_dev_querys_bm25_top_k_and_the_judged_documents_in_corpus_order(tiny_dataset):
    dataset = load_dataset(str(tiny_dataset))
    queries, qrels = dataset.split("dev")
    top = bm25_run(dataset, queries, 2)
    expected = {d for run in top.values() for d in list(run)[:2]} | {d for judged in qrels.values() for d in judged}
    candidates = dev_candidate_ids(dataset, 2)
    assert set(candidates) == expected and len(candidates) < len(dataset.doc_ids)
    assert candidates == [d for d in dataset.doc_ids if d in expected]


def test_over_every_document_the_candidate_evaluation_scores_and_reports_as_the_whole_corpus(
    tiny_dataset, tiny_backbone, tiny_study
):
    dataset = load_dataset(str(tiny_dataset))
    encoder = tiny_study(tiny_dataset, tiny_backbone).settings(EncoderSettings).encoder("MaxP")
    model = build_encoder("MaxP", encoder, 0)
    corpus = segment_corpus(model, dataset)
    whole, candidates = RetrievalEvaluation(dataset, corpus), RetrievalEvaluation(dataset, corpus, dataset.doc_ids)
    assert candidates.ranks_candidates and not whole.ranks_candidates
    assert candidates(model, 1) == whole(model, 1)
    assert set(candidates.kept[1]) == {"dev"}  # an evaluation searches the dev queries only
    runs, best = candidates.final(model, 1)
    assert runs == whole.kept[1] and best["vectors"].shape == whole.best["vectors"].shape


def test_a_fit_selected_on_candidates_reports_whole_corpus_runs_and_records_the_candidates(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    study = tiny_study(tiny_dataset, tiny_backbone, dev_candidates=1, learning_rates=[1e-3], seeds=[0])
    spec = Dense("FirstP", study.settings(EncoderSettings).encoder("FirstP"))
    fit = study.fit(System("FirstP", spec))
    ranked = dev_candidate_ids(study.data, 1)
    assert fit.last["dev_candidates"] == 1 and fit.last["dev_documents"] == len(ranked) < len(study.data.doc_ids)
    for split in ("dev", "test"):  # the reported runs rank every document (24 < the run depth)
        assert all(len(run) == len(study.data.doc_ids) for run in fit.outputs[split].values())
    plain = tiny_study(tiny_dataset, tiny_backbone, learning_rates=[1e-3], seeds=[0])
    assert "dev_candidates" not in plain.fit(System("FirstP", spec)).last  # another fit, without candidates


def with_dl19(directory, copy):
    """A copy of the tiny dataset with a further reported set: the test queries again (ids of their own)
    judged as ``qrels/dl19.tsv``."""
    import shutil

    shutil.copytree(directory, copy)
    return add_further_set(copy, "dl19")


def test_a_further_reported_set_is_run_recorded_and_shown_beside_the_papers_values_on_it(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study, tmp_path
):
    import pandas as pd

    from longdoc.experiments.families.retrieval import BM25, evaluation_queries, further_reported_splits

    study = tiny_study(with_dl19(tiny_dataset, tmp_path / "with-dl19"), tiny_backbone, learning_rates=[1e-3], seeds=[0])
    assert further_reported_splits(study.data) == ["dl19"] and set(evaluation_queries(study.data)) == {
        "dev",
        "test",
        "dl19",
    }
    assert study.family.reported_splits(study) == ["test", "dl19"]
    study.run(System("BM25", BM25(), paper_name="BM25"))
    study.run(System("FirstP", Dense("FirstP", study.settings(EncoderSettings).encoder("FirstP")), paper_name="FirstP"))
    records = study.system_records()
    for name in ("BM25", "FirstP"):  # the same judgements as test: the same numbers
        assert records[name]["dl19"] == records[name]["test"]
    paper = pd.DataFrame([{"system": "BM25", "our_name": "BM25", "NDCG@10": 0.5, "MRR@100": 0.2, "R@100 (TREC)": 0.4}])
    tables = study.further_sets(paper, {"dl19": {"NDCG@10": "TREC DL 19", "R@100 (TREC)": "TREC DL 19"}})
    assert list(tables) == ["dl19"]
    table = tables["dl19"]
    assert "paper NDCG@10 (TREC DL 19)" in table and "paper MRR@100" not in " ".join(table.columns)
    assert table.loc["BM25", "paper NDCG@10 (TREC DL 19)"] == 0.5
    assert table.loc["BM25", "paper R@100 (TREC DL 19)"] == 0.4  # the paper's TREC recall column, beside our R@100
    assert "paper" not in " ".join(study.further_sets(paper, {})["dl19"].columns)  # no paper values named
    study.results["BM25"].outcomes[0].write(tmp_path / "written", study.data, "BM25", None)
    assert sorted(p.name for p in (tmp_path / "written" / "runs").iterdir()) == ["BM25.dl19.trec", "BM25.trec"]
    plain = tiny_study(tiny_dataset, tiny_backbone)
    assert plain.family.reported_splits(plain) == ["test"] and plain.further_sets(paper, {}) == {}


def test_a_further_set_without_a_relevant_judgement_is_left_out(tiny_dataset, tmp_path):
    """As a subsample that keeps none of dl19's judged documents leaves it: no query to run, no table."""
    from longdoc.experiments.families.retrieval import evaluation_queries, further_reported_splits

    copy = with_dl19(tiny_dataset, tmp_path / "with-dl19")
    (copy / "qrels" / "dl19.tsv").write_text("query-id\tcorpus-id\tscore\ndl19-q18\td18\t0\n")
    dataset = load_dataset(str(copy))
    assert "dl19" in dataset.qrels and further_reported_splits(dataset) == []
    assert set(evaluation_queries(dataset)) == {"dev", "test"}


def test_a_memory_mapped_corpus_fits_and_reports_as_the_in_memory_one(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study, monkeypatch
):
    from longdoc.data import corpus_store
    from longdoc.data.corpus_store import CorpusStore
    from longdoc.experiments import cache
    from longdoc.text.segments import MappedSegments

    def fit(row):
        study = tiny_study(tiny_dataset, tiny_backbone, learning_rates=[1e-3], seeds=[0], dev_candidates=2)
        spec = Dense(row, study.settings(EncoderSettings).encoder(row))
        outcome = study.fit(System(row, spec))
        model = build_encoder(row, study.settings(EncoderSettings).encoder(row), 0)
        return study, outcome, segment_corpus(model, study.data), model

    in_memory = {row: fit(row) for row in ("FirstP", "MaxP")}
    monkeypatch.setattr(corpus_store, "MAPPED_FROM_BYTES", 1)  # every corpus is "large"
    monkeypatch.setattr(cache, "CACHE_DIR", isolated_outputs / "cache-mapped")  # fitted again, not read back
    for row, (_, outcome, corpus, model) in in_memory.items():
        mapped_study, mapped_outcome, mapped_corpus, _ = fit(row)
        assert isinstance(mapped_study.data.corpus, CorpusStore) and isinstance(mapped_corpus.segments, MappedSegments)
        assert list(mapped_corpus.segments) == corpus.segments
        assert model.token_batches(mapped_corpus, 64) == model.token_batches(corpus, 64)
        assert (isolated_outputs / "cache-mapped" / "corpus").is_dir()
        assert mapped_outcome.outputs == outcome.outputs and mapped_outcome.last["history"] == outcome.last["history"]


def test_a_fit_whose_training_queries_cannot_fill_one_step_is_refused_before_mining_or_launching(
    tiny_dataset, isolated_outputs, monkeypatch, tiny_backbone
):
    """8 processes of batch 48 need 384 training queries a step: the kernel says so at once, before BM25
    mines negatives (hours at MS MARCO scale) and before 8 processes start."""
    import pytest

    from longdoc.experiments.families.retrieval import fitting
    from longdoc.models import EncoderConfig
    from longdoc.train.loop import TrainConfig

    dataset = load_dataset(str(tiny_dataset))
    monkeypatch.setattr(fitting, "launch", lambda *a: pytest.fail("launched"))
    monkeypatch.setattr(fitting, "bm25_run", lambda *a: pytest.fail("mined"))
    encoder = EncoderConfig(backbone=tiny_backbone, segment_length=16, max_segments=1)
    train = TrainConfig(steps=2, batch_size=48, hard_negatives=1, learning_rate=1e-3)
    queries = len(dataset.split("train")[0])
    with pytest.raises(ValueError, match=f"training FirstP: {queries} training items, fewer than one step's 384"):
        fitting.finetune("FirstP", dataset, encoder, train, negatives="bm25", progress=False, n_devices=8)
