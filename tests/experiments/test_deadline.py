"""A deadline for a run in pieces (longdoc.experiments.deadline): what it reads, which chain it stops, and a
study run in two pieces in two caches, with the small files exported and imported between, giving the
record of one piece."""

import json
import time

import pytest

from longdoc.bench.gpu_hours import Planner, Scale, chain_seconds
from longdoc.experiments import cache, deadline
from longdoc.experiments.families.retrieval import BM25, Dense
from longdoc.experiments.settings import EncoderSettings
from longdoc.experiments.systems import System


def test_the_deadline_is_a_unix_or_zoned_iso_time_and_anything_else_is_refused_by_name(monkeypatch):
    assert deadline.parse_deadline("1700000000") == 1700000000.0
    assert deadline.parse_deadline("2026-11-27T06:00:00+00:00") == 1795759200.0
    with pytest.raises(ValueError, match="give the time's zone"):
        deadline.parse_deadline("2026-11-27T06:00:00")
    with pytest.raises(ValueError, match="LONGDOC_DEADLINE='soon'"):
        deadline.parse_deadline("soon")
    monkeypatch.delenv(deadline.DEADLINE_VARIABLE, raising=False)
    assert deadline.deadline() is None
    monkeypatch.setenv(deadline.PRICES_VARIABLE, "/no/such/prices.json")
    with pytest.raises(ValueError, match="no such file"):
        deadline.fit_prices()


def rows(study):
    encoders = study.settings(EncoderSettings)
    return [
        System("BM25", BM25()),
        System("FirstP", Dense("FirstP", encoders.encoder("FirstP"))),
        System("MaxP", Dense("MaxP", encoders.encoder("MaxP"))),
    ]


def chains(study) -> list[list[tuple]]:
    planner = Planner(study, Scale("tiny", documents=10, pretrain_documents=0, source="test"))
    for system in rows(study):
        planner.run(system)
    return planner.plan.chains


def test_each_fit_is_priced_to_the_end_of_its_chain(tiny_dataset, tiny_backbone, tiny_study):
    from longdoc.bench.gpu_hours import Plan, Work, load_prices

    plan = Plan("x", works={("a",): [Work("fine-tuning", "retrieval:MaxP", 10, 512)], ("b",): []})
    plan.chains = [[("a",), ("b",)], [("b",)]]
    prices = load_prices(hidden=384)
    found = chain_seconds(plan, prices)
    assert found == {repr(("a",)): pytest.approx(10 * prices["retrieval:MaxP"].per_item(512)), repr(("b",)): 0.0}
    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0], learning_rates=[1e-3])
    walked = chains(study)
    # FirstP and MaxP, each walked for its learning-rate grid and then its seed (the same fit): one fit a chain
    assert len({tuple(chain) for chain in walked}) == 2 and all(len(chain) == 1 for chain in walked)


def test_a_warm_start_is_priced_to_the_end_of_the_chains_that_start_from_it(tiny_dataset, tiny_backbone, tiny_study):
    """An export carries no model: a deadline must not build FirstP and leave MaxP-from-FirstP, which
    needs FirstP's model, for a piece where that model is not."""
    from longdoc.bench.gpu_hours import Plan, Work, load_prices

    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0], learning_rates=[1e-3])
    first = rows(study)[1]
    warm = System("MaxP from FirstP", Dense("MaxP", study.settings(EncoderSettings).encoder("MaxP"), warm_start=first))
    planner = Planner(study, Scale("tiny", documents=10, pretrain_documents=0, source="test"))
    planner.run(first)
    planner.run(warm)
    (first_key,) = {key for chain in planner.plan.chains for key in chain if key[1].startswith("Dense(model='FirstP'")}
    (warm_key,) = {key for chain in planner.plan.chains for key in chain if key[1].startswith("Dense(model='MaxP'")}
    assert [first_key, warm_key] in planner.plan.chains  # the dependent chain holds its warm start first
    plan = Plan(
        "x",
        works={
            first_key: [Work("fine-tuning", "retrieval:FirstP", 10, 16)],
            warm_key: [Work("fine-tuning", "retrieval:MaxP", 1000, 32)],
        },
    )
    plan.chains = planner.plan.chains
    prices = load_prices(hidden=384)
    found = chain_seconds(plan, prices)
    both = 10 * prices["retrieval:FirstP"].per_item(16) + 1000 * prices["retrieval:MaxP"].per_item(32)
    assert found[deadline.price_key(first_key)] == pytest.approx(both)


def priced_prices(study, tmp_path, expensive: str) -> str:
    """A price file: the chains of the row named ``expensive`` cost a day, the others a second."""
    seconds = {
        deadline.price_key(key): 86400.0 if f"model='{expensive}'" in repr(key) else 1.0
        for chain in chains(study)
        for key in chain
    }
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"chain_seconds": seconds}))
    return str(path)


def record_of(study) -> dict:
    study.run_all(rows(study))
    record = json.loads((study.record(overwrite=True) / "metrics.json").read_text())
    return {k: record[k] for k in ("config", "seeds", "data_checksum", "metrics")}


def test_a_study_in_two_pieces_with_the_fits_carried_between_gives_the_record_of_one(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study, monkeypatch, tmp_path
):
    def study_in(cache_name):
        monkeypatch.setattr(cache, "CACHE_DIR", isolated_outputs / cache_name)
        return tiny_study(tiny_dataset, tiny_backbone, seeds=[0, 1], learning_rates=[1e-3, 3e-3])

    one_piece = record_of(study_in("one"))

    study = study_in("node")  # piece 1: MaxP's chains are priced beyond the hour left
    monkeypatch.setenv(deadline.PRICES_VARIABLE, priced_prices(study, tmp_path, "MaxP"))
    monkeypatch.setenv(deadline.DEADLINE_VARIABLE, str(time.time() + 3600))
    with pytest.raises(deadline.DeadlineReached, match="model='MaxP'.*was not started"):
        record_of(study)
    built = cache.complete_artefacts()
    assert built and all("MaxP" not in (a / "key.json").read_text() for a in built)  # nothing of MaxP begun
    cache.export_artefacts(tmp_path / "fits.tar.xz")

    monkeypatch.delenv(deadline.DEADLINE_VARIABLE)
    monkeypatch.delenv(deadline.PRICES_VARIABLE)
    study = study_in("home")  # piece 2, elsewhere: FirstP's fits imported (no checkpoints), MaxP trained here
    assert len(cache.import_artefacts(tmp_path / "fits.tar.xz")["added"]) == len(built)
    assert record_of(study) == one_piece
    from longdoc.experiments.families.retrieval import fit_costs

    first_fit = study.fit(rows(study)[1])
    assert (first_fit.directory / cache.IMPORTED).exists() and fit_costs(study, first_fit)["vectors"] > 0  # carried
    imported = [a for a in cache.complete_artefacts() if (a / cache.IMPORTED).exists()]
    assert len(imported) == len(built) and all(not (a / "model").exists() for a in imported)  # not retrained


def test_past_the_deadline_a_cached_chain_still_serves_and_an_uncached_one_does_not_start(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study, monkeypatch
):
    monkeypatch.setattr(cache, "CACHE_DIR", isolated_outputs / "cache")
    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0], learning_rates=[1e-3])
    first = rows(study)[1]
    fitted = study.fit(first)
    monkeypatch.setenv(deadline.DEADLINE_VARIABLE, str(time.time() - 1))
    assert study.fit(first).directory == fitted.directory  # built before: served
    with pytest.raises(deadline.DeadlineReached, match="0 s are left"):
        rows(study)[2].spec.fit(study, 1e-3, 0)
    assert [a.parent.name for a in cache.complete_artefacts()] == ["finetune"]  # FirstP's alone


def test_a_price_file_of_another_notebook_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"notebook": "20_sedr_main", "chain_seconds": {}}))
    monkeypatch.setenv(deadline.PRICES_VARIABLE, str(path))
    assert deadline.fit_prices("20_sedr_main") == {}
    with pytest.raises(ValueError, match="the prices of 20_sedr_main, not of 10_longtriever_main"):
        deadline.fit_prices("10_longtriever_main")


def test_a_chain_of_several_steps_is_checked_at_its_first_step_and_every_rate_is_priced(
    tiny_dataset, tiny_backbone, isolated_outputs, tiny_study, monkeypatch
):
    """An iterative row's fit is one run that makes its earlier iterations within: the deadline checks the
    price of the first (the whole chain), not of the last; --fit-prices walks each seed at every rate."""
    from longdoc.experiments.papers.longtriever import table1_protocol
    from longdoc.experiments.study import Execution

    monkeypatch.setattr(cache, "CACHE_DIR", isolated_outputs / "cache")
    study = tiny_study(tiny_dataset, tiny_backbone, seeds=[0, 1], learning_rates=[1e-3, 3e-3])
    row = System(
        "MaxP iterative", Dense("MaxP", study.settings(EncoderSettings).encoder("MaxP"), protocol=table1_protocol(1, 2))
    )
    checked = []
    monkeypatch.setattr(deadline.ChainGuard, "check", lambda self, key: checked.append(key))
    execution = Execution(study)
    row.spec.fits(execution, 1e-3, 0)
    planner = Planner(study, Scale("tiny", documents=10, pretrain_documents=0, source="test"))
    row.spec.fits(planner, 1e-3, 0)
    (steps,) = {tuple(k for k in planner.plan.works if k[0] == "fit")}  # beside the stages (tokens, BM25)
    assert len(steps) == 2 and checked and set(checked) == {steps[0]}  # the first iteration's key, never the last's
    every = Planner(study, Scale("tiny", documents=10, pretrain_documents=0, source="test"), every_rate=True)
    every.run(row)
    rates_seeds = {(k[-2], k[-1]) for k in every.plan.works if k[0] == "fit"}
    assert rates_seeds == {(r, s) for r in (1e-3, 3e-3) for s in (0, 1)}
