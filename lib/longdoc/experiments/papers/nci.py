"""The NCI paper's experiments as rows and claims: Tables 1-2 (main), 3 (ablations), 4 (PAWA layers),
5 (efficiency), 6 (α) and Figures 3-4, for notebooks 40-45.

Rows of the main table (notebook 40), each on the same data and splits:

- ``BM25``; ``BM25+DocT5Query``: BM25 over each document followed by the queries NCI trains on.
- ``FirstP (FAISS)`` and ``FirstP brute force``: the retrieval study's fine-tuned FirstP (one block of
  ``block_size`` tokens, the study's budget and start rule), searched with a FAISS flat index and by
  exact cosine (the paper's "BERT + ANN (Faiss)" and "BERT + BruteForce", there coCondenser).
- ``DSI``: :func:`dsi`.
- ``NCI``: the full system; ``NCI ensemble``: NCI plus ``nci_ensemble - 1`` models on identifiers
  from other k-means seeds, voting, one ensemble per seed (each of its members trained with that seed).

Ablation rows (notebook 41) change one component and take NCI's dev-chosen learning rate.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from longdoc.experiments.families.generative import (
    GENERATIVE,
    Ensemble,
    ExpandedBM25,
    Generative,
    NciSettings,
    NciSpec,
    QuerySpec,
    generated_queries,
    generated_query_quality,
    training_examples,
    usable_generated_queries,
)
from longdoc.experiments.families.retrieval import BM25, Dense, ExactSearch
from longdoc.experiments.paper import paper_beside_by_collection, paper_results
from longdoc.experiments.paper import paper_value as reported
from longdoc.experiments.preconditions import stopped_at_plateau
from longdoc.experiments.settings import EncoderSettings, settings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import Headline, System, Table
from longdoc.experiments.verdicts import FIGURE_ONLY, Claim, Precondition, claim_builder, claims_comparing

PAPER = "nci"
PAPER_MEASURES = {
    "NQ320k": ["Success@1", "Success@10", "Success@100", "MRR@100"],
    "TriviaQA": ["Success@5", "Success@20", "Success@100", "RPrec"],
}
CLAIM_MEASURE = "MRR@100"


@settings
class EnsembleSettings:
    nci_ensemble: int  # models in the ensemble row


@settings
class AdaptorSweep:
    sweep_adaptor_layers: list  # Table 4's M3


@settings
class AlphaSweep:
    sweep_alphas: list  # Table 6's α


@settings
class EfficiencySettings:
    sweep_encoder_layers: list  # Figure 3's model capacities
    sweep_beams: list  # Table 5's beam sizes
    bench_repeats: int


@settings
class AnalysisSettings:
    prefix_digits: int  # Figure 4's identifier digits per retrieved document


def nci_spec(study: Study, **changes) -> NciSpec:
    """The full NCI system under the study's parameters; ``changes`` override fields (ablations)."""
    return study.settings(NciSettings).spec(study.seeds[0], **changes)


def nci(study: Study) -> System:
    return System("NCI", Generative(nci_spec(study)), paper_name="NCI")


def dsi(study: Study) -> NciSpec:
    """DSI (Tay et al.) as NCI's paper compares it: the same encoder and decoder depth, one digit vocabulary
    for every depth (with a learned step embedding), no PAWA, no consistency loss, trained on the labelled
    queries and each document's first terms (DSI's indexing), semantic identifiers."""
    base = nci_spec(study)
    return replace(
        base,
        adaptor_layers=0,
        alpha=0.0,
        identifiers=replace(base.identifiers, positional=False),
        queries=replace(base.queries, windows=0, generated=False),
    )


def main_systems(study: Study) -> list[System]:
    full = nci(study)
    firstp = Dense("FirstP", study.settings(EncoderSettings).encoder("FirstP"))
    rows = [
        System("BM25", BM25(), paper_name="BM25"),
        System("BM25+DocT5Query", ExpandedBM25(), paper_name="BM25+DocT5Query"),
        System("FirstP (FAISS)", firstp, paper_name="FirstP (FAISS)"),
        System("FirstP brute force", ExactSearch(firstp), paper_name="FirstP brute force"),
        System("DSI", Generative(dsi(study)), paper_name="DSI"),
        full,
    ]
    ensemble = study.settings(EnsembleSettings).nci_ensemble
    if ensemble > 1:
        spec = full.spec.nci
        members = [full] + [
            replace(
                full,
                name=f"NCI (k-means seed {seed})",
                settings_from=full,
                paper_name="",
                spec=Generative(replace(spec, identifiers=replace(spec.identifiers, seed=seed))),
            )
            for seed in range(1, ensemble)
        ]
        rows.append(System("NCI ensemble", Ensemble(tuple(members)), paper_name="NCI ensemble"))
    return rows


@claim_builder
def main_claims(study: Study, systems: list[System]) -> list[Claim]:
    names = {s.name for s in systems}

    def quoted(a: str, b: str) -> str:
        return (
            "NQ320k: " + f"{paper_value(a):.2f} vs {paper_value(b):.2f} MRR@100"
            if not pd.isna(paper_value(b))
            else (f"NQ320k: {paper_value(a, 'Success@1'):.2f} vs {paper_value(b, 'Success@1'):.2f} Recall@1")
        )

    claims = [
        Claim(
            "NCI beats DSI (on Recall@1, the one measure DSI reports with MRR absent)",
            "NCI",
            "DSI",
            quoted("NCI", "DSI"),
            "Success@1",
        ),
        Claim(
            "NCI beats BM25 + DocT5Query",
            "NCI",
            "BM25+DocT5Query",
            quoted("NCI", "BM25+DocT5Query"),
            precondition=generator_works(study),
        ),
        Claim("NCI beats BM25", "NCI", "BM25", quoted("NCI", "BM25")),
        Claim("NCI beats dense FirstP (FAISS)", "NCI", "FirstP (FAISS)", quoted("NCI", "FirstP (FAISS)")),
        Claim(
            "query generation helps BM25 (BM25 + DocT5Query > BM25)",
            "BM25+DocT5Query",
            "BM25",
            quoted("BM25+DocT5Query", "BM25"),
            precondition=generator_works(study),
        ),
    ]
    if "NCI ensemble" in names:
        claims.append(Claim("the ensemble beats one NCI model", "NCI ensemble", "NCI", quoted("NCI ensemble", "NCI")))
    return claims


ABLATIONS = (
    "w/o query generation",
    "w/o DocT5Query",
    "w/o document as query",
    "w/o PAWA decoder",
    "w/o semantic id",
    "w/o regularization",
    "w/o constrained beam search",
)


def ablation_systems(study: Study) -> list[System]:
    """Table 3: the full NCI and one row per removed component (each keeps NCI's learning rate)."""
    full = nci(study)
    spec = full.spec.nci
    changes = {
        "w/o query generation": replace(spec, queries=replace(spec.queries, document_as_query=False, generated=False)),
        "w/o DocT5Query": replace(spec, queries=replace(spec.queries, generated=False)),
        "w/o document as query": replace(spec, queries=replace(spec.queries, document_as_query=False)),
        "w/o PAWA decoder": replace(spec, adaptor_layers=0),
        "w/o semantic id": replace(spec, identifiers=replace(spec.identifiers, kind="random")),
        "w/o regularization": replace(spec, alpha=0.0),
    }
    rows = [full] + [
        replace(full, name=name, spec=Generative(changed), settings_from=full, paper_name=name)
        for name, changed in changes.items()
    ]
    unconstrained = replace(study.settings(NciSettings).decoding(), constrained=False)
    rows.append(
        replace(
            full,
            name="w/o constrained beam search",
            spec=Generative(spec, unconstrained),
            settings_from=full,
            paper_name="w/o constrained beam search",
        )
    )
    return rows


GENERATION_ROWS = ("w/o query generation", "w/o DocT5Query")  # their claims test the generator's queries


@claim_builder
def ablation_claims(study: Study) -> list[Claim]:
    """Table 3's claims; those about generated queries are testable only where the generator works
    (:func:`generator_works`)."""
    works = generator_works(study)
    return [
        Claim(
            f"removing a component hurts: NCI > {name}",
            "NCI",
            name,
            f"NQ320k: {paper_value('NCI', table='Table 3'):.2f} vs {paper_value(name, table='Table 3'):.2f} MRR@100",
            CLAIM_MEASURE,
            precondition=works if name in GENERATION_ROWS else None,
        )
        for name in ABLATIONS
    ]


def sweep_systems(study: Study, field: str, values: list, name, main) -> list[System]:
    """NCI with one ``NciSpec`` field swept: the study's value is NCI itself (its learning rate chosen on
    dev), every other value keeps NCI's learning rate."""
    full = nci(study)
    return [
        replace(
            full,
            name=name(v),
            spec=Generative(replace(full.spec.nci, **{field: v})),
            paper_name=name(v),
            settings_from=None if v == main else full,
        )
        for v in values
    ]


def adaptor_name(layers: int) -> str:
    return f"M3 = {layers}"


def adaptor_systems(study: Study) -> list[System]:
    """Table 4: NCI with M3 adaptor layers (each keeps NCI's learning rate)."""
    return sweep_systems(
        study,
        "adaptor_layers",
        study.settings(AdaptorSweep).sweep_adaptor_layers,
        adaptor_name,
        study.settings(NciSettings).nci_adaptor_layers,
    )


@claim_builder
def adaptor_claims(study: Study) -> list[Claim]:
    """Table 4 against the study's M3: for each other swept M3, the one the paper found better (NQ320k
    MRR@100) should beat the other (the paper: more layers help up to 4, 6 and 8 overfit)."""
    main = study.settings(NciSettings).nci_adaptor_layers
    claims = []
    for m in study.settings(AdaptorSweep).sweep_adaptor_layers:
        if m == main:
            continue
        ours, other = paper_value(adaptor_name(main), table="Table 4"), paper_value(adaptor_name(m), table="Table 4")
        if pd.isna(ours) or pd.isna(other):
            better, worse = (
                (adaptor_name(main), adaptor_name(m))
                if (m < main) == (main <= 4)
                else (adaptor_name(m), adaptor_name(main))
            )
            paper = "Table 4's trend: more layers help up to M3 = 4, more than 4 overfit"
        else:
            better, worse = (
                (adaptor_name(main), adaptor_name(m)) if ours >= other else (adaptor_name(m), adaptor_name(main))
            )
            paper = f"NQ320k: {better}: {max(ours, other):.2f} vs {worse}: {min(ours, other):.2f} MRR@100"
        claims.append(Claim(f"{better} beats {worse}", better, worse, paper, CLAIM_MEASURE))
    return claims


def alpha_name(alpha: float) -> str:
    return f"alpha = {alpha:g}"


def alpha_systems(study: Study) -> list[System]:
    """Table 6: NCI with consistency weight α (each keeps NCI's learning rate)."""
    return sweep_systems(
        study, "alpha", study.settings(AlphaSweep).sweep_alphas, alpha_name, study.settings(NciSettings).nci_alpha
    )


@claim_builder
def alpha_claims(study: Study) -> list[Claim]:
    main = study.settings(NciSettings).nci_alpha
    return [
        Claim(
            f"α = {main:g} beats α = {a:g}" + (" (regularisation helps)" if a == 0 else ""),
            alpha_name(main),
            alpha_name(a),
            f"NQ320k: {paper_value(alpha_name(0.15), table='Table 6'):.2f} vs "
            + (f"{paper_value(alpha_name(a), table='Table 6'):.2f}" if has_paper_row(alpha_name(a), "Table 6") else "—")
            + " MRR@100",
            CLAIM_MEASURE,
        )
        for a in study.settings(AlphaSweep).sweep_alphas
        if a != main
    ]


def capacity_name(layers: int) -> str:
    return f"{layers}-layer encoder"


def capacity_systems(study: Study) -> list[System]:
    """Figure 3: NCI with the backbone's first L encoder layers (the paper: T5 small, base, large)."""
    full = nci(study)
    return [
        replace(
            full,
            name=capacity_name(n),
            spec=Generative(replace(full.spec.nci, encoder_layers=n)),
            paper_name="",
            settings_from=full,
        )
        for n in study.settings(EfficiencySettings).sweep_encoder_layers
    ]


# -- the paper's numbers -------------------------------------------------------------------------
def paper_value(name: str, measure: str = "MRR@100", table: str = "Table 1", dataset: str = "NQ320k") -> float:
    return reported(PAPER, measure, default=float("nan"), our_name=name, table=table, dataset=dataset)


def has_paper_row(name: str, table: str) -> bool:
    return len(paper_results(PAPER, our_name=name, table=table)) > 0


def paper_beside(table: pd.DataFrame, systems: list[System], paper_table: str) -> pd.DataFrame:
    """The paper's values beside our rows, its percentages as fractions: NQ320k's four measures and
    TriviaQA's Recall@5 and @20 (its Recall@100 and R-Precision are in ``data/paper_results/nci.csv``;
    two columns keep the table readable)."""
    members = [m for s in systems if isinstance(s.spec, Ensemble) for m in s.spec.members]
    paper_name = {s.name: s.paper_name for s in systems} | {m.name: m.paper_name for m in members}
    measures = {dataset: wanted[:2] if dataset == "TriviaQA" else wanted for dataset, wanted in PAPER_MEASURES.items()}
    return paper_beside_by_collection(
        table, {name: paper_name.get(name, "") for name in table.index}, PAPER, paper_table, measures, unit=100
    )


def split_counts(study: Study) -> pd.DataFrame:
    rows = {}
    for split in ("train", "dev", "test"):
        queries, qrels = study.split(split)
        relevant = [sum(r > 0 for r in judged.values()) for judged in qrels.values()]
        rows[split] = {
            "queries": len(queries),
            "relevant documents per query": sum(relevant) / max(len(relevant), 1),
            "queries with several relevant documents": sum(n > 1 for n in relevant),
        }
    frame = pd.DataFrame(rows).T
    frame["corpus documents"] = len(study.data.doc_ids)
    return frame


def used_text(decision: dict | None) -> str:
    """Whether NCI trains on the generated queries, and why not (:func:`usable_generated_queries`)."""
    if decision is None or decision["used"]:
        return "yes"
    return (
        f"no: BM25 finds their documents at MRR@100 {decision['generated']:.3f}, below {decision['floor']:g} × "
        f"the labelled queries' {decision['labelled']:.3f}"
    )


def generation_summary(study: Study) -> pd.DataFrame:
    """What the query generator cost and made, whether NCI trains on its queries (their quality against the
    floor, :func:`usable_generated_queries`), and NCI's training examples by kind."""
    spec = nci_spec(study)
    options = study.settings(NciSettings)
    generated, record = generated_queries(
        study.data, spec.queries.generation, options.backbone, study.progress, options.n_devices
    )
    kinds = {
        "labelled train queries": replace(spec.queries, document_as_query=False, generated=False),
        "document as query": replace(spec.queries, train_queries=False, generated=False),
        "generated queries": replace(spec.queries, train_queries=False, document_as_query=False),
    }
    usable, kept, decision = usable_generated_queries(study.data, spec.queries, generated)
    if not usable.generated:  # below the quality floor: NCI trains without them
        kinds["generated queries"] = None
    examples = {kind: len(training_examples(study.data, q, kept)) if q else 0 for kind, q in kinds.items()}
    training = record.get("training") or {}
    dev = [h["dev"] for h in training.get("history", []) if "dev" in h]
    rows = {
        "generator": spec.queries.generation.generator or "trained here from the backbone on the train pairs",
        "generated queries": record["queries"],
        "documents without a generated query": record["documents_without_queries"],
        "generator training seconds": round(record["train_seconds"], 1),
        "generation seconds": round(record["generate_seconds"], 1),
        "generator dev loss (last evaluation)": round(-dev[-1], 3) if dev else "—",
        "used for NCI's training": used_text(decision),
    }
    rows |= {f"training examples: {kind}": n for kind, n in examples.items()}
    total = sum(examples.values())
    rows["share of NCI's training examples that are generated"] = (
        f"{examples['generated queries'] / total:.0%}" if total else "—"
    )
    return pd.DataFrame({"value": {k: str(v) for k, v in rows.items()}})


def training_budget(study: Study) -> pd.DataFrame:
    """What each trained row really got (the budget stated): its training examples, the steps it took
    (it stops at its dev plateau, at most ``nci_train_steps``), the step of its dev best and the epochs
    over its own examples at that step, per seed, and whether every run stopped by its plateau rule
    (:func:`~longdoc.experiments.preconditions.stopped_at_plateau`; a run cut by the cap did not)."""
    rows = {}
    for name, result in study.results.items():
        if not result.fits or not result.training:
            continue
        fit, training = result.fits[0], result.training
        per_epoch = fit.last["steps_per_epoch"]
        rows[name] = {
            "examples": fit.history.get("examples", "—"),  # dense rows do not count theirs
            "steps trained": ", ".join(str(t["dev_curve"][-1][0]) for t in training),
            "dev-best step": ", ".join(str(t["best_step"]) for t in training),
            "epochs at the dev best": ", ".join(f"{t['best_step'] / per_epoch:.1f}" for t in training),
            "plateau reached": all(stopped_at_plateau(t) for t in training),
        }
    return pd.DataFrame(rows).T


GENERATOR_QUALITY = QuerySpec().quality_floor  # generated queries must find their documents half as well as labelled


def study_generated_queries(study: Study) -> dict[str, list[str]]:
    """The generated queries NCI trains on under the study's parameters (cached, shared)."""
    spec = nci_spec(study)
    options = study.settings(NciSettings)
    return generated_queries(study.data, spec.queries.generation, options.backbone, study.progress, options.n_devices)[
        0
    ]


def generator_quality(study: Study) -> dict[str, float]:
    """The generated queries' quality beside the labelled train queries' (:func:`generated_query_quality`)."""
    return generated_query_quality(study.data, study_generated_queries(study))


def generator_works(study: Study) -> Precondition:
    """The precondition of every claim about query generation: its queries find their documents (BM25
    MRR@100) at least :data:`GENERATOR_QUALITY` times as well as the labelled train queries do. A
    generator that writes noise makes "w/o DocT5Query" a test of noise, not of docT5query."""
    quality = generator_quality(study)
    return Precondition(
        quality["generated"] >= GENERATOR_QUALITY * quality["labelled"],
        f"the query generator works: BM25 finds a generated query's document at MRR@100 "
        f"{quality['generated']:.3f}, the labelled train queries' at {quality['labelled']:.3f} "
        f"(needed: ≥ {GENERATOR_QUALITY:g}×)",
    )


def generated_samples(study: Study, documents: int = 3, characters: int = 240) -> pd.DataFrame:
    """The first ``documents`` documents that a dev query judges relevant: their opening, their generated
    queries, and the dev query, to read the generator's output beside what people ask."""
    generated = study_generated_queries(study)
    queries, qrels = study.split("dev")
    text = dict(zip(study.data.doc_ids, study.data.texts))
    rows, seen = [], set()
    for qid, judged in qrels.items():
        for doc in (d for d, r in judged.items() if r > 0 and d not in seen and d in text):
            seen.add(doc)
            opening = " ".join(text[doc].split())[:characters]
            rows.append(
                {
                    "document": f"{doc}: {opening}…",
                    "generated queries": " | ".join(generated.get(doc, [])),
                    "dev query": queries[qid],
                }
            )
        if len(rows) >= documents:
            break
    return pd.DataFrame(rows[:documents])


def parameter_counts(study: Study, systems: list[System]) -> pd.DataFrame:
    rows = {}
    for system in systems:
        fit = study.fit(system)
        rows[system.name] = {
            "parameters (M)": fit.history["parameters"] / 1e6,
            "adaptor parameters (M)": fit.history["adaptor_parameters"] / 1e6,
        }
    return pd.DataFrame(rows).T


def learning_curve_frames(study: Study, systems: list[System]) -> dict[str, pd.DataFrame]:
    """Each system's dev evaluations (first seed) against epochs over its training examples."""
    curves = {}
    for system in systems:
        fit = study.fit(system)
        batch = fit.last["config"]["batch_size"] * fit.history.get("processes", 1)  # queries per step in all
        examples = fit.history["examples"]
        rows = [
            {"step": int(step), "epoch": int(step) * batch / examples, **values}
            for step, values in fit.history["curve"].items()
        ]
        curves[system.name] = pd.DataFrame(rows).sort_values("step")
    return curves


def curve_table(
    curves: dict[str, pd.DataFrame], measures: tuple = ("Success@1", "Success@10", "MRR@100")
) -> pd.DataFrame:
    frames = [
        curve.assign(system=name).set_index(["system", "step"])[["epoch", *measures]] for name, curve in curves.items()
    ]
    return pd.concat(frames)


@claim_builder
def capacity_claims(study: Study, systems: list[System]) -> list[Claim]:
    """Figure 3: the smallest capacity ends lower than the largest."""
    by_size = sorted(systems, key=lambda s: s.spec.nci.encoder_layers)
    small, large = by_size[0].name, by_size[-1].name
    return [
        Claim(
            f"a larger model retrieves better at the same budget ({large} > {small})",
            large,
            small,
            f"Figure 3: small ends lower than base and large {FIGURE_ONLY}",
            CLAIM_MEASURE,
        )
    ]


def decoding_costs(study: Study, system: System, queries: int = 64, batch: int = 16) -> pd.DataFrame:
    """Table 5 on this machine: per beam size, NCI's latency (one query at a time), throughput (``batch``
    queries per call), constrained ÷ unconstrained, batched ÷ one at a time, and NCI ÷ FirstP + FAISS
    (the backbone as FirstP encoder over the corpus, one query at a time), over the first ``queries``
    test queries; medians of ``bench_repeats`` timed repeats after a warm-up."""
    import statistics
    import time

    from longdoc.experiments.families.generative import nci_retriever
    from longdoc.experiments.families.retrieval import segment_corpus
    from longdoc.index.dense_retriever import DenseRetriever
    from longdoc.models.registry import build_encoder

    fit = study.fit(system)
    model = fit.model()
    test = dict(list(study.split("test")[0].items())[:queries])
    repeats = study.settings(EfficiencySettings).bench_repeats
    options = study.settings(NciSettings)

    def per_query(search, chunk: int) -> float:
        items = list(test.items())
        batches = [dict(items[i : i + chunk]) for i in range(0, len(items), chunk)]
        search(batches[0])
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            for part in batches:
                search(part)
            times.append(time.perf_counter() - started)
        return statistics.median(times) / len(items)

    firstp = build_encoder("FirstP", study.settings(EncoderSettings).encoder("FirstP"), study.seeds[0])
    dense = DenseRetriever(firstp, segment_corpus(firstp, study.data), progress=False).build()
    dense_seconds = per_query(lambda part: dense.search(part, 100), 1)
    rows = []
    for beam in study.settings(EfficiencySettings).sweep_beams:
        seconds = {}
        for constrained in (True, False):
            for size in (1, batch):
                config = replace(options.decoding(), beam_size=beam, constrained=constrained, batch_size=size)
                retriever = nci_retriever(fit, study.data, config, model)
                seconds[constrained, size] = per_query(lambda part, r=retriever, b=beam: r.search(part, b), size)
        rows.append(
            {
                "beam": beam,
                "latency ms (1 query)": 1000 * seconds[True, 1],
                f"throughput queries/s (batches of {batch})": 1 / seconds[True, batch],
                "constrained ÷ unconstrained (1 query)": seconds[True, 1] / seconds[False, 1],
                f"constrained ÷ unconstrained (batches of {batch})": seconds[True, batch] / seconds[False, batch],
                "batched ÷ one at a time (per query)": seconds[True, batch] / seconds[True, 1],
                "NCI ÷ FirstP + FAISS (latency)": seconds[True, 1] / dense_seconds,
                "FirstP + FAISS ms (1 query)": 1000 * dense_seconds,
            }
        )
    return pd.DataFrame(rows).set_index("beam")


def semantic_id_analysis(study: Study, system: System, top: int = 10) -> dict:
    """Everything notebook 45 shows (see :mod:`longdoc.analysis.semantic_ids`)."""
    import numpy as np

    from longdoc.analysis.semantic_ids import (
        prefix_overlap,
        query_groups,
        relevant_prefix_agreement,
        retrieved_prefixes,
        tsne_points,
    )
    from longdoc.eval.metrics import ranking
    from longdoc.eval.significance import percentile_interval
    from longdoc.experiments.families.generative import decode_nci, document_embeddings, nci_identifiers
    from longdoc.experiments.verdicts import NOT_SHOWN, interval_text, verdict
    from longdoc.models.registry import build_encoder

    options = study.settings(NciSettings)
    spec = system.spec.nci
    fit = study.fit(system)
    identifiers = dict(zip(study.data.doc_ids, nci_identifiers(fit)))
    depths = pd.Series([len(i) for i in identifiers.values()])
    leaves = pd.Series([i[:-1] for i in identifiers.values()]).value_counts()
    tree = pd.DataFrame(
        {
            "value": {
                "documents": len(identifiers),
                "top-level clusters": len({i[0] for i in identifiers.values()}),
                "identifier digits (min / mean / max)": f"{depths.min()} / {depths.mean():.2f} / {depths.max()}",
                "largest leaf": int(leaves.max()),
                "k, c": f"{spec.identifiers.k}, {spec.identifiers.c}",
            }
        }
    )
    qrels = {q: judged for split in ("train", "dev", "test") for q, judged in study.split(split)[1].items()}
    agreement = relevant_prefix_agreement(qrels, identifiers, seed=study.seeds[0])
    runs, _ = decode_nci(fit, study.data, options.decoding())
    test_queries = study.split("test")[0]
    qids = [q for q in test_queries if runs["test"].get(q)]
    from longdoc.models.biencoder import EncoderConfig

    query_encoder = EncoderConfig(
        backbone=options.backbone, max_segments=1, pooling=options.pooling, max_query_length=options.nci_query_length
    )
    vectors = build_encoder("FirstP", query_encoder, study.seeds[0]).encode_queries([test_queries[q] for q in qids])
    top_docs = {q: ranking(runs["test"][q])[:top] for q in qids}
    overlap = prefix_overlap(top_docs, identifiers, vectors, qids, seed=study.seeds[0])
    groups = query_groups(vectors, qids)
    digits, penalty = study.settings(AnalysisSettings).prefix_digits, options.nci_length_penalty
    frames = {
        g: {
            test_queries[q]: retrieved_prefixes(
                sorted(runs["test"][q].items(), key=lambda x: -x[1])[:top], identifiers, digits, penalty
            )
            for q in members
        }
        for g, members in groups.items()
    }
    groups_table = pd.DataFrame(
        [
            {"group": g, "query": query, "top prefixes": ", ".join(frame["prefix"].head(5))}
            for g, queries in frames.items()
            for query, frame in queries.items()
        ]
    )
    embeddings = document_embeddings(
        study.data, options.backbone, options.pooling, spec.identifiers.embedding_length, study.progress
    )
    position = {d: i for i, d in enumerate(study.data.doc_ids)}
    marked = {g: [position[d] for q in members for d in top_docs[q][:3]] for g, members in groups.items()}
    pairs = agreement["relevant pairs"]
    share, background = (
        agreement["relevant pairs sharing the first digit"],
        agreement["random pairs sharing the first digit"],
    )
    if pairs:  # the relevant pairs resampled with replacement (a binomial draw of the shared count)
        draws = np.random.default_rng(study.seeds[0]).binomial(pairs, share, size=10_000) / pairs - background
        low, high = percentile_interval(draws)
        first = verdict(low, high)
        first_text = (
            f"{share:.3f} of {pairs} relevant pairs vs {background:.3f} of random pairs: "
            f"Δ {interval_text(share - background, low, high)}"
        )
    else:
        first, first_text = NOT_SHOWN, "no test query has two relevant documents"
    # the overlap reads one trained model's rankings (the first seed's): the one-seed rule gives no verdict
    second = verdict(overlap["95% CI low"], overlap["95% CI high"], Precondition(False, f"one seed of {system.name}"))
    verdicts = pd.DataFrame(
        [
            {
                "claim": "documents relevant to the same query share identifier prefixes (more than random pairs)",
                "ours": first_text,
                "verdict": first,
            },
            {
                "claim": "similar queries retrieve documents with close identifiers; dissimilar ones do not overlap",
                "ours": f"first-digit overlap {overlap['similar pairs: mean overlap']:.3f} (similar) vs "
                f"{overlap['dissimilar pairs: mean overlap']:.3f} (dissimilar), Δ "
                f"{interval_text(overlap['difference'], overlap['95% CI low'], overlap['95% CI high'])} "
                f"(one seed of {system.name}: a trained system needs two runs or more)",
                "verdict": second,
            },
        ]
    )
    return {
        "tree": tree,
        "agreement": pd.DataFrame({"value": agreement}),
        "overlap": pd.DataFrame({"value": overlap}),
        "groups": frames,
        "groups_table": groups_table,
        "points": tsne_points(embeddings, seed=study.seeds[0]),
        "clusters": [identifiers[d][0] for d in study.data.doc_ids],
        "marked": marked,
        "verdicts": verdicts,
        "text": f"NCI (seed {study.seeds[0]}) on {len(qids)} test queries with results.",
    }


# -- what notebooks 40–45 run ------------------------------------------------------------------------
def headline_rows(study: Study) -> list[System]:
    """The budget ladder's NCI rows: BM25, DSI and NCI (Table 1)."""
    return [s for s in main_systems(study) if s.name in ("NCI", "DSI", "BM25")]


@claim_builder
def headline_claims(study: Study, systems: list[System]) -> list[Claim]:
    return claims_comparing(main_claims(study, systems), {("NCI", "DSI"), ("NCI", "BM25")})


def capacity_rows(study: Study) -> list[System]:
    """Notebook 44's rows: NCI (whose decoding is timed) and Figure 3's capacities."""
    return [nci(study), *capacity_systems(study)]


MAIN = Table(
    "40_nci_main",
    GENERATIVE,
    main_systems,
    claims=main_claims,
    headline=Headline(
        "nci", "NCI", ("nci_train_steps", "nci_dev_evals"), "nci_batch_size", headline_rows, headline_claims
    ),
)
ABLATION = Table("41_nci_ablation", GENERATIVE, ablation_systems, claims=lambda study, rows: ablation_claims(study))
ADAPTOR_LAYERS = Table(
    "42_nci_adaptor_layers", GENERATIVE, adaptor_systems, claims=lambda study, rows: adaptor_claims(study)
)
ALPHA = Table("43_nci_alpha", GENERATIVE, alpha_systems, claims=lambda study, rows: alpha_claims(study))
EFFICIENCY = Table(
    "44_nci_efficiency",
    GENERATIVE,
    capacity_rows,
    claims=lambda study, rows: capacity_claims(study, capacity_systems(study)),
    seeds="first",
)
SEMANTIC_IDS = Table("45_nci_semantic_ids", GENERATIVE, lambda study: [nci(study)], seeds="first")
TABLES = (MAIN, ABLATION, ADAPTOR_LAYERS, ALPHA, EFFICIENCY, SEMANTIC_IDS)
