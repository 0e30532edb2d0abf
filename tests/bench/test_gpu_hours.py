"""The GPU-hour estimate: its plan runs the rows the notebooks run, its prices come from the measurement
file as stated, a fit shared with an earlier notebook costs nothing there, and the README quotes it."""

import json

import pytest

from longdoc.bench import gpu_hours
from longdoc.bench.gpu_hours import (
    TRAINING_NOTEBOOKS,
    Planner,
    Scale,
    estimate,
    load_prices,
    notebook_plan,
    price_of,
    readme_block,
)
from longdoc.data.registry import REPO_ROOT

CPU_RESULTS = REPO_ROOT / "results" / "cpu"


def recorded_rows(notebook: str) -> tuple[dict[str, list], bool] | None:
    """The rows and seeds of the notebook's committed cpu record, and whether this checkout's code made it
    (None: no record yet)."""
    from longdoc.experiments.cache import code_fingerprint

    found = list(CPU_RESULTS.glob(f"*/{notebook}/metrics.json"))
    if not found:  # a notebook the cpu study has not run yet
        return None
    (path,) = found
    record = json.loads(path.read_text())
    rows = {name: row["seeds"] for name, row in record["metrics"]["systems"].items()}
    return rows, record.get("code_fingerprint") == code_fingerprint()


@pytest.mark.parametrize("notebook", TRAINING_NOTEBOOKS)
def test_the_plan_runs_the_rows_and_seeds_each_notebook_recorded_under_cpu(notebook):
    """A record made by this code ran what the plan prices; a stale one (the report marks it) may differ."""
    found = recorded_rows(notebook)
    if found is None:
        pytest.skip(f"no committed cpu record of {notebook} yet")
    recorded, current = found
    planned = notebook_plan("cpu", notebook).rows
    differs = set(planned) != set(recorded) or any(
        seeds != [None] and seeds != recorded[name] for name, seeds in planned.items()
    )
    if differs and not current:
        pytest.skip(f"the committed record of {notebook} is stale: made by other code than this checkout's")
    assert set(planned) == set(recorded), notebook
    for name, seeds in planned.items():
        if seeds != [None]:  # a trained row: the seeds the notebook ran it with
            assert seeds == recorded[name], (notebook, name)


def measurement_file(tmp_path, rows, hidden=768):
    shape = {
        "hidden": hidden,
        "block": 512,
        "blocks": 4,
        "batch": 6,
        "pair_batch": 32,
        "pretrain_batch": 3,
        "pretrain_blocks": 8,
        "nci_batch": 16,
        "matchbert_length": 512,
        "sentence_block": 32,
        "sentence_blocks": 48,
    }
    path = tmp_path / "training.json"
    path.write_text(json.dumps({"runs": [{"header": {"shape": shape}, "rows": rows}]}))
    return path


def test_prices_are_seconds_per_item_at_the_measured_tokens_with_stand_ins_said(tmp_path):
    path = measurement_file(
        tmp_path,
        [
            {"job": "retrieval:MaxP", "seconds_per_step": 0.6, "batch": 6},
            {"job": "retrieval:FirstP", "seconds_per_step": 0.3, "batch": 6},
            {"job": "encode:MaxP", "documents_per_second": 500.0},
            {"job": "matching:SMITH", "seconds_per_step": 3.2, "batch": 32},
            {"job": "pretrain:Longtriever", "oom": True},
        ],
    )
    prices = load_prices(path)
    assert "pretrain:Longtriever" not in prices  # out of memory: no price
    maxp = prices["retrieval:MaxP"]
    assert maxp.seconds == pytest.approx(0.1) and maxp.tokens == 2048
    assert maxp.per_item(1024) == pytest.approx(0.05)  # linear in tokens per document
    assert prices["retrieval:FirstP"].tokens == 512
    assert prices["encode:MaxP"].seconds == pytest.approx(1 / 500)
    parade = price_of("retrieval:PARADE", prices)
    assert parade.seconds == maxp.seconds and "stand-in" in parade.measured
    smith = price_of("encode:SMITH", prices)  # not measured: one document's forward pass of a pair's step
    assert smith.seconds == pytest.approx(0.1 / 6) and smith.tokens == 32 * 48
    assert price_of("encode:Unknown", prices) is None
    with pytest.raises(ValueError, match="no measured job"):
        load_prices(measurement_file(tmp_path, [], hidden=384))


def test_a_trained_row_costs_its_grid_on_the_first_seed_and_each_other_seed_once():
    from longdoc.experiments.families.retrieval import RETRIEVAL
    from longdoc.experiments.papers import sedr
    from longdoc.experiments.profiles import parameters_for
    from longdoc.experiments.study import Study

    values = parameters_for(gpu_hours.profile_path("smoke"), gpu_hours.NOTEBOOKS / "20_sedr_main.ipynb")
    values |= {"seeds": [0, 1, 2], "learning_rates": [1e-5, 2e-5, 3e-5]}
    study = Study("20_sedr_main", values, RETRIEVAL, progress=False)
    rows = {s.name: s for s in sedr.main_systems(study)}
    names = sedr.names(study)
    scale = Scale("test", documents=1000, pretrain_documents=1000, source="test")

    alone = Planner(study, scale)
    alone.run(rows[names["star"]])
    fits = [key for key in alone.plan.works if key[0] == "fit"]
    assert len(fits) == 3 + 3 - 1  # the grid with seed 0, then seeds 1 and 2 at the chosen rate
    warm = Planner(study, scale)
    warm.run(rows[names["maxp"]])  # continues from FirstP: FirstP's grid and seeds are its cost too
    assert len([key for key in warm.plan.works if key[0] == "fit"]) == 2 * (3 + 3 - 1)
    (work,) = [w for w in alone.plan.works[fits[0]] if w.what == "dev evaluation"]
    assert work.items == values["dev_evals"] * 1000  # every dev evaluation encodes the corpus


def test_a_fit_an_earlier_notebook_trained_costs_nothing_later():
    frame = estimate("paper", ("01_baselines", "10_longtriever_main")).set_index("notebook")
    first, later = frame.loc["01_baselines"], frame.loc["10_longtriever_main"]
    assert first["GPU-hours"] == pytest.approx(first["alone"])
    assert later["new fits"] < later["fits"] and later["GPU-hours"] < later["alone"]


def test_the_readme_quotes_the_estimate():
    readme = (REPO_ROOT / "README.md").read_text()
    estimated = estimate(gpus=gpu_hours.RECIPE_GPUS)
    assert readme_block(estimated) in readme, "python -m longdoc.bench.gpu_hours --readme rewrites it"


def test_a_candidate_dev_evaluation_costs_the_candidates_per_evaluation_and_the_corpus_once():
    from longdoc.experiments.families.retrieval import RETRIEVAL, Dense
    from longdoc.experiments.profiles import parameters_for
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.experiments.study import Study
    from longdoc.experiments.systems import System

    values = parameters_for(gpu_hours.profile_path("smoke"), gpu_hours.NOTEBOOKS / "10_longtriever_main.ipynb")
    scale = Scale("test", documents=10_000, pretrain_documents=0, source="test", dev_queries=20)
    costs = {}
    for k in (0, 9):
        study = Study("10_longtriever_main", values | {"dev_candidates": k, "seeds": [0]}, RETRIEVAL, progress=False)
        planner = Planner(study, scale)
        planner.run(System("FirstP", Dense("FirstP", study.settings(EncoderSettings).encoder("FirstP"))))
        costs[k] = sum(
            w.items for works in planner.plan.works.values() for w in works if w.what == "dev evaluation"
        ) / len(values["learning_rates"])
    assert costs[0] == values["dev_evals"] * 10_000
    assert costs[9] == values["dev_evals"] * 20 * (9 + 1) + 10_000


def test_a_price_comes_from_the_measured_shape_nearest_the_row(tmp_path):
    path = tmp_path / "training.json"
    shape = {
        "hidden": 384,
        "blocks": 4,
        "batch": 64,
        "pair_batch": 64,
        "pretrain_batch": 32,
        "pretrain_blocks": 4,
        "nci_batch": 128,
        "matchbert_length": 128,
        "sentence_block": 32,
        "sentence_blocks": 48,
    }
    runs = [
        {"header": {"shape": shape | {"block": 128}}, "rows": [{"job": "retrieval:MaxP", "seconds_per_step": 0.064}]},
        {"header": {"shape": shape | {"block": 256}}, "rows": [{"job": "retrieval:MaxP", "seconds_per_step": 0.096}]},
    ]
    path.write_text(json.dumps({"runs": runs}))
    maxp = load_prices(path, hidden=384)["retrieval:MaxP"]
    assert maxp.per_item(512) == pytest.approx(0.001)  # 4 x 128: its own measurement
    assert maxp.per_item(1024) == pytest.approx(0.0015)  # 4 x 256: the other one, not 2 x the first
    assert maxp.per_item(256) == pytest.approx(0.0005)  # below both: linear from the nearest


def test_the_gpu_profile_fits_one_gpu_hour_and_runs_in_pieces_of_under_ten_minutes():
    """Priced at its ceilings (an upper bound: early stopping only shortens a run) from the H100 step
    times at MiniLM's width on the embedded benchmark; the ladder's rungs above 1x included."""
    frame = estimate("gpu", gpu_hours.ESTIMATED_NOTEBOOKS, scale="benchmark", hidden=gpu_hours.MINILM_HIDDEN)
    assert frame["GPU-hours"].sum() * 60 < 60
    assert (frame["alone"] * 60 < 10).all(), frame.loc[frame["alone"] * 60 >= 10, ["notebook", "alone"]]
    nci = frame.set_index("notebook").loc["41_nci_ablation"]
    assert "decode:nci" in nci["not priced"]  # no CPU ratio at MiniLM's width: said, never guessed


def test_the_ladder_costs_only_its_rungs_above_1x():
    from longdoc.experiments.profiles import parameters_for

    params = parameters_for(gpu_hours.profile_path("cpu"), gpu_hours.NOTEBOOKS / "90_budget_ladder.ipynb")
    assert not gpu_hours.ladder_plan(
        params | {"ladder_sedr": [1], "ladder_longtriever": [1], "ladder_smith": [1], "ladder_nci": [1]}, "benchmark"
    ).works
    rung = gpu_hours.ladder_plan(
        params | {"ladder_sedr": [1, 2], "ladder_longtriever": [1], "ladder_smith": [1], "ladder_nci": [1]}, "benchmark"
    )
    budgets = {key[2] for key in rung.works if key[0] == "fit"}
    assert rung.works and all(f"train_steps={2 * params['train_steps']}" in budget for budget in budgets)


def test_each_spec_states_its_own_fit_plan_and_one_without_a_plan_is_named():
    """The planner prices what a row's spec says its fits are: a new registry model in a Dense row needs
    no edit here (its job is its model's name; unmeasured, it is listed as not priced), and a new Spec
    kind without a fit plan is refused by name."""
    from dataclasses import dataclass

    from longdoc.experiments.families.retrieval import RETRIEVAL, Dense
    from longdoc.experiments.profiles import parameters_for
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.experiments.study import Study
    from longdoc.experiments.systems import Spec, System

    values = parameters_for(gpu_hours.profile_path("smoke"), gpu_hours.NOTEBOOKS / "10_longtriever_main.ipynb")
    study = Study("10_longtriever_main", values | {"seeds": [0]}, RETRIEVAL, progress=False)
    scale = Scale("test", documents=100, pretrain_documents=0, source="test")
    planner = Planner(study, scale)
    encoder = study.settings(EncoderSettings).encoder("MaxP")
    planner.run(System("a new model", Dense("NewModel", encoder)))
    jobs = {w.job for works in planner.plan.works.values() for w in works if not w.job.startswith("cpu:")}
    assert jobs == {"retrieval:NewModel", "encode:NewModel"}  # beside the CPU stages every row has
    unpriced: set[str] = set()
    gpu_hours.priced([w for ws in planner.plan.works.values() for w in ws if w.job in jobs], {}, unpriced)
    assert unpriced == jobs

    @dataclass(frozen=True)
    class Unruled(Spec):
        family = RETRIEVAL

    with pytest.raises(TypeError, match="Unruled: no fit plan"):
        Planner(study, scale).run(System("x", Unruled()))


def test_the_study_executes_the_plan_the_planner_prices():
    """One plan, two readers: a spec's ``fits`` lists its fits once; the study runs them in order and keeps
    the last (a fit whose ``run`` is None is fitted within a later one), the planner records the same keys
    and works and runs nothing; another row's fit it needs (a warm start) comes first in both."""
    from dataclasses import dataclass

    from longdoc.experiments.families.retrieval import RETRIEVAL
    from longdoc.experiments.profiles import parameters_for
    from longdoc.experiments.study import Study
    from longdoc.experiments.systems import Spec, System

    ran: list[tuple] = []

    @dataclass(frozen=True)
    class Staged(Spec):
        label: str
        after: System | None = None
        family = RETRIEVAL

        def fits(self, plan, learning_rate, seed):
            if self.after is not None:
                plan.needs(self.after, seed)
            for stage in ("first", "second", "third"):
                key = (self.label, stage, learning_rate, seed)
                run = None if stage == "second" else (lambda study, key=key: ran.append(key) or f"fit {key}")
                plan.fit(key, [plan.work(stage, f"retrieval:{self.label}", 10)], run)

    values = parameters_for(gpu_hours.profile_path("smoke"), gpu_hours.NOTEBOOKS / "10_longtriever_main.ipynb")
    study = Study("10_longtriever_main", values | {"seeds": [0], "learning_rates": [1e-3]}, RETRIEVAL, progress=False)
    warm = System("warm", Staged("warm"))
    row = System("row", Staged("row", after=warm))
    planner = Planner(study, Scale("test", documents=100, pretrain_documents=0, source="test"))
    planner.run(row, [0])
    assert ran == []  # the planner runs nothing
    priced_keys = list(planner.plan.works)
    assert [w.what for w in planner.plan.works[priced_keys[-1]]] == ["third"]

    study.selection = lambda system: {"learning_rate": 1e-3}  # the choice is not what is tested here
    assert row.spec.fit(study, 1e-3, 0) == f"fit {('row', 'third', 1e-3, 0)}"
    assert ran == [key for key in priced_keys if key[1] != "second"]  # the same fits, in the same order


def test_a_warm_start_that_is_not_a_fine_tuned_dense_row_is_refused_before_any_fit():
    from longdoc.experiments.families.retrieval import BM25, RETRIEVAL, Dense
    from longdoc.experiments.profiles import parameters_for
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.experiments.study import Study
    from longdoc.experiments.systems import System

    values = parameters_for(gpu_hours.profile_path("smoke"), gpu_hours.NOTEBOOKS / "20_sedr_main.ipynb")
    study = Study("20_sedr_main", values | {"seeds": [0]}, RETRIEVAL, progress=False)
    row = System(
        "SeDR from BM25",
        Dense("SeDR", study.settings(EncoderSettings).encoder("SeDR"), warm_start=System("BM25", BM25())),
    )
    planner = Planner(study, Scale("test", documents=100, pretrain_documents=0, source="test"))
    with pytest.raises(ValueError, match="warm start 'BM25' is not a fine-tuned dense system"):
        planner.run(row)
    assert not planner.plan.works
    with pytest.raises(ValueError, match="warm start 'BM25' is not a fine-tuned dense system"):
        row.spec.fit(study, 1e-3, 0)  # refused before the study reads any data


def test_a_backbone_is_priced_at_the_nearest_measured_width_not_below_its_own():
    assert gpu_hours.priced_width("minilm") == 384
    assert gpu_hours.priced_width("manpages-mlm") == 384  # 256 wide: MiniLM's prices bound it
    assert gpu_hours.priced_width("manpages-mlm-base") == 768
    assert gpu_hours.priced_width("bert-base-uncased") == 768


def test_a_budget_in_epochs_is_priced_at_its_passes_over_the_papers_training_examples():
    """``paper`` gives fine-tuning in passes (``train_steps: 0``, ``train_epochs``): each fine-tuning fit of
    01 is priced at passes x the steps of one pass over MS MARCO's 363,343 training queries, counted as the
    trainer counts them on 8 processes; NCI's cap at its passes over each row's own examples."""
    from longdoc.train.steps import epoch_steps

    params = gpu_hours.parameters_for(gpu_hours.profile_path("paper"), gpu_hours.NOTEBOOKS / "01_baselines.ipynb")
    params |= {"backbone": "minilm", "n_devices": 8}
    assert params["train_steps"] == 0 and params["train_epochs"] == 10
    plan = notebook_plan("paper", "01_baselines", params=params)
    tuned = [w.items for works in plan.works.values() for w in works if w.what == "fine-tuning"]
    steps = 10 * epoch_steps(363_343, 48, world=8)
    assert tuned and set(tuned) == {steps * 48}
    nci = gpu_hours.parameters_for(gpu_hours.profile_path("paper"), gpu_hours.NOTEBOOKS / "41_nci_ablation.ipynb")
    nci |= {"backbone": "minilm", "qg_generator": ""}
    items = sorted(
        {
            w.items
            for works in notebook_plan("paper", "41_nci_ablation", params=nci).works.values()
            for w in works
            if w.job == "nci"
        }
    )
    assert len(items) > 1  # a row without generated queries or documents as queries has fewer examples a pass


def test_the_stages_around_the_fits_are_priced_where_the_study_runs_them():
    """Tokenising once per corpus and block shape, BM25's index once per corpus, a notebook's dev-candidate
    searches once in that notebook, and BM25 negatives searched by every fit that mines them."""
    from longdoc.experiments.families.retrieval import RETRIEVAL, Dense, Protocol
    from longdoc.experiments.families.retrieval.specs import BM25
    from longdoc.experiments.profiles import parameters_for
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.experiments.study import Study
    from longdoc.experiments.systems import System

    values = parameters_for(gpu_hours.profile_path("smoke"), gpu_hours.NOTEBOOKS / "10_longtriever_main.ipynb")
    study = Study("10_longtriever_main", values | {"dev_candidates": 9, "seeds": [0, 1]}, RETRIEVAL, progress=False)
    scale = Scale("test", 1000, 1000, "test", dev_queries=20, train_examples=300, test_queries=50)
    planner = Planner(study, scale)
    encoder = study.settings(EncoderSettings).encoder("FirstP")
    mined = Protocol("BM25 negatives", negatives="bm25", hard_negatives=1)
    planner.run(System("FirstP", Dense("FirstP", encoder, protocol=mined)))
    planner.run(System("MaxP", Dense("MaxP", study.settings(EncoderSettings).encoder("MaxP"))))
    planner.run(System("BM25", BM25()))
    works = planner.plan.works
    tokens = [key for key in works if key[0] == "tokens"]
    assert len(tokens) == 2 and all(works[k] == [gpu_hours.Work("tokenising", "cpu:tokenize", 1000)] for k in tokens)
    assert works[("bm25", "test")] == [gpu_hours.Work("BM25", "cpu:bm25-index", 1000)]
    searches = {key[2]: w.items for key, ws in works.items() if key[0] == "bm25 search" for w in ws}
    assert searches == {"dev candidates": 20 * 1000, "BM25 row": (20 + 50) * 1000}
    fits = [key for key in works if key[0] == "fit" and "FirstP" in key[1]]
    assert fits and all(gpu_hours.Work("BM25", "cpu:bm25-search", 300 * 1000) in works[key] for key in fits)
    assert not any(
        w.job == "cpu:bm25-search" for key in works if key[0] == "fit" and "MaxP" in key[1] for w in works[key]
    )


def test_nci_decodes_in_every_fit_and_generates_its_queries_once():
    """Each NCI fit's dev evaluations decode the dev queries at the dev beam in every process, as many times
    as the trainer evaluates; after the fit one process decodes the dev-best model's dev and test queries
    at the reported beam; a row decoding the same fit its own way pays its own decoding; the generated
    queries and the identifiers' embeddings are one job each for every row that reads them."""
    from longdoc.train.steps import evaluation_steps

    nci = gpu_hours.parameters_for(gpu_hours.profile_path("paper"), gpu_hours.NOTEBOOKS / "41_nci_ablation.ipynb")
    nci |= {"backbone": "minilm"}
    plan = notebook_plan("paper", "41_nci_ablation", params=nci)
    dev, test = gpu_hours.PAPER_SCALE["nci"].dev_queries, gpu_hours.PAPER_SCALE["nci"].test_queries
    fits = [key for key in plan.works if key[0] == "fit"]
    for key in fits:
        (decoded,) = [w for w in plan.works[key] if w.what == "decoding"]
        steps = next(w for w in plan.works[key] if w.what == "fine-tuning").items  # examples, two views each
        assert decoded.spread == "every process" and decoded.tokens == nci["nci_dev_beam"]
        assert decoded.items % dev == 0 and decoded.items // dev >= nci["nci_dev_evals"] and steps
    for beam, steps in ((100, 100), (100, 101)):  # 20 evaluations a fit, or 21 with a step left over
        planner = gpu_hours.Planner(type("S", (), {"notebook": "x"})(), gpu_hours.PAPER_SCALE["nci"])
        (inside,), _ = planner.decoding(steps, 20, 10, beam)
        assert inside.items == len(evaluation_steps(steps // 20, 0, steps)) * dev
    assert len(evaluation_steps(101 // 20, 0, 101)) == 21
    after = [key for key in plan.works if key[0] == "decoding"]
    assert len({key[1] for key in after}) == len(fits)  # every fit decoded after it
    assert len(after) > len(fits), "the unconstrained row decodes the full system's fit again"
    for key in after:
        (work,) = plan.works[key]
        assert (work.items, work.spread) == (dev + test, "one process")
    generated = [key for key in plan.works if key[0] == "generation"]
    assert len(generated) == 1 and plan.works[generated[0]][0].job == "generate:docT5query"
    assert plan.works[generated[0]][0].spread == "one process"
    (embeddings,) = [key for key in plan.works if key[0] == "identifier embeddings"]
    assert plan.works[embeddings][0].job == "encode:FirstP" and plan.works[embeddings][0].tokens == 512
    assert any("k-means" in what for what in plan.unpriced)


def test_an_unmeasured_gpu_job_is_priced_by_its_cpu_ratio_to_a_measured_one(tmp_path):
    gpu = measurement_file(tmp_path, [{"job": "nci", "seconds_per_step": 0.16, "batch": 16}])  # 10 ms an example
    cpu_dir = tmp_path / "cpu"
    cpu_dir.mkdir()
    cpu = measurement_file(
        cpu_dir,
        [
            {"job": "nci", "seconds_per_step": 3.2, "batch": 16},  # 200 ms an example
            {"job": "decode:nci", "queries_per_second": 2.0},  # 500 ms a query at 100 beams
        ],
    )
    prices = gpu_hours.load_prices(gpu)
    derived = gpu_hours.derived_prices(prices, cpu)
    decode = derived["decode:nci"]
    assert decode.per_item(100) == pytest.approx(0.010 * 0.5 / 0.2)  # the H100 example x the CPU ratio
    assert decode.per_item(10) == pytest.approx(decode.per_item(100) / 10)  # linear in beams
    assert "derived" in decode.measured and "generate:docT5query" not in derived  # its reference is unmeasured
    assert gpu_hours.derived_prices(prices | {"decode:nci": decode}, cpu) == {}  # a measured one is kept


def test_the_cpu_stages_are_core_seconds_of_the_largest_measured_corpus(tmp_path):
    def row(documents, seconds):
        return {
            "documents": documents,
            "tokenize": {"seconds": seconds, "cores": 1},
            "bm25": {
                "index_seconds": seconds / 2,
                "search_seconds": 4.0,
                "queries": 1000,
                "cores": 2,
                "search_threads": 1,
            },
        }

    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({"rows": [row(10, 99.0), row(1000, 20.0)]}))
    prices = gpu_hours.cpu_prices(path)
    assert prices["cpu:tokenize"].seconds == pytest.approx(0.02)
    assert prices["cpu:bm25-index"].seconds == pytest.approx(10.0 * 2 / 1000)  # on both cores
    assert prices["cpu:bm25-search"].seconds == pytest.approx(4.0 / (1000 * 1000))  # per query and document


def test_a_notebook_pays_its_dev_candidate_searches_and_in_memory_tokens_only_where_it_builds_a_fit():
    """Dev-candidate searches run where a notebook builds a fit that reads them (a notebook whose fits an
    earlier one built makes none); an in-memory corpus (below 1 GiB) is tokenised again by every notebook
    that loads it, a stored one once; a zero-shot row tokenises too; a ready generator trains nothing."""
    from dataclasses import replace

    from longdoc.experiments.families.generative import QueryGenerationConfig
    from longdoc.experiments.families.retrieval import RETRIEVAL, Dense
    from longdoc.experiments.profiles import parameters_for
    from longdoc.experiments.settings import EncoderSettings
    from longdoc.experiments.study import Study
    from longdoc.experiments.systems import System

    values = parameters_for(gpu_hours.profile_path("smoke"), gpu_hours.NOTEBOOKS / "10_longtriever_main.ipynb")
    values |= {"dev_candidates": 9, "seeds": [0]}
    in_memory = Scale("small", 1000, 1000, "test", dev_queries=20, train_examples=300, test_queries=50)
    plans = []
    for notebook in ("20_sedr_main", "23_sedr_variants"):
        study = Study(notebook, values, RETRIEVAL, progress=False)
        planner = Planner(study, in_memory)
        encoder = study.settings(EncoderSettings).encoder("FirstP")
        planner.run(System("FirstP", Dense("FirstP", encoder)))
        planner.run(System("zero-shot", Dense("FirstP", encoder, protocol=None)))
        plans.append(planner.plan)
    first, later = plans
    (tokens,) = [key for key in later.works if key[0] == "tokens"]
    assert gpu_hours.built(later, tokens, set()), "a notebook that builds a fit tokenises its in-memory corpus"
    assert not gpu_hours.built(later, tokens, set(later.fitted)), "one whose fits are all cached does not"
    candidates = [key for key in later.works if key[:3] == ("bm25 search", "23_sedr_variants", "dev candidates")]
    assert candidates and gpu_hours.built(later, candidates[0], set()), "built alone, it searches"
    assert not gpu_hours.built(later, candidates[0], set(first.works)), "its fit came from 20: no search"
    stored = Planner(Study("20_sedr_main", values, RETRIEVAL, progress=False), replace(in_memory, stored=True))
    stored.tokenise(encoder)
    keys = [key for key in stored.plan.works if key[0] == "tokens"]
    assert len(keys) == 1 and keys[0][1] == "small"  # one store for every notebook
    zero_shot = Planner(Study("20_sedr_main", values, RETRIEVAL, progress=False), in_memory)
    zero_shot.run(System("zero-shot", Dense("FirstP", encoder, protocol=None)))
    assert [key[0] for key in zero_shot.plan.works] == ["tokens", "zero-shot"]
    study = Study("40_nci_main", values, RETRIEVAL, progress=False)
    planner = Planner(study, in_memory)
    planner.generation(QueryGenerationConfig(train_steps=10, batch_size=4, generator="/a/ready/one"))
    planner.generation(QueryGenerationConfig(train_steps=10, batch_size=4))
    jobs = [w.job for key, works in planner.plan.works.items() if key[0] == "generation" for w in works]
    assert sorted(jobs) == ["generate:docT5query", "generate:docT5query", "train:doc2query"]
