"""The Longtriever paper's experiments as rows and claims: main tables (Tables 1–2), the ablation
(Table 4) and the hyperparameter sweeps (Figure 3), for notebooks 10–13.

Protocols as the paper states them: Tables 2 and 4 fine-tune every model for one iteration with
in-batch negatives only (:data:`~longdoc.experiments.families.retrieval.IN_BATCH`); Table 1 fine-tunes
Longtriever with BM25 negatives, then with its own (:func:`table1_protocol`). Ablation rows and sweep points keep row I's
dev-chosen learning rate (an ablation changes one component and keeps the rest), and the record
says so.
"""

from __future__ import annotations

import math
from dataclasses import replace

from longdoc.experiments.families.pretraining import PretrainingSettings
from longdoc.experiments.families.retrieval import RETRIEVAL, Dense, Protocol
from longdoc.experiments.paper import paper_value
from longdoc.experiments.papers.baselines import baseline_names, passage_baselines
from longdoc.experiments.settings import EncoderSettings, settings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import Headline, System, Table
from longdoc.experiments.verdicts import FIGURE_ONLY, Claim, claim_builder
from longdoc.train.pretrain import PretrainConfig

# Table 4's rows: (pre-training objective or None, encoder switches)
ABLATIONS = {
    "I. Longtriever": ("lmae+mlm", {}),
    "II. I w/o LMAE": ("mlm", {}),
    "III. II w/o MLM": (None, {}),
    "IV. III w/o [DOC]": (None, {"doc_token": False}),
    "V. IV w/o inter-block": (None, {"doc_token": False, "inter_block": False}),
}


@settings
class LongtrieverSettings:
    """Longtriever's pre-training objective (section 3.2) and corpus."""

    pretrain_corpus: str
    decoder_init: str
    mlm_ratio: float
    lmae_ratio: float


@settings
class IterativeSettings:
    """Table 1's fine-tuning schedule."""

    hard_negatives: int
    iterations: int


def table1_protocol(hard_negatives: int, iterations: int) -> Protocol:
    """Section 4.2 / Table 1: one iteration with BM25 negatives, then iterations with the model's own
    negatives (the paper: three in all, after MS MARCO passage fine-tuning, which we skip); each later
    iteration's training order continues after the one before (new queries first)."""
    return Protocol(
        f"{hard_negatives} BM25 negative(s) per query, then {iterations - 1} iteration(s) with the model's "
        "own negatives (Longtriever Table 1)",
        "bm25",
        hard_negatives,
        iterations,
    )


def paper_mrr(name: str) -> float:
    return paper_value("longtriever", our_name=name)


def pretrain_config(study: Study, **changes) -> PretrainConfig:
    """LMAE + MLM pre-training under the study's budget (seeded with the first seed: pre-trained once,
    fine-tuned once per seed, as the paper pre-trains once and fine-tunes five times)."""
    objective = study.settings(LongtrieverSettings)
    fields = dict(mlm_ratio=objective.mlm_ratio, lmae_ratio=objective.lmae_ratio, decoder_init=objective.decoder_init)
    return study.settings(PretrainingSettings).config(study.seeds[0], **(fields | changes))


def longtriever(
    study: Study, name: str | None = None, pretrain: PretrainConfig | None = None, **encoder_changes
) -> System:
    """Longtriever pre-trained with the study's budget (LMAE + MLM), then fine-tuned (Table 2's protocol)."""
    encoding = study.settings(EncoderSettings)
    spec = Dense(
        "Longtriever",
        encoding.encoder("Longtriever", **encoder_changes),
        pretrain=pretrain or pretrain_config(study),
        pretrain_corpus=study.settings(LongtrieverSettings).pretrain_corpus,
    )
    return System(name or f"Longtriever {encoding.max_blocks}×{encoding.block_size}", spec, paper_name="Longtriever")


def main_rows(study: Study) -> dict[str, System]:
    """Tables 1–2's own rows by role: PARADE, Hi-Transformer, Longtriever (in-batch, one iteration), the
    same model without pre-training (Table 4's row III: the row to read where pre-training fails its
    precondition at this budget), and Longtriever under Table 1's iterative protocol."""
    encoding = study.settings(EncoderSettings)
    n, m = encoding.max_blocks, encoding.block_size
    schedule = study.settings(IterativeSettings)
    row = longtriever(study)
    iterative = replace(
        row,
        name=f"{row.name}, Table 1 protocol",
        paper_name="Longtriever (iterative)",
        settings_from=row,
        spec=replace(row.spec, protocol=table1_protocol(schedule.hard_negatives, schedule.iterations)),
    )
    return {
        "parade": System(f"PARADE {n}×{m}", Dense("PARADE", encoding.encoder("PARADE")), paper_name="PARADE"),
        "hi_transformer": System(
            f"Hi-Transformer {n}×{m}",
            Dense("Hi-Transformer", encoding.encoder("Hi-Transformer")),
            paper_name="Hi-Transformer",
        ),
        "longtriever": row,
        "plain": System(f"{row.name} w/o pre-training", row.spec.without_pretraining(), paper_name="III. II w/o MLM"),
        "iterative": iterative,
    }


def main_systems(study: Study) -> list[System]:
    """Tables 1–2: the passage baselines, then :func:`main_rows`."""
    return passage_baselines(study) + list(main_rows(study).values())


@claim_builder
def main_claims(study: Study, systems: list[System]) -> list[Claim]:
    """Tables 1–2's claims on the rows ``systems`` ran (by :func:`main_rows`' and
    :func:`~longdoc.experiments.papers.baselines.baseline_names`' roles)."""
    rows, names = main_rows(study), baseline_names(study)
    lt, parade, hit, iterative = (rows[k].name for k in ("longtriever", "parade", "hi_transformer", "iterative"))
    first = names["first_block"]
    iterations = study.settings(IterativeSettings).iterations
    v = paper_mrr
    return [
        Claim(
            "Longtriever beats BERT-Passage (the first block only)",
            lt,
            first,
            f"{v('Longtriever'):.3f} vs {v('FirstP'):.3f} (Table 2)",
        ),
        Claim("Longtriever beats BERT-PARADE", lt, parade, f"{v('Longtriever'):.3f} vs {v('PARADE'):.3f} (Table 2)"),
        Claim(
            "Longtriever beats Hi-Transformer",
            lt,
            hit,
            f"{v('Longtriever'):.3f} vs {v('Hi-Transformer'):.3f} (Table 2)",
        ),
        Claim("BERT-PARADE beats BERT-Passage", parade, first, f"{v('PARADE'):.3f} vs {v('FirstP'):.3f} (Table 2)"),
        Claim(
            "Longtriever (Table 1 protocol) beats BM25",
            iterative,
            names["bm25"],
            f"{v('Longtriever (iterative)'):.3f} vs {v('BM25'):.3f} (Table 1)",
        ),
        Claim(
            f"BM25 then self-mined negatives beat one in-batch iteration (ours: {iterations} iterations, "
            f"{iterations}× the fine-tuning steps)",
            iterative,
            lt,
            f"{v('Longtriever (iterative)'):.3f} (Table 1: 3 iterations after MS MARCO passage fine-tuning) vs "
            f"{v('Longtriever'):.3f} (Table 2)",
        ),
    ]


def headline_rows(study: Study) -> list[System]:
    """The budget ladder's Longtriever rows: MaxP over the same blocks, Longtriever, and Longtriever
    without pre-training."""
    rows = main_rows(study)
    maxp = next(s for s in passage_baselines(study) if s.name == baseline_names(study)["maxp"])
    return [maxp, rows["longtriever"], rows["plain"]]


@claim_builder
def headline_claims(study: Study, systems: list[System]) -> list[Claim]:
    maxp, lt, plain = (s.name for s in headline_rows(study))
    v = paper_mrr
    return [
        Claim(
            "Longtriever beats MaxP over the same blocks",
            lt,
            maxp,
            f"no MaxP row in Table 2; Longtriever {v('Longtriever'):.3f} vs BERT-PARADE {v('PARADE'):.3f}, its "
            "closest multi-block baseline",
        ),
        Claim(
            "pre-training helps (Longtriever > the same model without pre-training)",
            lt,
            plain,
            f"{v('I. Longtriever'):.3f} vs {v('III. II w/o MLM'):.3f} (Table 4, I vs III)",
            pretraining=True,
        ),
    ]


def ablation_systems(study: Study) -> list[System]:
    """Table 4's rows I–V; rows II–V take row I's dev-chosen learning rate."""
    first = longtriever(study, "I. Longtriever")
    encoding = study.settings(EncoderSettings)
    rows = [first]
    for name, (objective, switches) in list(ABLATIONS.items())[1:]:
        pretrain = None if objective is None else replace(first.spec.pretrain, lmae=objective == "lmae+mlm")
        spec = replace(first.spec, encoder=encoding.encoder("Longtriever", **switches), pretrain=pretrain)
        rows.append(System(name, spec, settings_from=first, paper_name=name))
    return rows


@claim_builder
def ablation_claims() -> list[Claim]:
    """Table 4's claims; those about pre-training need the start the paper assumes and pre-training that
    learned (:mod:`longdoc.experiments.preconditions`)."""
    names = list(ABLATIONS)
    v = {name: paper_mrr(name) for name in names}
    lmae, mlm, plain, no_doc, no_inter = names
    return [
        Claim("pre-training (LMAE + MLM) helps", lmae, plain, f"{v[lmae]:.3f} vs {v[plain]:.3f}", pretraining=True),
        Claim("LMAE adds to MLM pre-training", lmae, mlm, f"{v[lmae]:.3f} vs {v[mlm]:.3f}", pretraining=True),
        Claim("MLM pre-training helps", mlm, plain, f"{v[mlm]:.3f} vs {v[plain]:.3f}", pretraining=True),
        Claim("the [DOC] token helps", plain, no_doc, f"{v[plain]:.3f} vs {v[no_doc]:.3f}"),
        Claim("the inter-block encoder helps", no_doc, no_inter, f"{v[no_doc]:.3f} vs {v[no_inter]:.3f}"),
    ]


@settings
class BlockSizeSweep:
    """Figure 3a's block sizes at a fixed number of content tokens."""

    sweep_block_sizes: list
    document_tokens: int


@settings
class LmaeRatioSweep:
    """Figure 3b's LMAE masking ratios."""

    sweep_lmae_ratios: list


def block_size_systems(study: Study) -> list[System]:
    """Figure 3a: the full Longtriever at each block size M, the content read per document fixed at
    ``document_tokens`` (N = ceil(document_tokens / (M − 2)) blocks, the last one shorter)."""
    sweep, base = study.settings(BlockSizeSweep), longtriever(study)
    tokens, encoding = sweep.document_tokens, study.settings(EncoderSettings)
    rows = []
    for size in sweep.sweep_block_sizes:
        blocks = math.ceil(tokens / (size - 2))
        encoder = encoding.encoder("Longtriever", segment_length=size, max_segments=blocks, document_tokens=tokens)
        rows.append(
            replace(
                base, name=f"M = {size} (N = {blocks})", spec=replace(base.spec, encoder=encoder), settings_from=base
            )
        )
    return rows


def lmae_ratio_systems(study: Study) -> list[System]:
    """Figure 3b: the full Longtriever pre-trained at each LMAE masking ratio (MLM ratio fixed)."""
    base = longtriever(study)
    return [
        replace(
            base,
            name=f"LMAE ratio {ratio}",
            settings_from=base,
            spec=replace(base.spec, pretrain=replace(base.spec.pretrain, lmae_ratio=ratio)),
        )
        for ratio in study.settings(LmaeRatioSweep).sweep_lmae_ratios
    ]


@claim_builder
def rising_claims(names: list[str], statement: str, paper: str) -> list[Claim]:
    """A trend claim as consecutive pairs: each point beats the one before it."""
    return [
        Claim(f"{statement}: {later} above {earlier}", later, earlier, paper)
        for earlier, later in zip(names, names[1:])
    ]


@claim_builder
def ratio_claims(systems: list[System]) -> list[Claim]:
    """Figure 3b's claim, a peak at 0.5: the 0.5 point beats every other point (testable where
    pre-training works at both ratios compared)."""
    by_ratio = {system.spec.pretrain.lmae_ratio: system for system in systems}
    if 0.5 not in by_ratio:
        return []
    peak = by_ratio[0.5]
    return [
        Claim(
            f"LMAE ratio 0.5 beats {ratio}",
            peak.name,
            system.name,
            f"Figure 3b: peak at 0.5 {FIGURE_ONLY}",
            pretraining=True,
        )
        for ratio, system in by_ratio.items()
        if ratio != 0.5
    ]


# -- what notebooks 10–13 run ------------------------------------------------------------------------
MAIN = Table(
    "10_longtriever_main",
    RETRIEVAL,
    main_systems,
    claims=main_claims,
    headline=Headline("longtriever", "Longtriever", ("train_steps",), "batch_size", headline_rows, headline_claims),
)
ABLATION = Table("11_longtriever_ablation", RETRIEVAL, ablation_systems, claims=lambda study, rows: ablation_claims())
BLOCK_SIZE = Table(
    "12_block_size",
    RETRIEVAL,
    block_size_systems,
    claims=lambda study, rows: rising_claims(
        [s.name for s in rows],
        "a larger block size helps",
        f"Figure 3a: rises steadily from M = 64 to 512 {FIGURE_ONLY}",
    ),
    seeds="claimed",
)
LMAE_RATIO = Table(
    "13_lmae_ratio", RETRIEVAL, lmae_ratio_systems, claims=lambda study, rows: ratio_claims(rows), seeds="claimed"
)
TABLES = (MAIN, ABLATION, BLOCK_SIZE, LMAE_RATIO)
