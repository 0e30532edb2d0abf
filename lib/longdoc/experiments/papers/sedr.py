"""The SeDR paper's experiments as rows and claims: Table 1 (main rows and ablation), Table 2
(segment-interaction patterns), Figure 6 (cache size C and hardness K), for notebooks 20–22
(23 and 24 read the same rows).

Protocol, as the paper's Implementation Details state it: every dense row but BM25 and the warm start
itself starts from STAR and samples one static hard negative per query from STAR's top K (K = 200
without the late cache, 100 with it, C = 50). STAR is not built here: the harness's FirstP over the
first block, fine-tuned with in-batch negatives (the recipe of the paper's In-Batch Neg row, whose
value is shown beside it), plays its role. Warm-started rows continue from its weights, so they get
its steps and their own, as SeDR and STAR(MaxP) continue from STAR in the paper (their training order
continues after STAR's: they see new queries first, ``TrainConfig.first_step``); MaxP against SeDR
is the equal-budget comparison. Every row reads [CLS] (STAR's ``RobertaDot`` does). FirstP, MaxP and
SeDR each choose their learning rate on dev (the paper uses 5e-5 for all); ablation rows, Table 2's
variants and the sweep points keep SeDR's choice ("all these variant models use Late-Cache Negative
and the same hyper-parameters setting"), which favours SeDR over them where the grid matters.
Differences from the release: steps hold a fixed number of queries (the release fills a step with up
to 17 positive segments, so its number of queries varies) and AdamW replaces LAMB, as for every row
of the study.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from longdoc.experiments.families.retrieval import (
    BM25,
    COST_REPEATS,
    RETRIEVAL,
    Dense,
    Protocol,
    fit_costs,
    fit_index,
)
from longdoc.experiments.paper import paper_value as reported
from longdoc.experiments.papers.longtriever import longtriever
from longdoc.experiments.settings import EncoderSettings, settings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import Headline, System, Table
from longdoc.experiments.verdicts import FIGURE_ONLY, Claim, claim_builder, claims_comparing
from longdoc.index.dense import DenseIndex

PAPER = "sedr"
INTERACTIONS = {"none": "SeDR-MaxP", "head": "SeDR-Transformer-Head", "global": "SeDR-Global-Attention", "sit": "SeDR"}


@settings
class SedrSettings:
    """SeDR's negatives (Implementation Details): static hard negatives from the warm start's top K,
    and the late cache of C instances."""

    hard_negatives: int
    cache_size: int  # C
    negative_depth: int  # K with the late cache
    negative_depth_without_cache: int  # K without it


@settings
class NegativeSweeps:
    """Figure 6's cache sizes C and hardness K."""

    sweep_cache_sizes: list
    sweep_negative_depths: list


def sedr_protocol(depth: int, cache_size: int, hard_negatives: int = 1) -> Protocol:
    """SeDR's Implementation Details: start from STAR (our stand-in: the warm-start system), one static
    hard negative per query sampled from its top K (200 without the cache, 100 with it), and the
    late-cache queue of C instances."""
    cache = f", late cache C = {cache_size}" if cache_size else ", no late cache"
    return Protocol(
        f"warm start, {hard_negatives} static hard negative(s) from its top {depth}{cache} (SeDR)",
        "warm start",
        hard_negatives,
        1,
        depth,
        cache_size,
    )


def paper_value(system: str, measure: str = "MRR@100") -> float:
    """A value of the paper's Table 1 or 2 by the row's name there (``system`` column)."""
    return reported(PAPER, measure, system=system)


def names(study: Study) -> dict[str, str]:
    encoding = study.settings(EncoderSettings)
    n, m = encoding.max_blocks, encoding.block_size
    return {
        "bm25": "BM25",
        "star": f"FirstP 1×{m}",
        "maxp": f"MaxP {n}×{m} from FirstP",
        "sedr": f"SeDR {n}×{m}",
        "no_sit": "SeDR w/o segment interaction",
        "no_cache": "SeDR w/o late cache",
        "no_cache_one_k": "SeDR w/o late cache, SeDR's K",
        "head": "SeDR-Transformer-Head",
        "global": "SeDR-Global-Attention",
    }


def star(study: Study) -> System:
    """The STAR stand-in: FirstP over the first block reading [CLS], in-batch negatives, one iteration
    (the paper's In-Batch Neg recipe; with ``pooling: cls`` the same run as notebooks 01 and 10's
    FirstP row)."""
    encoder = study.settings(EncoderSettings).encoder("FirstP", pooling="cls")
    return System(names(study)["star"], Dense("FirstP", encoder), paper_name="In-Batch Neg")


def sedr(
    study: Study,
    name: str,
    interaction: str = "sit",
    cache_size: int | None = None,
    depth: int | None = None,
    settings_from: System | None = None,
    paper_name: str = "",
) -> System:
    """A SeDR row warm-started from the STAR stand-in; C and K default to the study's (K without the
    cache: ``negative_depth_without_cache``, as the paper samples from the top 200 then)."""
    p = study.settings(SedrSettings)
    cache = p.cache_size if cache_size is None else cache_size
    depth = depth or (p.negative_depth if cache else p.negative_depth_without_cache)
    encoder = study.settings(EncoderSettings).encoder("SeDR", interaction=interaction, pooling="cls")
    return System(
        name,
        Dense("SeDR", encoder, protocol=sedr_protocol(depth, cache, p.hard_negatives), warm_start=star(study)),
        settings_from=settings_from,
        paper_name=paper_name,
    )


def main_systems(study: Study) -> list[System]:
    """Table 1's reproduced rows: BM25, STAR (stand-in), STAR(MaxP), SeDR and its two ablations, and the
    late cache's ablation at SeDR's own K (Table 1's row changes K too: it samples from the top
    ``negative_depth_without_cache``), so the cache's claim changes one thing."""
    n = names(study)
    p = study.settings(SedrSettings)
    full = sedr(study, n["sedr"], paper_name="SeDR")
    maxp = System(
        n["maxp"],
        Dense(
            "MaxP",
            study.settings(EncoderSettings).encoder("MaxP", pooling="cls"),
            protocol=sedr_protocol(p.negative_depth_without_cache, 0, p.hard_negatives),
            warm_start=star(study),
        ),
        paper_name="STAR(MaxP)",
    )
    return [
        System(n["bm25"], BM25(), paper_name="BM25"),
        star(study),
        maxp,
        full,
        sedr(study, n["no_sit"], interaction="none", settings_from=full, paper_name="SeDR w/o SIT"),
        sedr(study, n["no_cache"], cache_size=0, settings_from=full, paper_name="SeDR w/o cache"),
        sedr(study, n["no_cache_one_k"], cache_size=0, depth=p.negative_depth, settings_from=full),
    ]


@claim_builder
def main_claims(study: Study) -> list[Claim]:
    n, v, p = names(study), paper_value, study.settings(SedrSettings)
    return [
        Claim("SeDR beats STAR(MaxP)", n["sedr"], n["maxp"], f"{v('SeDR'):.3f} vs {v('STAR(MaxP)'):.3f}"),
        Claim(
            "SeDR beats its warm start (the first block)",
            n["sedr"],
            n["star"],
            f"{v('SeDR'):.3f} vs STAR {v('STAR'):.3f} (our warm start is In-Batch Neg's recipe: {v('In-Batch Neg'):.3f})",
        ),
        Claim(
            "STAR(MaxP) beats its warm start (the first block)",
            n["maxp"],
            n["star"],
            f"{v('STAR(MaxP)'):.3f} vs STAR {v('STAR'):.3f}",
        ),
        Claim(
            "segment interaction helps",
            n["sedr"],
            n["no_sit"],
            f"{v('SeDR'):.3f} vs {v('SeDR w/o Segment-Interaction'):.3f}",
        ),
        Claim(
            f"late-cache negatives help at one K (C = {p.cache_size} against C = 0, both from the top "
            f"{p.negative_depth}: our split of Table 1's row)",
            n["sedr"],
            n["no_cache_one_k"],
            f"{v('SeDR'):.3f} vs {v('SeDR w/o Late-Cache Negative'):.3f} (Table 1's row, which changes K too)",
        ),
        Claim(
            f"Table 1's late-cache row: SeDR beats it (two changes: the cache, and K = "
            f"{p.negative_depth_without_cache} without it against {p.negative_depth})",
            n["sedr"],
            n["no_cache"],
            f"{v('SeDR'):.3f} vs {v('SeDR w/o Late-Cache Negative'):.3f}",
        ),
        Claim(
            "SeDR w/o segment interaction still beats STAR(MaxP)",
            n["no_sit"],
            n["maxp"],
            f"{v('SeDR w/o Segment-Interaction'):.3f} vs {v('STAR(MaxP)'):.3f}",
        ),
        Claim(
            "SeDR w/o late cache still beats STAR(MaxP)",
            n["no_cache"],
            n["maxp"],
            f"{v('SeDR w/o Late-Cache Negative'):.3f} vs {v('STAR(MaxP)'):.3f}",
        ),
        Claim("dense retrieval (SeDR) beats BM25", n["sedr"], n["bm25"], f"{v('SeDR'):.3f} vs {v('BM25'):.3f}"),
    ]


def interaction_systems(study: Study) -> list[System]:
    """Table 2's rows (SeDR-Longformer is not built): each variant with the late cache and SeDR's
    dev-chosen learning rate. SeDR-MaxP is the same run as Table 1's "w/o segment interaction"."""
    n = names(study)
    full = sedr(study, n["sedr"], paper_name="SeDR (Table 2)")
    return [
        sedr(study, n["no_sit"], interaction="none", settings_from=full, paper_name="SeDR-MaxP"),
        sedr(study, n["head"], interaction="head", settings_from=full, paper_name="SeDR-Transformer-Head"),
        sedr(study, n["global"], interaction="global", settings_from=full, paper_name="SeDR-Global-Attention"),
        full,
    ]


@claim_builder
def interaction_claims(study: Study) -> list[Claim]:
    n, v = names(study), paper_value
    base = n["no_sit"]
    return [
        Claim(
            "SeDR-Transformer-Head beats SeDR-MaxP",
            n["head"],
            base,
            f"{v('SeDR-Transformer-Head'):.3f} vs {v('SeDR-MaxP'):.3f}",
        ),
        Claim(
            "SeDR-Global-Attention beats SeDR-MaxP",
            n["global"],
            base,
            f"{v('SeDR-Global-Attention'):.3f} vs {v('SeDR-MaxP'):.3f}",
        ),
        Claim("SeDR beats SeDR-MaxP", n["sedr"], base, f"{v('SeDR (Table 2)'):.3f} vs {v('SeDR-MaxP'):.3f}"),
        Claim(
            "SeDR beats SeDR-Transformer-Head",
            n["sedr"],
            n["head"],
            f"{v('SeDR (Table 2)'):.3f} vs {v('SeDR-Transformer-Head'):.3f}",
        ),
        Claim(
            "SeDR beats SeDR-Global-Attention",
            n["sedr"],
            n["global"],
            f"{v('SeDR (Table 2)'):.3f} vs {v('SeDR-Global-Attention'):.3f}",
        ),
    ]


# -- Figure 6: cache size C and hardness K ---------------------------------------------------------
def cache_name(size: int) -> str:
    return f"C = {size}"


def depth_name(depth: int) -> str:
    return f"K = {depth}"


def sweep_systems(study: Study) -> tuple[list[System], list[System]]:
    """Figure 6: SeDR at each cache size C (K fixed at ``negative_depth``) and at each hardness K (C
    fixed at ``cache_size``), at SeDR's dev-chosen learning rate. The point at the study's C and K is
    the main table's SeDR run."""
    p, sweeps = study.settings(SedrSettings), study.settings(NegativeSweeps)
    full = sedr(study, names(study)["sedr"])
    caches = [
        sedr(study, cache_name(c), cache_size=c, depth=p.negative_depth, settings_from=full)
        for c in sweeps.sweep_cache_sizes
    ]
    depths = [sedr(study, depth_name(k), depth=k, settings_from=full) for k in sweeps.sweep_negative_depths]
    return caches, depths


EQUIVALENCE_MARGIN = 0.01  # MRR@100: our threshold for the paper's "near performance" (Figure 6 gives no values)


@claim_builder
def sweep_claims(study: Study) -> list[Claim]:
    """Figure 6's statements as comparisons of neighbouring points, around the study's C (the paper's
    default, 50) and between neighbouring K (one seed: intervals over queries)."""
    sweeps = study.settings(NegativeSweeps)
    caches, depths = sorted(sweeps.sweep_cache_sizes), sorted(sweeps.sweep_negative_depths)
    default = study.settings(SedrSettings).cache_size
    claims = []
    if default not in caches:
        return claims
    if 0 in caches and default:
        claims.append(
            Claim(
                f"late cache (C = {default}) beats no cache (C = 0)",
                cache_name(default),
                cache_name(0),
                f"{paper_value('SeDR'):.3f} vs {paper_value('SeDR w/o Late-Cache Negative'):.3f} (Table 1's row, "
                "which changes K too; Figure 6a plots the C curve without values)",
            )
        )
    smaller = [c for c in caches if 0 < c < default]
    if smaller:
        claims.append(
            Claim(
                f"a smaller cache degrades: C = {default} beats C = {smaller[-1]}",
                cache_name(default),
                cache_name(smaller[-1]),
                f"Figure 6a: C < 50 significantly degrades {FIGURE_ONLY}",
            )
        )
    for c in (c for c in caches if c > default):
        claims.append(
            Claim(
                f"C = {c} performs near C = {default} (our threshold: |Δ| < {EQUIVALENCE_MARGIN})",
                cache_name(c),
                cache_name(default),
                f"Figure 6a: above 50, near performance {FIGURE_ONLY}",
                margin=EQUIVALENCE_MARGIN,
            )
        )
    for harder, easier in zip(depths, depths[1:]):
        claims.append(
            Claim(
                f"harder negatives (K = {harder}) give higher MRR@100 than K = {easier}",
                depth_name(harder),
                depth_name(easier),
                f"Figure 6b {FIGURE_ONLY}",
            )
        )
        claims.append(
            Claim(
                f"easier negatives (K = {easier}) give higher R@100 than K = {harder}",
                depth_name(easier),
                depth_name(harder),
                f"Figure 6b {FIGURE_ONLY}",
                measure="R@100",
            )
        )
    return claims


# -- Table 1's and Table 2's cost columns --------------------------------------------------------
def costs(study: Study, system: System, repeats: int = COST_REPEATS) -> dict:
    """Parameters, training time per epoch (the optimizer steps of the first seed's run, scaled to one
    pass over the training queries), index size (vectors, bytes of float32), indexing time (encoding
    the corpus, timed at the dev-best evaluation) and per-query search latency (test queries in one
    batch, top 100 documents, median of ``repeats``) of a fine-tuned system's first-seed run: measured
    when the fit was made, where its model was (:func:`fit_costs`)."""
    return fit_costs(study, study.fit(system), repeats)


def cost_table(study: Study, systems: list[System]) -> pd.DataFrame:
    return pd.DataFrame({s.name: costs(study, s) for s in systems if s.spec.trained}).T


# -- Figure 5: segment vectors ---------------------------------------------------------------------
def segment_vectors(study: Study, system: System, seed: int | None = None) -> tuple:
    """A system's model (``seed``; default the first seed) with its corpus segment vectors and their
    documents."""
    fit = study.fit(system, seed)
    model = fit.model()
    vectors, owners, _ = fit_index(study, fit, model)
    return model, vectors, owners


def gaps_per_seed(study: Study, systems: list[System], first: dict[str, tuple]) -> dict[str, list[dict[int, float]]]:
    """Each system's per-document gaps (:func:`~longdoc.analysis.segments.document_gaps`), one dict per
    seed of the study, for :func:`spread_claims`; ``first``: the first seed's :func:`segment_vectors`."""
    from longdoc.analysis.segments import document_gaps

    gaps = {}
    for system in systems:
        encoded = [first[system.name]] + [segment_vectors(study, system, seed) for seed in study.seeds[1:]]
        gaps[system.name] = [document_gaps(vectors, owners) for _, vectors, owners in encoded]
    return gaps


def tsne_query(study: Study, split: str = "test") -> str:
    """The query of Figure 5: the one whose relevant document has the most segments (ties: the smallest
    query id), so that there is a spread to see."""
    queries, qrels = study.split(split)
    encoding = study.settings(EncoderSettings)
    n, m = encoding.max_blocks, encoding.block_size
    lengths = document_token_counts(study)

    def segments(qid: str) -> int:
        return max(min(n, -(-lengths.get(d, 0) // (m - 2))) for d, grade in qrels[qid].items() if grade > 0)

    return min(queries, key=lambda q: (-segments(q), q))


def document_token_counts(study: Study) -> pd.Series:
    """WordPiece tokens per document under the backbone's tokenizer."""
    from longdoc.data.stats import document_lengths
    from longdoc.models.backbone import load_tokenizer

    return document_lengths(study.data, load_tokenizer(study.settings(EncoderSettings).backbone))["tokens"]


# -- Figure 4: quality by document length ---------------------------------------------------------
MIN_BUCKET_QUERIES = 10  # fewer queries in a bucket: its interval says nothing, the claim is not testable


def tokens_read(study: Study, name: str) -> tuple[int, int]:
    """A dense row's content tokens: (in its first segment, in all it reads of a document)."""
    encoder = study.results[name].system.spec.encoder
    first = encoder.segment_length - 2
    return first, encoder.document_tokens or encoder.max_segments * first


def length_claims(
    study: Study, buckets: pd.Series, sedr_name: str, maxp_name: str, first_name: str, segment_tokens: int
) -> pd.DataFrame:
    """Figure 4's statements as verdicts (MRR@100, 95% intervals over the bucket's queries and the
    seeds), posed as the paper poses them, on buckets by the segments a relevant document fills
    (:func:`~longdoc.analysis.length.segment_buckets`): SeDR above MaxP and above the first segment on
    documents longer than what one segment holds (the longest bucket), its gain growing from the
    one-segment bucket to the longest, and SeDR below them on documents within one segment, which
    every compared system reads whole (the paper: under 512 tokens). ``segment_tokens``: the content
    tokens of the buckets' segment. Each claim is testable only when its bucket holds
    :data:`MIN_BUCKET_QUERIES` queries and its rows read what the claim assumes, checked on their
    encoders: every row's first segment holds a one-segment document whole, and SeDR and MaxP read the
    same tokens of a long document (FirstP reading fewer is Figure 4's comparison itself)."""
    from longdoc.analysis.length import bucket_gains, bucket_order, gain_growth
    from longdoc.experiments.verdicts import Precondition, condition_text, first_failed, interval_text, verdict

    scores = {name: study.results[name].per_item(study.data, "MRR@100") for name in (sedr_name, maxp_name, first_name)}
    order, counts = bucket_order(buckets), buckets.value_counts()
    one, longest = buckets.cat.categories[0], order[-1]

    def enough(*names) -> Precondition:
        sizes = ", ".join(f"{b}: {counts.get(b, 0)} queries" for b in names)
        return Precondition(
            all(counts.get(b, 0) >= MIN_BUCKET_QUERIES for b in names), f"{sizes} (≥ {MIN_BUCKET_QUERIES})"
        )

    read = {name: tokens_read(study, name) for name in (sedr_name, maxp_name, first_name)}

    def whole(against: str) -> Precondition:
        firsts = ", ".join(f"{n} {read[n][0]}" for n in (sedr_name, against))
        return Precondition(
            all(read[n][0] >= segment_tokens for n in (sedr_name, against)),
            f"both read a one-segment document whole (first segment, content tokens: {firsts}; "
            f"the bucket's segment: {segment_tokens})",
        )

    def same_tokens(against: str) -> Precondition | None:
        if against == first_name:
            return None
        return Precondition(
            read[sedr_name][1] == read[against][1],
            f"both read the same tokens of a long document ({sedr_name} {read[sedr_name][1]}, "
            f"{against} {read[against][1]})",
        )

    def row(claim: str, paper: str, stats: tuple[float, float, float], *conditions: Precondition | None) -> dict:
        value, low, high = stats
        return {
            "claim": claim,
            "paper": paper,
            "measure": "MRR@100",
            "ours: Δ [95% CI]": interval_text(value, low, high),
            "verdict": verdict(low, high, first_failed(conditions)),
            "condition": condition_text(conditions),
        }

    nan = (float("nan"),) * 3
    rows = []
    for against in (maxp_name, first_name):
        gains = bucket_gains(scores[sedr_name], scores[against], buckets).set_index("bucket")
        at = {b: (gains.loc[b, "Δ"], gains.loc[b, "95% CI low"], gains.loc[b, "95% CI high"]) for b in gains.index}
        rows.append(
            row(
                f"SeDR above {against} on documents filling {longest}",
                "Figure 4: SeDR clearly above the others on longer documents",
                at.get(longest, nan),
                enough(longest),
                same_tokens(against),
            )
        )
        growth = gain_growth(scores[sedr_name], scores[against], buckets) if one in at and longest != one else None
        rows.append(
            row(
                f"SeDR's gain over {against} larger on documents filling {longest} than on those within one",
                "Figure 4 (the gap widens with length)",
                (growth["growth"], growth["95% CI low"], growth["95% CI high"]) if growth else nan,
                enough(one, longest),
                whole(against),
                same_tokens(against),
            )
        )
        low_high = at.get(one, nan)
        rows.append(
            row(
                f"SeDR below {against} on documents within one segment (every system reads them whole)",
                "Figure 4: SeDR below ANCE(MaxP) and STAR on documents under 512 tokens (one segment)",
                (-low_high[0], -low_high[2], -low_high[1]),
                enough(one),
                whole(against),
            )
        )
    return pd.DataFrame(rows)


# -- Figure 5: spread and t-SNE of segment vectors -----------------------------------------------
def spread_claims(per_document: dict[str, list[dict[int, float]]], study: Study) -> pd.DataFrame:
    """Figure 5's reading as verdicts on each document's gap (its within-document cosine minus the
    model's between-document cosine, so that a model whose whole space is narrower does not look
    collapsed): global attention collapses a document's segments more than SeDR does, and SeDR-MaxP's
    segments are spread more than SeDR's. ``per_document``: model → one {document: gap} per seed; the
    95% interval resamples documents (paired) and each model's seeds, as the ranking claims resample
    queries and seeds; a model with one seed leaves the claim "not testable" (Δ and interval still shown)."""
    from longdoc.eval.significance import seed_query_bootstrap
    from longdoc.experiments.verdicts import INTERVAL, Precondition, condition_text, interval_text, verdict

    n = names(study)
    pairs = [
        (
            "global attention collapses a document's segments more than SeDR",
            n["global"],
            n["sedr"],
            "Figure 5: SeDR-Global-Attention's segments collapse into one point",
        ),
        (
            "SeDR-MaxP's segments are spread more than SeDR's (SeDR's are more alike)",
            n["sedr"],
            n["no_sit"],
            "Figure 5: SeDR-MaxP's segments diffuse arbitrarily; SeDR's scatter to a document area",
        ),
    ]
    rows = []
    for claim, a, b, paper in pairs:
        if a not in per_document or b not in per_document:
            continue
        stats = seed_query_bootstrap(per_document[a], per_document[b])
        single = [name for name in (a, b) if len(per_document[name]) < 2]
        runs = (
            Precondition(False, f"one seed of {', '.join(single)}: a trained system needs two runs or more")
            if single
            else None
        )
        rows.append(
            {
                "claim": claim,
                "paper": paper,
                "measure": "within − between-document cosine",
                INTERVAL: interval_text(stats["mean_difference"], stats["ci_low"], stats["ci_high"]),
                "p (bootstrap)": float(f"{stats['p_value']:.3g}"),
                "verdict": verdict(stats["ci_low"], stats["ci_high"], runs),
                "condition": condition_text([runs]),
            }
        )
    return pd.DataFrame(rows)


def tsne_panel_data(study: Study, encoded: dict[str, tuple], reference: str, candidates: int, seed: int = 0) -> dict:
    """Figure 5's panels: the :func:`tsne_query` and the segments of its top ``candidates`` documents
    under ``reference`` (the same documents in every panel, its relevant ones added), t-SNE per model."""
    from longdoc.analysis.segments import tsne_points

    queries, qrels = study.split("test")
    qid = tsne_query(study)
    doc_ids = study.data.doc_ids
    number = {d: i for i, d in enumerate(doc_ids)}
    relevant = {number[d] for d, grade in qrels[qid].items() if grade > 0 and d in number}
    model, vectors, owners = encoded[reference]
    index = DenseIndex(vectors.shape[1])
    index.add(vectors, owners)
    _, top = index.search(model.encode_queries([queries[qid]]), candidates)
    chosen = list(dict.fromkeys([int(d) for d in top[0] if d >= 0] + sorted(relevant)))
    panels = {}
    for name, (model, vectors, owners) in encoded.items():
        keep = np.isin(owners, chosen)
        points = tsne_points(model.encode_queries([queries[qid]])[0], vectors[keep], seed)
        panels[name] = (points, owners[keep], {d: doc_ids[d] for d in chosen}, relevant)
    return {"query": qid, "text": queries[qid], "documents": [doc_ids[d] for d in chosen], "panels": panels}


# -- what notebooks 20–24 run ------------------------------------------------------------------------
def headline_rows(study: Study) -> list[System]:
    """The budget ladder's SeDR rows: STAR(MaxP) and SeDR (Table 1)."""
    n = names(study)
    return [s for s in main_systems(study) if s.name in (n["sedr"], n["maxp"])]


@claim_builder
def headline_claims(study: Study, systems: list[System]) -> list[Claim]:
    n = names(study)
    return claims_comparing(main_claims(study), {(n["sedr"], n["maxp"])})


def length_bucket_systems(study: Study) -> list[System]:
    """Figure 5's rows: BM25, STAR, STAR(MaxP) and SeDR of Table 1, with Longtriever beside them."""
    main, n = {s.name: s for s in main_systems(study)}, names(study)
    return [main[n["bm25"]], main[n["star"]], main[n["maxp"]], longtriever(study), main[n["sedr"]]]


def sweep_rows(study: Study) -> list[System]:
    caches, depths = sweep_systems(study)
    return caches + depths


MAIN = Table(
    "20_sedr_main",
    RETRIEVAL,
    main_systems,
    claims=lambda study, rows: main_claims(study),
    headline=Headline("sedr", "SeDR", ("train_steps",), "batch_size", headline_rows, headline_claims),
)
INTERACTION = Table(
    "21_sedr_interaction", RETRIEVAL, interaction_systems, claims=lambda study, rows: interaction_claims(study)
)
NEGATIVES = Table(
    "22_sedr_negatives", RETRIEVAL, sweep_rows, claims=lambda study, rows: sweep_claims(study), seeds="claimed"
)
TSNE = Table("23_sedr_tsne", RETRIEVAL, interaction_systems)
LENGTH_BUCKETS = Table("24_length_buckets", RETRIEVAL, length_bucket_systems)
TABLES = (MAIN, INTERACTION, NEGATIVES, TSNE, LENGTH_BUCKETS)
