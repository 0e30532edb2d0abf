"""The study protocol: settings chosen on dev (never on test), seeded construction, configs by keyword."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from longdoc.experiments.backbones import backbone_path
from longdoc.experiments.families.retrieval import BM25, Dense
from longdoc.experiments.parameters import check_parameters
from longdoc.experiments.profiles import notebook_parameters, parameters_for
from longdoc.experiments.settings import SETTINGS, BudgetSettings, EncoderSettings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import System

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PROFILES = Path(__file__).parents[2] / "notebooks" / "profiles"


def test_the_learning_rate_is_chosen_on_dev_and_never_reads_test_judgements(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    def system(study):
        return System("FirstP", Dense("FirstP", study.settings(EncoderSettings).encoder("FirstP")))

    study = tiny_study(tiny_dataset, tiny_backbone)
    chosen = study.selection(system(study))
    assert chosen["seed"] == 0 and set(chosen["dev"]) == {"0.0001", "0.003"}
    assert chosen["learning_rate"] == max(study.params["learning_rates"], key=lambda lr: chosen["dev"][str(lr)])
    scrambled = shutil.copytree(tiny_dataset, isolated_outputs / "scrambled")
    lines = (scrambled / "qrels" / "test.tsv").read_text().splitlines()
    rotated = [
        f"{q}\t{other.split(chr(9))[1]}\t1"
        for q, other in zip((line.split("\t")[0] for line in lines[1:]), lines[2:] + lines[1:2])
    ]
    (scrambled / "qrels" / "test.tsv").write_text("\n".join([lines[0], *rotated]) + "\n")
    again = tiny_study(scrambled, tiny_backbone)
    assert again.data.checksum != study.data.checksum  # really another dataset (and other cache entries)
    assert again.selection(system(again)) == chosen


def test_runs_keep_one_fine_tuning_per_seed_at_the_chosen_rate(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    study = tiny_study(tiny_dataset, tiny_backbone)
    maxp = Dense("MaxP", study.settings(EncoderSettings).encoder("MaxP"))
    result = study.run(System("MaxP", maxp))
    assert result.seeds == [0, 1] and len(result.test_runs) == 2 and result.test_runs[0] != result.test_runs[1]
    assert all(t["best_step"] in (2, 4) for t in result.training)
    assert {q for run in result.test_runs for q in run} == set(study.split("test")[0])
    inherited = study.run(System("MaxP again", maxp, settings_from=result.system))
    assert (
        inherited.selection["inherited_from"] == "MaxP" and inherited.test_runs == result.test_runs
    )  # same cached runs
    table = study.table()
    assert list(table.index) == ["MaxP", "MaxP again"] and (table["seeds"] == 2).all()
    comparison = study.compare([("MaxP", "MaxP again")]).iloc[0]
    # the same runs under two names: no difference, and an interval that still holds the seed spread
    assert comparison["Δ"] == 0 and comparison["95% CI low"] < 0 < comparison["95% CI high"]
    assert comparison["difference"].startswith("no difference")


def test_the_record_holds_the_parameters_the_study_was_built_from(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0])
    study.run(System("BM25", BM25()))
    directory = study.record()
    assert directory == isolated_outputs / "results" / "test" / "tiny" / "01_baselines"
    record = json.loads((directory / "metrics.json").read_text())
    assert record["config"] == json.loads(json.dumps(study.params)) and record["seeds"] == [0]
    assert record["data_checksum"] == study.data.checksum and len(record["code_fingerprint"]) == 16
    assert (directory / "runs" / "BM25.trec").exists()


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_config_built_from_a_profile_by_keyword_equals_the_one_recorded(profile, notebook):
    values = parameters_for(PROFILES / f"{profile}.yaml", notebook)
    study = Study(notebook.stem, values, progress=False)
    assert study.params == check_parameters(values)  # what record() writes as the config
    if "block_size" in values and "max_blocks" in values:
        config = study.settings(EncoderSettings).encoder("Longtriever")
        assert (config.segment_length, config.max_segments, config.pooling, config.precision) == (
            values["block_size"],
            values["max_blocks"],
            values["pooling"],
            values["precision"],
        )
        assert study.settings(EncoderSettings).encoder("FirstP").max_segments == 1
    if "train_steps" in values:
        train = study.settings(BudgetSettings).train_config(
            learning_rate=values["learning_rates"][0], seed=values["seeds"][0]
        )
        assert (train.steps, train.batch_size, train.hard_negatives) == (values["train_steps"], values["batch_size"], 0)
        if values["train_steps"]:
            assert train.steps // train.eval_every >= values["dev_evals"]
        else:  # a budget in passes: its steps, and the evaluations spread over them, are counted at run time
            assert (train.epochs, train.eval_every, train.evaluations) == (
                values["train_epochs"],
                0,
                values["dev_evals"],
            )
    for kind in SETTINGS:  # every typed view the notebook declares the parameters of is built from them by keyword
        fields = {f.name for f in dataclasses.fields(kind)}
        if fields <= set(values):
            built = study.settings(kind)
            expected = {name: study.params[name] for name in fields}
            if "backbone" in expected:  # a backbone built here is read from its cache folder, named portably
                expected["backbone"] = backbone_path(expected["backbone"])
            assert {name: getattr(built, name) for name in fields} == expected


def test_open_takes_the_notebook_parameters_from_its_namespace():
    namespace = {**notebook_parameters(NOTEBOOKS[1]), "unrelated": 1}
    study = Study.open(NOTEBOOKS[1].stem, namespace)
    assert study.params == check_parameters(notebook_parameters(NOTEBOOKS[1]))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"batch_size": "4"}, "batch_size='4'"),
        ({"batch_size": 4.5}, "batch_size=4.5"),
        ({"block_size": 0}, "block_size=0"),
        ({"dev_evals": 1}, "dev_evals=1"),
        ({"pooling": "max"}, "pooling='max'"),
        ({"seeds": []}, "seeds"),
        ({"dev_evals": 9}, "more dev evaluations"),
    ],
)
def test_bad_parameters_are_named_before_any_work(tiny_dataset, tiny_backbone, change, message, tiny_study):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        tiny_study(tiny_dataset, tiny_backbone, **change)


def test_seeded_construction_gives_the_same_weights_whatever_ran_before(
    tiny_dataset, tiny_backbone, isolated_outputs, monkeypatch, tiny_study
):
    """Pre-train and fine-tune a tiny Longtriever and a tiny PARADE twice, after different amounts of
    unrelated random work and with an empty cache each time: the weights are equal."""
    from longdoc.experiments import cache
    from longdoc.experiments.papers.longtriever import pretrain_config
    from longdoc.models.registry import build_encoder

    weights = []
    for attempt, noise in enumerate((0, 1000)):
        monkeypatch.setattr(cache, "CACHE_DIR", isolated_outputs / f"cache{attempt}")
        torch.rand(noise)  # unrelated random work before
        study = tiny_study(
            tiny_dataset,
            tiny_backbone,
            seeds=[3],
            learning_rates=[1e-3],
            pretrain_steps=2,
            head_warmup_steps=1,
            decoder_init="random",
        )
        encoding = study.settings(EncoderSettings)
        spec = Dense("Longtriever", encoding.encoder("Longtriever"), pretrain=pretrain_config(study))
        fit = spec.fit(study, 1e-3, 3)
        parade = build_encoder("PARADE", encoding.encoder("PARADE"), seed=3)
        weights.append((fit.model().state_dict(), parade.state_dict(), fit.outputs))
    (lt_a, parade_a, runs_a), (lt_b, parade_b, runs_b) = weights
    assert all(torch.equal(lt_a[k], lt_b[k]) for k in lt_a) and runs_a == runs_b
    assert all(torch.equal(parade_a[k], parade_b[k]) for k in parade_a)


@pytest.mark.slow
def test_fine_tuning_runs_in_two_processes_launched_from_the_kernel(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    """n_devices=2: torchrun starts two gloo processes (one per GPU on a GPU node), each takes half of
    the step's queries; the first writes model, history and the dev-best runs into the cache. A
    second process count is a different cache entry."""
    from longdoc.experiments.papers.longtriever import table1_protocol

    study = tiny_study(tiny_dataset, tiny_backbone, n_devices=2, seeds=[0], learning_rates=[1e-3], iterations=2)
    assert study.settings(BudgetSettings).train_config(1e-3, 0).batch_size == 2  # 4 queries per step in all
    spec = Dense("MaxP", study.settings(EncoderSettings).encoder("MaxP"), protocol=table1_protocol(1, 2))
    fit = spec.fit(study, 1e-3, 0)  # iteration 1 (BM25 negatives), then mined by the model
    assert [i["negatives"] for i in fit.history["iterations"]] == ["bm25", "model"]
    assert [i["config"]["first_step"] for i in fit.history["iterations"]] == [0, 4]  # iteration 2: new queries first
    assert set(fit.outputs) == {"dev", "test"} and all(len(run) == 6 for run in fit.outputs.values())
    key = json.loads((fit.directory / "key.json").read_text())
    assert key["processes"] == 2 and key["train"]["batch_size"] == 2
    assert not list(fit.directory.parent.glob("*.resume"))  # training states are removed once it is done
    one = tiny_study(tiny_dataset, tiny_backbone, n_devices=1, seeds=[0], learning_rates=[1e-3], iterations=2)
    single = Dense("MaxP", one.settings(EncoderSettings).encoder("MaxP"), protocol=table1_protocol(1, 2)).fit(
        one, 1e-3, 0
    )

    def schedule(fitted):
        return [(h["step"], h["learning_rate"]) for i in fitted.history["iterations"] for h in i["history"]]

    assert schedule(fit) == schedule(single)  # the warm-up and decay run over the same steps


def test_the_same_seed_on_the_same_machine_gives_the_same_record(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study, monkeypatch
):
    """Two runs from empty caches: every metric, choice and training curve of the record is equal."""
    from longdoc.experiments import cache

    records = []
    for attempt in range(2):
        monkeypatch.setattr(cache, "CACHE_DIR", isolated_outputs / f"cache{attempt}")
        study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0, 1], learning_rates=[1e-3, 3e-3])
        study.run_all(
            [System("BM25", BM25()), System("MaxP", Dense("MaxP", study.settings(EncoderSettings).encoder("MaxP")))]
        )
        directory = study.record(overwrite=True)
        record = json.loads((directory / "metrics.json").read_text())
        records.append({k: record[k] for k in ("config", "seeds", "data_checksum", "metrics")})
        records[-1]["runs"] = sorted((p.name, p.read_bytes()) for p in (directory / "runs").iterdir())
    assert records[0] == records[1]


def test_every_settings_class_reads_parameters_that_some_notebook_declares():
    """Typed settings are views of the glossary: each names glossary parameters (checked when the class
    is defined) and is fully declared by at least one notebook (no view nothing can build)."""
    import importlib
    import pkgutil

    from longdoc.experiments import families, papers
    from longdoc.experiments.settings import required_fields

    for package in (families, papers):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    declared = [set(notebook_parameters(notebook)) for notebook in NOTEBOOKS]
    assert len(SETTINGS) >= 15
    for kind in SETTINGS:
        required = {f.name for f in required_fields(kind)}
        assert any(required <= names for names in declared), (
            f"{kind.__qualname__}: no notebook declares {sorted(required)}"
        )


def test_a_settings_class_refuses_a_name_outside_the_glossary():
    from longdoc.experiments.settings import settings

    with pytest.raises(TypeError, match="block_length"):

        @settings
        class Misspelt:
            block_length: int

    study_params = dict(profile="smoke", block_size=8)
    with pytest.raises(ValueError, match=r"EncoderSettings needs parameter\(s\) \['backbone'"):
        Study("scratch", study_params).settings(EncoderSettings)


def test_a_tables_intervals_are_each_systems_bootstrap_over_queries_and_seeds(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study
):
    from longdoc.eval.significance import seed_query_interval

    study = tiny_study(tiny_dataset, tiny_backbone)
    study.run(System("BM25", BM25()))
    table = study.table(intervals=True)
    stats = seed_query_interval(study.results["BM25"].per_item(study.data, "MRR@100"))
    row = table.loc["BM25"]
    assert (row["MRR@100 95% low"], row["MRR@100"], row["MRR@100 95% high"]) == pytest.approx(
        (stats["ci_low"], stats["mean"], stats["ci_high"])
    )
    assert row["MRR@100 95% low"] <= row["MRR@100"] <= row["MRR@100 95% high"]
    assert "MRR@100 95% low" not in study.table().columns  # the tables the notebooks show are unchanged
