"""The passage-level baselines every long-document table needs, as :class:`System` rows.

BM25; the backbone without fine-tuning (zero-shot); **FirstP** over the first block (the papers'
"BERT-Passage": the first M tokens) and over N × M tokens (as many as the hierarchical models read,
where the backbone's positions allow); **MaxP** over N independent blocks; and MaxP under the other
start rule, shown once so that the choice of rule is visible. Notebooks 01 and 10 use the same rows,
so they share their cached runs and show the same numbers under the same names.
"""

from __future__ import annotations

from longdoc.experiments.findings import Claim
from longdoc.experiments.paper import paper_results
from longdoc.experiments.study import System, Study


def other_pooling(pooling: str) -> str:
    return "mean" if pooling == "cls" else "cls"


def firstp_long_length(study: Study) -> int:
    """FirstP over N × M tokens, capped at the backbone's position embeddings."""
    from transformers import AutoConfig

    from longdoc.models.backbone import resolve_backbone

    positions = AutoConfig.from_pretrained(resolve_backbone(study.params["backbone"])).max_position_embeddings
    return min(study.params["max_blocks"] * study.params["block_size"], positions)


def passage_baselines(study: Study) -> list[System]:
    n, m, pooling = study.params["max_blocks"], study.params["block_size"], study.params["pooling"]
    long = firstp_long_length(study)
    other = other_pooling(pooling)
    return [
        System("BM25", "BM25", paper_name="BM25"),
        System(f"zero-shot FirstP 1×{long}", "FirstP", study.encoder("FirstP", segment_length=long), protocol=None),
        System(f"zero-shot FirstP 1×{long}, {other} pooling", "FirstP",
               study.encoder("FirstP", segment_length=long, pooling=other), protocol=None),
        System(f"FirstP 1×{m}", "FirstP", study.encoder("FirstP"), paper_name="FirstP"),
        System(f"FirstP 1×{long}", "FirstP", study.encoder("FirstP", segment_length=long)),
        System(f"MaxP {n}×{m}", "MaxP", study.encoder("MaxP"), paper_name="MaxP"),
        System(f"MaxP {n}×{m}, {other} pooling", "MaxP", study.encoder("MaxP", pooling=other)),
    ]


def passage_claims(study: Study) -> list[Claim]:
    """What the papers report about these baselines on MS MARCO documents."""
    n, m = study.params["max_blocks"], study.params["block_size"]
    paper = paper_results("retrieval_baselines").set_index("system")["MRR@100"]
    return [
        Claim("dense retrieval over the first block beats BM25", f"FirstP 1×{m}", "BM25",
              f"{paper['BERT-Passage (first 512 tokens)']:.3f} vs {paper['BM25'].iloc[0]:.3f} (Longtriever Tables 1–2)"),
        Claim("MaxP beats FirstP over the first block", f"MaxP {n}×{m}", f"FirstP 1×{m}",
              f"{paper['STAR(MaxP)']:.3f} vs {paper['STAR (first 512 tokens)']:.3f} (SeDR Table 1)"),
    ]
