import numpy as np
import pytest

from longdoc.data.beir import load_beir
from longdoc.experiments.families.generative import (
    IdentifierSpec,
    NciSpec,
    QuerySpec,
    decode_nci,
    ensemble_run,
    expanded_corpus,
    finetune_nci,
    nci_identifiers,
    training_examples,
    usable_generated_queries,
)
from longdoc.experiments.families.retrieval import exact_cosine_run
from longdoc.index.nci_retriever import DecodingConfig
from longdoc.models.doc2query import QueryGenerationConfig
from longdoc.train.nci import NciTrainConfig


def test_training_examples_by_kind(tiny_dataset):
    data = load_beir(tiny_dataset)
    generated = {d: [f"generated for {d}"] for d in data.doc_ids[:5]}
    spec = QuerySpec(terms=8, windows=2)
    number = {d: i for i, d in enumerate(data.doc_ids)}
    labelled = training_examples(data, QuerySpec(document_as_query=False, generated=False), None)
    assert sorted(labelled) == sorted(
        (data.queries[q], number[d]) for q, judged in data.qrels["train"].items() for d in judged
    )
    assert len(labelled) == 12  # the train split only: dev and test queries are never training examples
    as_query = training_examples(data, QuerySpec(train_queries=False, generated=False, terms=8, windows=2), None)
    assert len(as_query) == 3 * len(data.doc_ids)
    everything = training_examples(data, spec, generated)
    assert len(everything) == 12 + 3 * len(data.doc_ids) + 5
    with pytest.raises(ValueError, match="generated"):
        training_examples(data, spec, None)
    with pytest.raises(ValueError, match="at least one"):
        QuerySpec(train_queries=False, document_as_query=False, generated=False)


def test_generated_queries_train_nci_only_where_bm25_finds_their_documents_half_as_well_as_labelled_ones(tiny_dataset):
    """Queries copied from their documents pass the floor and are used; noise fails it and the model
    trains on its other queries, with the measurement and the decision kept; a spec of generated queries
    alone keeps them and says they fail."""
    data = load_beir(tiny_dataset)
    good = {d: [" ".join(t.split()[:6])] for d, t in zip(data.doc_ids, data.texts)}
    noise = {d: ["zzqx wvvy"] for d in data.doc_ids}
    spec = QuerySpec(terms=8, windows=2)
    used, queries, decision = usable_generated_queries(data, spec, good)
    assert used is spec and queries is good and decision["used"] and decision["passes"]
    assert decision["generated"] >= 0.5 * decision["labelled"] and decision["floor"] == 0.5
    dropped, queries, decision = usable_generated_queries(data, spec, noise)
    assert not dropped.generated and queries is None and not decision["used"] and decision["generated"] == 0.0
    assert len(training_examples(data, dropped, queries)) == 12 + 3 * len(data.doc_ids)
    alone = QuerySpec(train_queries=False, document_as_query=False)
    kept, queries, decision = usable_generated_queries(data, alone, noise)
    assert kept is alone and decision["used"] and not decision["passes"]
    assert usable_generated_queries(data, QuerySpec(generated=False), None)[2] is None


def test_expanded_corpus_appends_the_generated_queries(tiny_dataset):
    data = load_beir(tiny_dataset)
    texts = expanded_corpus(data, {data.doc_ids[0]: ["alpha beta", "gamma"]})
    assert texts[0] == data.texts[0] + " alpha beta gamma" and texts[1] == data.texts[1] + " "


def test_ensemble_vote_follows_the_released_weights():
    runs = [{"q": {"a": 3.0, "b": 2.0, "c": 1.0}}, {"q": {"b": 9.0, "a": 1.0}}]
    merged = ensemble_run(runs)["q"]
    assert merged["a"] == pytest.approx(1 + 1 / 1.2) and merged["b"] == pytest.approx(1 / 1.2 + 1)
    assert merged["c"] == pytest.approx(1 / 1.4) and list(merged)[-1] == "c"


def test_brute_force_is_exact_cosine():
    rng = np.random.default_rng(0)
    queries, docs = rng.normal(size=(3, 5)), rng.normal(size=(7, 5))
    run = exact_cosine_run(queries, docs, [f"d{i}" for i in range(7)], ["a", "b", "c"], k=4)
    unit = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    for row, qid in enumerate("abc"):
        cosine = unit @ (queries[row] / np.linalg.norm(queries[row]))
        expected = [f"d{i}" for i in np.argsort(-cosine)[:4]]
        assert list(run[qid]) == expected
        assert list(run[qid].values()) == pytest.approx(sorted(cosine, reverse=True)[:4], abs=1e-5)


def tiny_nci_spec() -> NciSpec:
    """An NCI small enough to train in seconds on the tiny dataset (generated queries included)."""
    return NciSpec(
        decoder_layers=1,
        adaptor_layers=1,
        adaptor_rank=2,
        query_length=16,
        identifiers=IdentifierSpec(k=3, c=4, embedding_length=32),
        queries=QuerySpec(
            terms=8,
            windows=1,
            generation=QueryGenerationConfig(
                queries_per_document=2, input_length=16, max_query_length=6, train_steps=2, batch_size=4
            ),
        ),
    )


def test_an_nci_run_trains_decodes_and_caches(tiny_dataset, tiny_backbone, isolated_outputs):
    data = load_beir(tiny_dataset)
    spec = tiny_nci_spec()
    train = NciTrainConfig(steps=6, batch_size=4, eval_every=3)
    fit = finetune_nci(data, spec, train, DecodingConfig(beam_size=3), tiny_backbone, "cls", progress=False)
    assert sorted(int(s) for s in fit.history["curve"]) == [3, 6] and fit.history["examples"] > 24 * 2
    identifiers = nci_identifiers(fit)
    assert len(identifiers) == len(data.doc_ids) and len(set(identifiers)) == len(data.doc_ids)
    runs, timing = decode_nci(fit, data, DecodingConfig(beam_size=4))
    assert set(runs) == {"dev", "test"} and all(
        1 <= len(hits) <= 4 and set(hits) <= set(data.doc_ids) for hits in runs["test"].values()
    )
    again = finetune_nci(data, spec, train, DecodingConfig(beam_size=3), tiny_backbone, "cls", progress=False)
    assert again.directory == fit.directory  # cached
    loose, _ = decode_nci(fit, data, DecodingConfig(beam_size=4, constrained=False))
    assert set(loose["test"]) == set(runs["test"])
    from longdoc.experiments.cache import CACHE_DIR  # noqa: F401  (patched by isolated_outputs)

    decodes = sorted(p.name for p in (isolated_outputs / "cache" / "nci_decode").iterdir())
    assert len(decodes) == 2  # the unconstrained decoding is its own run, not the constrained one again


def test_exact_search_reuses_the_dense_fits_and_leaves_their_training_summary_to_that_row(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    from longdoc.experiments.families.retrieval import Dense, ExactSearch
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.experiments.systems import System

    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0], learning_rates=[1e-3])
    firstp = Dense("FirstP", study.settings(EncoderSettings).encoder("FirstP"))
    dense, exact = study.run_all([System("FirstP", firstp), System("FirstP exact", ExactSearch(firstp))])
    assert exact.fits[0].directory == dense.fits[0].directory and exact.training == [] and dense.training
    assert study.choices().loc["FirstP exact", "dev-best step per seed"] == ""
    assert set(exact.test_runs[0]) == set(dense.test_runs[0])  # the same queries, searched by exact cosine


def test_exact_search_encodes_the_corpus_again_where_the_fit_kept_no_vectors(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    """At NQ320k and 768 dimensions the dev-best vectors (321 MiB) exceed what a fit keeps: the dev-best
    model encodes the corpus again and gives the run the kept vectors give."""
    from longdoc.experiments.families.retrieval import Dense, ExactSearch
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.experiments.systems import System

    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0], learning_rates=[1e-3])
    firstp = Dense("FirstP", study.settings(EncoderSettings).encoder("FirstP"))
    kept = study.run(System("FirstP exact", ExactSearch(firstp)))
    (kept.fits[0].directory / "index.npz").unlink()  # as a fit over INDEX_LIMIT_BYTES leaves it
    again = ExactSearch(firstp).outcome(study, kept.fits[0])
    for split, run in kept.outcomes[0].runs.items():
        for query, ranking in run.items():
            assert list(again.runs[split][query]) == list(ranking)
            assert np.allclose(list(again.runs[split][query].values()), list(ranking.values()), atol=1e-5)


def test_one_ensemble_per_seed_from_the_members_fitted_with_that_seed():
    """The ensemble's seed s votes the runs of every member fitted with seed s; a member outside the
    table runs the study's seeds, and a member that lacks a seed is an error naming it."""
    from types import SimpleNamespace

    from longdoc.experiments.families.generative import Ensemble
    from longdoc.experiments.systems import System

    def runs(tag, seed):
        return SimpleNamespace(runs={s: {"q": {f"{tag}{seed}": 1.0, "shared": 0.5}} for s in ("dev", "test")})

    class Study:
        def __init__(self):
            self.results = {"NCI": SimpleNamespace(seeds=[0, 1], outcomes=[runs("a", 0), runs("a", 1)])}
            self.ran = []

        def run(self, system, seeds):
            self.ran.append((system.name, seeds))
            return SimpleNamespace(seeds=list(seeds), outcomes=[runs("b", s) for s in seeds])

    members = (System("NCI", None), System("NCI (k-means seed 1)", None))
    study = Study()
    seeds, outcomes = Ensemble(members).evaluate(study, [0, 1])
    assert seeds == [0, 1] and study.ran == [("NCI (k-means seed 1)", [0, 1])]
    for seed, outcome in zip(seeds, outcomes):
        expected = ensemble_run([{"q": {f"a{seed}": 1.0, "shared": 0.5}}, {"q": {f"b{seed}": 1.0, "shared": 0.5}}])
        assert outcome.runs["test"] == expected and set(outcome.runs["test"]["q"]) == {f"a{seed}", f"b{seed}", "shared"}
    with pytest.raises(ValueError, match=r"ensemble seed 2: members \['NCI'\]"):
        Ensemble(members).evaluate(Study(), [2])


@pytest.mark.slow
def test_nci_and_its_query_generator_train_in_two_processes_launched_from_the_kernel(
    tiny_dataset, tiny_backbone, isolated_outputs
):
    """n_devices=2: the generator's fine-tuning and NCI's training each run under torchrun (two gloo
    processes, half of each step's pairs or queries each; equal to one process with plain SGD:
    tests/train/test_multiprocess_equivalence.py); generation, identifiers and examples are made in the
    kernel; the first process writes into the cache under keys of their own."""
    import json

    from longdoc.data.registry import load_dataset

    data = load_dataset(str(tiny_dataset))  # a dataset the processes can load again
    spec = tiny_nci_spec()
    train = NciTrainConfig(steps=4, batch_size=4, eval_every=2)
    fit = finetune_nci(
        data, spec, train, DecodingConfig(beam_size=3), tiny_backbone, "cls", progress=False, n_devices=2
    )
    assert sorted(int(s) for s in fit.history["curve"]) == [2, 4] and fit.history["examples"] > 24 * 2
    assert json.loads((fit.directory / "key.json").read_text())["processes"] == 2
    assert len(nci_identifiers(fit)) == len(data.doc_ids)
    assert fit.history["iterations"][0]["config"]["batch_size"] == 2  # per process
    [queries] = (isolated_outputs / "cache" / "nci_queries").glob("*/history.json")
    generation = json.loads(queries.read_text())
    assert len(generation["training"]["history"]) == 2 and generation["queries"] > 0
    assert json.loads((queries.parent / "key.json").read_text())["processes"] == 2
    assert not list((isolated_outputs / "cache").glob("*/*.resume"))
    with pytest.raises(ValueError, match="nci_batch_size=4: not divisible by n_devices=3"):
        finetune_nci(data, spec, train, DecodingConfig(beam_size=3), tiny_backbone, "cls", progress=False, n_devices=3)
