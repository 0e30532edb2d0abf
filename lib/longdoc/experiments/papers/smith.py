"""The SMITH paper's experiments as rows and claims: Table 5 (main), Figure 4 (maximum document
length), Table 6 (sentence-level layers L1) and Table 7 (combine modes), for notebooks 30–33.

Rows (every one a siamese matcher fine-tuned with the pair BCE under the same budget, its learning
rate chosen on dev; the sweep rows keep SMITH-WP+SP's choice):

- ``MatchBERT-N``: the backbone over the first N tokens (``matchbert_lengths``; the paper: 256, 512).
- ``HAN``: :mod:`longdoc.models.han` over the same sentence blocks as SMITH.
- ``SMITH-Short``: SMITH from the backbone, all its layers as the sentence level, ``short_max_blocks``
  blocks of ``short_block_length`` (the paper: 4 × 128), no pre-training.
- ``SMITH-NP``: SMITH with every weight random, no pre-training (the paper's SMITH-NP).
- ``SMITH-WP`` / ``SMITH-WP+SP``: SMITH (L1 = ``sentence_layers``, L2 = ``document_layers``,
  ``max_sentence_blocks`` blocks of ``sentence_block_length``) pre-trained with masked words, and
  with masked words plus masked sentence blocks. Deviation at every scale but ``paper``'s data: the
  paper pre-trains from scratch on 714,800 Wikipedia documents; here pre-training continues from the
  backbone on the corpus documents outside every dev and test pair, once, seed = first seed.
- ``Longtriever`` and ``SeDR``: the retrieval papers' encoders as siamese matchers over
  ``max_blocks`` × ``block_size`` tokens, so the four papers meet on one task.

Masked word prediction masks 15% of whole words (BERT's ratio, which SMITH follows; the study's
``mlm_ratio`` is Longtriever's 30%).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from longdoc.experiments.families.matching import MATCHING, Matcher, fit_parameters
from longdoc.experiments.families.pretraining import PretrainingSettings
from longdoc.experiments.paper import paper_beside_by_collection
from longdoc.experiments.paper import paper_value as reported
from longdoc.experiments.settings import EncoderSettings, settings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import Headline, System, Table
from longdoc.experiments.verdicts import FIGURE_ONLY, Claim, claim_builder, claims_comparing
from longdoc.models.han import HanConfig
from longdoc.models.smith import COMBINE_MODES, SmithConfig
from longdoc.train.pretrain import PretrainConfig

PAPER = "smith"
SMITH_MLM_RATIO = 0.15


@settings
class SmithSettings:
    """SMITH's two-level encoder, its pre-training task and the Table 5 baselines' lengths."""

    backbone: str
    precision: str
    sentence_block_length: int  # L_s
    max_sentence_blocks: int
    sentence_layers: int  # L1
    document_layers: int  # L2
    masked_blocks: int
    matchbert_lengths: list
    short_block_length: int
    short_max_blocks: int


@settings
class ScratchSettings:
    """The dev grid of the rows whose weights start random (HAN, SMITH-NP)."""

    scratch_learning_rates: list


@settings
class LengthSweep:
    """Figure 4's maximum document lengths (sentence blocks)."""

    sweep_max_sentence_blocks: list


@settings
class LayerSweep:
    """Table 6's sentence-level layers L1."""

    sweep_sentence_layers: list


def smith_encoder(study: Study, **changes) -> SmithConfig:
    p = study.settings(SmithSettings)
    fields = dict(
        backbone=p.backbone,
        segment_length=p.sentence_block_length,
        max_segments=p.max_sentence_blocks,
        sentence_layers=p.sentence_layers,
        document_layers=p.document_layers,
        precision=p.precision,
    )
    return SmithConfig(**(fields | changes))


def smith_pretraining(study: Study, block_prediction: bool) -> PretrainConfig:
    """SMITH-WP (``block_prediction=False``) or SMITH-WP+SP pre-training under the study's budget."""
    return study.settings(PretrainingSettings).config(
        study.seeds[0],
        mlm_ratio=SMITH_MLM_RATIO,
        masked_blocks=study.settings(SmithSettings).masked_blocks,
        block_prediction=block_prediction,
    )


def tokens(encoder) -> int:
    return encoder.segment_length * encoder.max_segments


def smith_wp_sp(study: Study, name: str = "SMITH-WP+SP", settings_from: System | None = None, **changes) -> System:
    spec = Matcher("SMITH", smith_encoder(study, **changes), pretrain=smith_pretraining(study, True))
    return System(name, spec, settings_from=settings_from, paper_name="SMITH-WP+SP")


def main_systems(study: Study) -> list[System]:
    p, encoding = study.settings(SmithSettings), study.settings(EncoderSettings)
    rows = [
        System(
            f"MatchBERT-{n}",
            Matcher("MatchBERT", encoding.encoder("FirstP", segment_length=n, pooling="cls")),
            paper_name="MatchBERT",
        )
        for n in p.matchbert_lengths
    ]
    smith = smith_encoder(study)
    scratch = tuple(study.settings(ScratchSettings).scratch_learning_rates)
    han = HanConfig(backbone=p.backbone, segment_length=p.sentence_block_length, max_segments=p.max_sentence_blocks)
    rows.append(System("HAN", Matcher("HAN", han), paper_name="HAN", learning_rates=scratch))
    short = smith_encoder(
        study, segment_length=p.short_block_length, max_segments=p.short_max_blocks, sentence_layers=0
    )
    rows.append(System("SMITH-Short", Matcher("SMITH", short), paper_name="SMITH-Short"))
    rows.append(
        System(
            "SMITH-NP",
            Matcher("SMITH", replace(smith, random_init=True)),
            paper_name="SMITH-NP",
            learning_rates=scratch,
        )
    )
    rows.append(
        System("SMITH-WP", Matcher("SMITH", smith, pretrain=smith_pretraining(study, False)), paper_name="SMITH-WP")
    )
    rows.append(smith_wp_sp(study))
    rows.append(System(FROM_BACKBONE, Matcher("SMITH", smith)))  # the start WP and WP+SP must beat
    rows.append(System("Longtriever", Matcher("Longtriever", encoding.encoder("Longtriever"))))
    rows.append(System("SeDR", Matcher("SeDR", encoding.encoder("SeDR"))))
    return rows


FROM_BACKBONE = "SMITH from the backbone"  # SMITH-WP's model and start, without the pre-training


def single_seed(systems: list[System]) -> list[System]:
    """Rows that no Table 5 claim compares (the shorter MatchBERT rows, Longtriever, SeDR): under the
    ``cpu`` budget they run the first seed only, the claims' rows every seed."""
    matchbert = [s for s in systems if s.spec.model == "MatchBERT"]
    return [
        s for s in systems if s.spec.model in ("Longtriever", "SeDR") or (s in matchbert and s is not matchbert[-1])
    ]


def paper_value(system: str, measure: str = "Accuracy", dataset: str = "Wiki65K", table: str = "Table 5") -> float:
    return reported(PAPER, measure, system=system, dataset=dataset, table=table)


DATASETS = ("Wiki65K", "AAN104K")  # the paper's two collections


def contradicted(better: str, worse: str, table: str = "Table 5") -> str:
    """Where the paper's own numbers go against its claim "``better`` > ``worse``" on one of its
    collections, a note naming it and the collection whose direction the claim (and our test) takes."""
    against = [
        d for d in DATASETS if paper_value(better, dataset=d, table=table) <= paper_value(worse, dataset=d, table=table)
    ]
    if not against or len(against) == len(DATASETS):
        return ""
    holds = [d for d in DATASETS if d not in against]
    return (
        f" (the paper's own {', '.join(against)} numbers contradict it; the claim, and our test, take "
        f"{', '.join(holds)}'s direction)"
    )


def quoted(better: str, worse: str) -> str:
    """Table 5's accuracies of two rows on both collections, as a claim quotes them."""
    return "; ".join(
        f"{d}: {paper_value(better, dataset=d):.4f} vs {paper_value(worse, dataset=d):.4f}" for d in DATASETS
    ) + contradicted(better, worse)


@claim_builder
def main_claims(study: Study, systems: list[System]) -> list[Claim]:
    """Table 5's claims, worded for what is compared here (both collections' accuracies quoted)."""
    names = [s.name for s in systems]
    longest_matchbert = [n for n in names if n.startswith("MatchBERT")][-1]
    short = next(s for s in systems if s.name == "SMITH-Short")
    same_length = [
        s.name
        for s in systems
        if s.spec.model == "MatchBERT" and s.spec.encoder.segment_length >= tokens(short.spec.encoder)
    ]
    flat = same_length[0] if same_length else longest_matchbert

    return [
        Claim(
            "masked sentence-block prediction adds to word prediction (WP+SP > WP)",
            "SMITH-WP+SP",
            "SMITH-WP",
            quoted("SMITH-WP+SP", "SMITH-WP"),
            "Accuracy",
            pretraining=True,
        ),
        Claim(
            "pre-training helps (WP > NP; here WP continues from the backbone, NP starts random)",
            "SMITH-WP",
            "SMITH-NP",
            quoted("SMITH-WP", "SMITH-NP"),
            "Accuracy",
            pretraining=True,
        ),
        Claim(
            "pre-training helps (WP+SP > NP; here WP+SP continues from the backbone, NP starts random)",
            "SMITH-WP+SP",
            "SMITH-NP",
            quoted("SMITH-WP+SP", "SMITH-NP"),
            "Accuracy",
            pretraining=True,
        ),
        *(
            Claim(
                f"pre-training helps at the same start ({name} > {FROM_BACKBONE}: our reading of WP > NP "
                "when pre-training continues from the backbone)",
                name,
                FROM_BACKBONE,
                quoted(name, "SMITH-NP"),
                "Accuracy",
                pretraining=True,
            )
            for name in ("SMITH-WP", "SMITH-WP+SP")
        ),
        Claim(
            f"SMITH over longer inputs beats MatchBERT (WP+SP > {longest_matchbert}; WP+SP is also pre-trained on "
            "this corpus, MatchBERT is not)",
            "SMITH-WP+SP",
            longest_matchbert,
            quoted("SMITH-WP+SP", "MatchBERT"),
            "Accuracy",
        ),
        Claim(
            f"the hierarchy helps at the same start (SMITH-Short > {flat}: both from the backbone, no pre-training)",
            "SMITH-Short",
            flat,
            quoted("SMITH-Short", "MatchBERT"),
            "Accuracy",
        ),
        Claim(
            "longer inputs beat SMITH-Short (WP+SP > Short; WP+SP is also pre-trained, Short is not, as in Table 5)",
            "SMITH-WP+SP",
            "SMITH-Short",
            quoted("SMITH-WP+SP", "SMITH-Short"),
            "Accuracy",
        ),
        Claim("WP+SP beats HAN", "SMITH-WP+SP", "HAN", quoted("SMITH-WP+SP", "HAN (NAACL16)"), "Accuracy"),
    ]


def length_name(blocks: int, study: Study) -> str:
    return f"{blocks} × {study.settings(SmithSettings).sentence_block_length} tokens"


def length_systems(study: Study, main: System) -> list[System]:
    """Figure 4: SMITH-WP+SP reading at most 2 .. N sentence blocks (fine-tuning and evaluation; the
    pre-trained model is the main row's, as the paper varies the looped blocks of one model)."""
    encoder = main.spec.encoder
    return [
        replace(
            main,
            name=length_name(n, study),
            settings_from=main,
            spec=replace(main.spec, encoder=replace(encoder, max_segments=n), pretrain_encoder=encoder),
        )
        if n != encoder.max_segments
        else replace(main, name=length_name(n, study))
        for n in study.settings(LengthSweep).sweep_max_sentence_blocks
    ]


def layer_name(layers: int) -> str:
    return f"L1 = {layers}"


def layer_systems(study: Study, main: System) -> list[System]:
    """Table 6: SMITH-WP+SP with L1 sentence-level layers, each pre-trained with its own L1."""
    return [
        smith_wp_sp(
            study,
            layer_name(n),
            settings_from=main if n != main.spec.encoder.sentence_layers else None,
            sentence_layers=n,
        )
        for n in study.settings(LayerSweep).sweep_sentence_layers
    ]


def combine_systems(study: Study, main: System) -> list[System]:
    """Table 7: SMITH-WP+SP fine-tuned with each combine mode (one pre-trained model: the combine
    layers are fine-tuning parameters)."""
    encoder = main.spec.encoder
    return [
        replace(
            main,
            name=mode,
            settings_from=main,
            spec=replace(main.spec, encoder=replace(encoder, combine=mode), pretrain_encoder=encoder),
        )
        if mode != encoder.combine
        else replace(main, name=mode)
        for mode in COMBINE_MODES
    ]


def paper_beside(
    table: pd.DataFrame, systems: list[System], paper_table: str, measures: list[str], by: str = "paper_name"
) -> pd.DataFrame:
    """The paper's values (both collections) beside ``table``'s rows (one per system, in order): by each
    system's ``paper_name`` (Table 5) or by our row name (``by="name"``: Tables 6 and 7)."""
    return paper_beside_by_collection(
        table,
        {s.name: getattr(s, by) for s in systems},
        PAPER,
        paper_table,
        {dataset: measures for dataset in ("Wiki65K", "AAN104K")},
    )


def costs(study: Study) -> pd.DataFrame:
    """Parameters, training seconds per step and corpus encoding seconds of each system's first run."""
    rows = {}
    for name, result in study.results.items():
        fit = result.fits[0]
        steps = max(1, fit.last["config"]["steps"])
        rows[name] = {
            "parameters (M)": fit_parameters(fit) / 1e6,
            "training s/step": fit.last["train_seconds"] / steps,
            "corpus encoding s": fit.history.get("encode_seconds"),
        }
    return pd.DataFrame(rows).T


def pair_counts(study) -> pd.DataFrame:
    """Pairs per split with the half-width of a 95% interval of an accuracy near 0.5 (normal approximation)."""
    counts = pd.DataFrame(study.data.counts()).T
    counts["95% half-width of accuracy"] = [1.96 * (0.25 / n) ** 0.5 for n in counts["pairs"]]
    counts["ranking sources"] = [len(study.data.ranking_qrels(split)) for split in counts.index]
    return counts


def pretraining_table(study, systems: list[System]) -> pd.DataFrame:
    """First- and last-tenth losses of each pre-trained row's pre-training (the head warm-up and the full phase)."""
    rows = {r.name: r.pretraining for r in (study.results[s.name] for s in systems) if r.pretraining}
    return pd.DataFrame(rows).T


RANKING = ("MRR@100", "R@10")  # the test ranking of each source's linked pages (not in the paper's tables)


def dev_and_test(
    study,
    names: list[str],
    measures: list[str] = ("Accuracy", "F1"),
    intervals: bool = False,
    ranking: bool = True,
) -> pd.DataFrame:
    """Dev (what the paper reports for Figure 4 and Tables 6-7) and test, side by side; with
    ``intervals``, each mean's 95% interval beside it (for the sweep figures); ``ranking``: with the test
    ranking measures (else :func:`test_ranking` shows them apart)."""
    dev = study.table(names, split="dev", intervals=intervals)
    test = study.table(names, split="test", intervals=intervals)

    def columns(chosen):
        return [c for m in chosen for c in ([m, f"{m} 95% low", f"{m} 95% high"] if intervals else [m])]

    frame = pd.concat(
        [
            dev[columns(measures)].add_prefix("dev "),
            test[columns([*measures, *(RANKING if ranking else ())])].add_prefix("test "),
        ],
        axis=1,
    )
    frame.insert(
        len(measures),
        "dev Accuracy at σ = 0.5",
        [  # the paper's fixed threshold, cos = 0: not tuned on dev
            pd.Series(
                [o.metrics(study.data, "dev", threshold=0.0)["Accuracy"] for o in study.results[n].outcomes]
            ).mean()
            for n in names
        ],
    )
    frame["seeds"] = test["seeds"]
    return frame


def test_ranking(study, names: list[str]) -> pd.DataFrame:
    """Each row's test ranking measures (mean over seeds), apart from the pair measures of the paper's
    tables: rows that differ by little more than float rounding (at the smoke profile's 2 steps, the
    attention combine is still the mean) can swap near-tied pages, so these move between CPUs."""
    return study.table(names, split="test")[[*RANKING, "seeds"]].add_prefix("test ")


@claim_builder
def sweep_claims(first: str, others: list[str], statement: str, paper: str) -> list[Claim]:
    return [Claim(statement.format(better=name, worse=first), name, first, paper, "Accuracy") for name in others]


@claim_builder
def combine_claims() -> list[Claim]:
    """Table 7: normal beats the three other modes; attention beats sum- and mean-concat."""

    def quoted_modes(a: str, b: str) -> str:
        a, b = "SMITH-WP+SP " + a, "SMITH-WP+SP " + b
        return "; ".join(
            f"{d} dev: {paper_value(a, dataset=d, table='Table 7'):.4f} vs "
            f"{paper_value(b, dataset=d, table='Table 7'):.4f}"
            for d in DATASETS
        ) + contradicted(a, b, "Table 7")

    claims = [
        Claim(f"normal beats {mode}", "normal", mode, quoted_modes("normal", mode), "Accuracy")
        for mode in ("sum-concat", "mean-concat", "attention")
    ]
    return claims + [
        Claim(f"attention beats {mode}", "attention", mode, quoted_modes("attention", mode), "Accuracy")
        for mode in ("sum-concat", "mean-concat")
    ]


# -- what notebooks 30–33 run ------------------------------------------------------------------------
def headline_rows(study: Study) -> list[System]:
    """The budget ladder's SMITH rows: SMITH-WP+SP, SMITH-NP and the longest MatchBERT (Table 5)."""
    table = main_systems(study)
    longest = [s for s in table if s.spec.model == "MatchBERT"][-1]
    return [s for s in table if s.name in ("SMITH-WP+SP", "SMITH-NP")] + [longest]


@claim_builder
def headline_claims(study: Study, systems: list[System]) -> list[Claim]:
    matchbert = next(s.name for s in systems if s.spec.model == "MatchBERT")
    pairs = {("SMITH-WP+SP", "SMITH-NP"), ("SMITH-WP+SP", matchbert)}
    return claims_comparing(main_claims(study, main_systems(study)), pairs)


def length_rows(study: Study) -> list[System]:
    return length_systems(study, smith_wp_sp(study))


def layer_rows(study: Study) -> list[System]:
    return layer_systems(study, smith_wp_sp(study))


def combine_rows(study: Study) -> list[System]:
    return combine_systems(study, smith_wp_sp(study))


def sweep_claims_of(statement: str, paper: str):
    """A sweep table's claims: every other point against its first row (:func:`sweep_claims`)."""
    return lambda study, rows: sweep_claims(rows[0].name, [r.name for r in rows[1:]], statement, paper)


MAIN = Table(
    "30_smith_main",
    MATCHING,
    main_systems,
    claims=main_claims,
    single_seed=single_seed,
    headline=Headline("smith", "SMITH", ("train_steps",), "batch_size", headline_rows, headline_claims),
)
LENGTH = Table(
    "31_smith_length",
    MATCHING,
    length_rows,
    claims=sweep_claims_of("longer inputs help ({better} > {worse})", f"Figure 4: rising with length {FIGURE_ONLY}"),
    seeds="claimed",
)
LAYERS = Table(
    "32_smith_layers",
    MATCHING,
    layer_rows,
    claims=sweep_claims_of(
        "more sentence-level layers help ({better} > {worse})", "Table 6: 0.9589 / 0.9594 vs 0.9537 (Wiki65K dev)"
    ),
    seeds="claimed",
)
COMBINE = Table(
    "33_smith_combine", MATCHING, combine_rows, claims=lambda study, rows: combine_claims(), seeds="claimed"
)
TABLES = (MAIN, LENGTH, LAYERS, COMBINE)
