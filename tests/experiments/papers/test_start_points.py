"""The start-point checks: the backbone's zero-shot rows, under both poolings, on dev and test."""

from __future__ import annotations

from conftest import build_tiny_study


def test_the_zero_shot_table_gives_both_poolings_on_dev_and_test(tiny_dataset, tiny_backbone, isolated_outputs):
    from longdoc.experiments.papers.baselines import baseline_names
    from longdoc.experiments.papers.start_points import zero_shot_table

    study = build_tiny_study(tiny_dataset, tiny_backbone)
    table = zero_shot_table(study)
    names = baseline_names(study)
    assert list(table.index) == [names["zero_shot"], names["zero_shot_other"]]
    assert list(table.columns) == ["dev", "test"]
    assert ((table >= 0) & (table <= 1)).all().all()
    again = study.results[names["zero_shot"]].metrics(study.data, "test", ["MRR@100"])[0]["MRR@100"]
    assert table.loc[names["zero_shot"], "test"] == again
