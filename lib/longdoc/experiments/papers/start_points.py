"""Where each model starts before fine-tuning, and the alternatives its new parameters could start from.

Every new parameter starts from a value the in-batch probe (:mod:`longdoc.eval.probes`) can justify:
notebook 10 probes each model's start (ours) beside the alternatives below, on dev queries, so the
choice is re-checked by every run. The alternatives are what the released code or the original
paper did where it differs from ours.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pandas as pd
import torch
from torch import nn

from longdoc.eval.probes import in_batch_probe
from longdoc.experiments.cache import cached_json, dataset_key
from longdoc.experiments.families.retrieval import PROBE_QUERIES, Dense, segment_corpus
from longdoc.experiments.study import Study
from longdoc.experiments.systems import System
from longdoc.models.biencoder import BiEncoder
from longdoc.seeding import seeded


def _doc_from_normal(model: BiEncoder) -> None:
    model.doc_embedding.data.normal_(0.0, 1.0)  # nn.Embedding's default, as the released code left it


def _inter_layers_random(model: BiEncoder) -> None:
    for layer in model.inter_layers:
        layer.apply(model.backbone._init_weights)


def _aggregator_from_backbone(model: BiEncoder) -> None:
    layers = model.backbone.encoder.layer
    model.aggregator = nn.ModuleList(copy.deepcopy(layer) for layer in layers[len(layers) - len(model.aggregator) :])


def _random_pooling_query(model: BiEncoder) -> None:
    model.pooling.query.data.normal_(0.0, model.backbone.config.initializer_range)


def _random_order_embedding(model: BiEncoder) -> None:
    model.segment_embedding.weight.data.normal_(0.0, model.backbone.config.initializer_range)  # as SeDR's release


ALTERNATIVES: dict[str, dict[str, Callable[[BiEncoder], None]]] = {
    "Longtriever": {
        "[DOC] ~ N(0, 1), as released": _doc_from_normal,
        "inter-block layers random, as released": _inter_layers_random,
    },
    "PARADE": {"aggregation layers copied from the backbone's last layers": _aggregator_from_backbone},
    "Hi-Transformer": {"random pooling query": _random_pooling_query},
    "SeDR": {"segment-order embedding ~ N(0, 0.02), as released": _random_order_embedding},
}


def alternative_probes(study: Study, spec: Dense) -> dict[str, dict]:
    """The dev probe of each alternative start of ``spec``'s new parameters (:data:`ALTERNATIVES`)."""
    dev_queries, dev_qrels = study.split("dev")
    corpus = segment_corpus(spec.starting_model(study), study.data)
    found = {}
    for label, change in ALTERNATIVES.get(spec.model, {}).items():
        variant = spec.starting_model(study)
        with seeded(study.seeds[0]), torch.no_grad():
            change(variant)
        found[label] = in_batch_probe(variant, corpus, dev_queries, dev_qrels, size=PROBE_QUERIES)
    return found


def start_probes(study: Study, systems: list[System], alternatives: bool = True) -> pd.DataFrame:
    """The probe of every system's start point and (``alternatives``) of each alternative start of
    its new parameters, for the systems that have them and are not pre-trained."""
    rows, probed = {}, {}
    for system in systems:
        spec = system.spec
        if not isinstance(spec, Dense):
            continue
        start = spec.start_key()
        if start in probed:  # the same start point (e.g. one model under two fine-tuning protocols)
            rows[system.name] = {**rows[probed[start]], "start": f"as {probed[start]}"}
            continue
        probed[start] = system.name
        rows[system.name] = {"start": "ours", **study.start_probe(spec)}
        if spec.pretrain is not None or not alternatives or not ALTERNATIVES.get(spec.model):
            continue  # alternatives concern the untrained new parameters
        probes = cached_json(  # probed where the start's weights are; travels with the small files
            "start_alternatives",
            lambda spec=spec: alternative_probes(study, spec),
            start=start,
            origin=spec.start_origin(study),
            seed=study.seeds[0],
            **dataset_key(study.data),
        )
        for label, probe in probes.items():
            rows[f"{system.name}: {label}"] = {"start": label, **probe}
    table = pd.DataFrame(rows).T
    table["chance"] = 1.0 / table["queries"].astype(float)
    return table[["start", "queries", "accuracy", "chance", "loss", "cosine"]]


def pretraining_variants(study: Study, variants: dict[str, dict]) -> pd.DataFrame:
    """The dev probe of Longtriever's start after pre-training under each variant of the study's
    pre-training config (e.g. ``{"random decoder": {"decoder_init": "random"}}``), beside the start
    without pre-training; each pre-training is cached like the notebooks' own."""
    from dataclasses import replace

    from longdoc.experiments.families.pretraining import pretraining_history
    from longdoc.experiments.papers.longtriever import longtriever
    from longdoc.experiments.preconditions import losses_fell

    base = longtriever(study)
    systems = {
        "without pre-training": replace(base, name="without pre-training", spec=replace(base.spec, pretrain=None))
    }
    systems |= {
        label: replace(base, name=label, spec=replace(base.spec, pretrain=replace(base.spec.pretrain, **changes)))
        for label, changes in variants.items()
    }
    table = start_probes(study, list(systems.values()), alternatives=False)
    table["losses"] = [
        losses_fell(pretraining_history(system.spec.start(study))["history"])[1] if system.spec.pretrain else ""
        for system in systems.values()
    ]
    return table


def zero_shot_table(study: Study) -> pd.DataFrame:
    """Dev and test MRR@100 of the backbone as it is (FirstP over N × M tokens, no training), under the
    study's pooling and the other one (notebook 01's zero-shot rows)."""
    rows = {}
    for system in zero_shot_systems(study):
        result = study.run(system)
        rows[system.name] = {
            split: result.metrics(study.data, split, ["MRR@100"])[0]["MRR@100"] for split in ("dev", "test")
        }
    return pd.DataFrame(rows).T


def zero_shot_systems(study: Study) -> list[System]:
    """Notebook 01's two zero-shot rows of the study's backbone: FirstP under its pooling and the other."""
    from longdoc.experiments.papers.baselines import baseline_names, passage_baselines

    names = baseline_names(study)
    return [s for s in passage_baselines(study) if s.name in (names["zero_shot"], names["zero_shot_other"])]


def _assignment(text: str) -> tuple[str, object]:
    import yaml

    name, equals, value = text.partition("=")
    if not equals or not name:
        raise SystemExit(f"--set {text!r}: expected NAME=VALUE")
    return name.strip(), yaml.safe_load(value)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """``python -m longdoc.experiments.papers.start_points --profile cpu --decoder-init copy random``: how the
    LMAE decoder's start (and the pre-training learning rate) change the pre-trained start point;
    ``--backbone manpages-mlm --mlm-only --zero-shot``: from another start, with MLM-only pre-training
    beside LMAE + MLM, and the backbone's zero-shot MRR@100."""
    import argparse

    from longdoc.data.registry import REPO_ROOT
    from longdoc.experiments.families.pretraining import PretrainingSettings
    from longdoc.experiments.families.retrieval import RETRIEVAL
    from longdoc.experiments.profiles import parameters_for

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--backbone", default=None, help="another backbone than the profile's")
    parser.add_argument("--decoder-init", nargs="+", default=["copy", "random"])
    parser.add_argument("--learning-rates", nargs="+", type=float, default=None)
    parser.add_argument("--mlm-only", action="store_true", help="add MLM-only pre-training at each rate")
    parser.add_argument("--zero-shot", action="store_true", help="print the backbone's zero-shot MRR@100 too")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="another value (YAML), e.g. pretrain_steps=240"
    )
    args = parser.parse_args(argv)
    notebook = REPO_ROOT / "notebooks" / "11_longtriever_ablation.ipynb"
    overrides = dict(_assignment(text) for text in args.set) | ({"backbone": args.backbone} if args.backbone else {})
    parameters = parameters_for(
        REPO_ROOT / "notebooks" / "profiles" / f"{args.profile}.yaml", notebook, overrides or None
    )
    if overrides:  # other values than the profile's: not the profile's record slot (this command records nothing)
        parameters["profile"] = f"{args.profile}-{args.backbone or 'set'}"
    study = Study(notebook.stem, parameters, RETRIEVAL)
    rates = args.learning_rates or [study.settings(PretrainingSettings).pretrain_learning_rate]
    variants = {
        f"decoder {init}, lr {rate:g}": {"decoder_init": init, "learning_rate": rate}
        for init in args.decoder_init
        for rate in rates
    }
    if args.mlm_only:
        variants |= {f"MLM only, lr {rate:g}": {"lmae": False, "learning_rate": rate} for rate in rates}
    table = pretraining_variants(study, variants)
    print(f"backbone {parameters['backbone']}: dev probe of Longtriever's start\n{table.to_string()}")
    if args.zero_shot:
        print(f"\nzero-shot MRR@100 of the backbone\n{zero_shot_table(study).to_string()}")
    return table


if __name__ == "__main__":
    main()
