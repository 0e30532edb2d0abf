"""The passage-level baselines every long-document table needs, as :class:`System` rows.

BM25; the backbone without fine-tuning (zero-shot); **FirstP** over the first block (the papers'
"BERT-Passage": the first M tokens) and over N × M tokens (as many as the hierarchical models read,
where the backbone's positions allow); **MaxP** over N independent blocks; and MaxP under the other
start rule, shown once so that the choice of rule is visible. Notebooks 01 and 10 use the same rows,
so they share their cached runs and show the same numbers under the same names.
"""

from __future__ import annotations

from longdoc.experiments.families.retrieval import BM25, RETRIEVAL, Dense
from longdoc.experiments.paper import paper_value
from longdoc.experiments.settings import EncoderSettings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import System, Table
from longdoc.experiments.verdicts import Claim, claim_builder


def other_pooling(pooling: str) -> str:
    return "mean" if pooling == "cls" else "cls"


def firstp_long_length(study: Study) -> int:
    """FirstP over N × M tokens, capped at the backbone's position embeddings (a built backbone's are
    known without building it: a planner names its rows for free)."""
    from longdoc.experiments.backbones import position_embeddings

    encoding = study.settings(EncoderSettings)
    return min(encoding.max_blocks * encoding.block_size, position_embeddings(encoding.backbone))


def baseline_names(study: Study) -> dict[str, str]:
    """The row names of :func:`passage_baselines`, by role."""
    encoding = study.settings(EncoderSettings)
    n, m, long = encoding.max_blocks, encoding.block_size, firstp_long_length(study)
    other = other_pooling(encoding.pooling)
    return {
        "bm25": "BM25",
        "zero_shot": f"zero-shot FirstP 1×{long}",
        "zero_shot_other": f"zero-shot FirstP 1×{long}, {other} pooling",
        "first_block": f"FirstP 1×{m}",
        "first_long": f"FirstP 1×{long}",
        "maxp": f"MaxP {n}×{m}",
        "maxp_other": f"MaxP {n}×{m}, {other} pooling",
    }


def passage_baselines(study: Study) -> list[System]:
    encoding = study.settings(EncoderSettings)
    long, other = firstp_long_length(study), other_pooling(encoding.pooling)
    names = baseline_names(study)
    return [
        System(names["bm25"], BM25(), paper_name="BM25"),
        System(names["zero_shot"], Dense("FirstP", encoding.encoder("FirstP", segment_length=long), protocol=None)),
        System(
            names["zero_shot_other"],
            Dense("FirstP", encoding.encoder("FirstP", segment_length=long, pooling=other), protocol=None),
        ),
        System(names["first_block"], Dense("FirstP", encoding.encoder("FirstP")), paper_name="FirstP"),
        System(names["first_long"], Dense("FirstP", encoding.encoder("FirstP", segment_length=long))),
        System(names["maxp"], Dense("MaxP", encoding.encoder("MaxP")), paper_name="MaxP"),
        System(names["maxp_other"], Dense("MaxP", encoding.encoder("MaxP", pooling=other))),
    ]


def baseline_pairs(study: Study) -> list[tuple[str, str]]:
    """The comparisons of notebook 01: every row against BM25, MaxP against FirstP (first block) and
    MaxP under the study's start rule against the other rule."""
    names = baseline_names(study)
    return [(name, "BM25") for key, name in names.items() if key != "bm25"] + [
        (names["maxp"], names["first_block"]),
        (names["maxp"], names["maxp_other"]),
    ]


@claim_builder
def passage_claims(study: Study) -> list[Claim]:
    """What the papers report about these baselines on MS MARCO documents."""
    names = baseline_names(study)

    def v(system: str) -> float:
        return paper_value("retrieval_baselines", system=system)

    return [
        Claim(
            "dense retrieval over the first block beats BM25",
            names["first_block"],
            "BM25",
            f"{v('BERT-Passage (first 512 tokens)'):.3f} vs {v('BM25'):.3f} (Longtriever Tables 1–2)",
        ),
        Claim(
            "MaxP beats FirstP over the first block",
            names["maxp"],
            names["first_block"],
            f"{v('STAR(MaxP)'):.3f} vs {v('STAR (first 512 tokens)'):.3f} (SeDR Table 1)",
        ),
    ]


BASELINES = Table("01_baselines", RETRIEVAL, passage_baselines, claims=lambda study, rows: passage_claims(study))
TABLES = (BASELINES,)
