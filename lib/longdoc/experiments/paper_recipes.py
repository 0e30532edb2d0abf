"""The papers' hyperparameters beside the released code's and the ``paper`` profile's, and why they differ.

Each :class:`Hyperparameter` names a paper's setting, the value its text states (``None`` where it states
none), what its released code does, the profile key that sets it here and the notebook whose value is read
(``notebooks/profiles/paper.yaml``, that notebook's entry included). The README's table is rendered from
these rows and the profile (``python -m longdoc.experiments.paper_recipes --readme``); a test holds the
README to the render and refuses a row whose profile value differs from the paper's without a reason, or
keeps a reason where they agree.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.profiles import parameters_for
from longdoc.io import rewrite_marked_block

PAPER_PROFILE = REPO_ROOT / "notebooks" / "profiles" / "paper.yaml"
README = REPO_ROOT / "README.md"
README_MARKERS = (
    "<!-- paper-recipes: python -m longdoc.experiments.paper_recipes --readme -->",
    "<!-- /paper-recipes -->",
)


@dataclass(frozen=True)
class Hyperparameter:
    paper: str  # "Longtriever", "SeDR", "SMITH", "NCI"
    setting: str  # what it is, with the paper's symbol or section
    key: str  # the profile key that sets it
    notebook: str  # the notebook whose value is read (its profile entry applies)
    stated: object  # the value the paper's text gives (None: it gives none)
    released: str  # what the authors' released code does ("" where there is no such code)
    why: str = ""  # why the profile's value is not the paper's (required exactly where they differ)


LT, SEDR, SMITH, NCI = "10_longtriever_main", "20_sedr_main", "30_smith_main", "40_nci_main"
RECIPES = (
    # Longtriever (section 4.1; upstream notes: exe_pretrain.sh, the fine-tuning script)
    Hyperparameter(
        "Longtriever", "backbone ('the BERT checkpoint', 30,522 tokens)", "backbone", LT, "bert-base-uncased", "BERT"
    ),
    Hyperparameter("Longtriever", "block length M", "block_size", LT, 512, "510 + [CLS], [SEP]"),
    Hyperparameter(
        "Longtriever",
        "blocks per document N",
        "max_blocks",
        LT,
        8,
        "4 (fine-tuning), 5 (pre-training)",
        "the paper's 8 is its pre-training's; its fine-tuning reads 2,048 tokens (Figure 3a) = 4 x 512, as released",
    ),
    Hyperparameter("Longtriever", "fine-tuning queries per step", "batch_size", LT, None, "8 GPUs x 6 = 48"),
    Hyperparameter(
        "Longtriever",
        "fine-tuning learning rate",
        "learning_rates",
        LT,
        None,
        "1e-5",
        "a dev grid around the released rate, the same for every row of a table, chosen on dev by code",
    ),
    Hyperparameter(
        "Longtriever",
        "fine-tuning epochs",
        "train_epochs",
        LT,
        None,
        "10 (one in-batch run)",
        "10 per iteration: the paper's three iterations read 30 passes in all",
    ),
    Hyperparameter(
        "Longtriever",
        "fine-tuning iterations (BM25, then two of hard negatives)",
        "iterations",
        LT,
        3,
        "in-batch negatives only (no hard-negative iteration released)",
    ),
    Hyperparameter(
        "Longtriever",
        "precision",
        "precision",
        LT,
        None,
        "fp16",
        "bf16 on A100/H100 needs no loss scaling (use fp32 on a V100)",
    ),
    Hyperparameter(
        "Longtriever",
        "pre-training corpus",
        "pretrain_corpus",
        "11_longtriever_ablation",
        "BookCorpus + English Wikipedia",
        "HF bookcorpus + wikipedia 20200501.en",
        "no corpus is downloaded here: --data pretraining=FILE_OR_DIR gives yours ('': the dataset's documents)",
    ),
    Hyperparameter("Longtriever", "pre-training epochs", "pretrain_epochs", LT, 8, "8"),
    Hyperparameter("Longtriever", "pre-training documents per step", "pretrain_batch_size", LT, 24, "8 GPUs x 5 = 40"),
    Hyperparameter("Longtriever", "pre-training peak learning rate", "pretrain_learning_rate", LT, 1e-4, "1e-4"),
    Hyperparameter("Longtriever", "MLM masking ratio", "mlm_ratio", LT, 0.3, "0.3"),
    Hyperparameter("Longtriever", "LMAE masking ratio", "lmae_ratio", LT, 0.5, "0.5"),
    # SeDR (Implementation Details; upstream notes: batching by segments, LAMB, default 25 epochs)
    Hyperparameter(
        "SeDR",
        "backbone",
        "backbone",
        SEDR,
        "roberta-base",
        "roberta-base, warm-started from STAR",
        "one backbone for every row of a table (the retrieval tables' BERT); --set backbone=roberta-base runs the paper's",
    ),
    Hyperparameter(
        "SeDR",
        "segment length",
        "block_size",
        SEDR,
        512,
        "500 content tokens + <s>, </s>, padded to 505 with 3 [CLS] slots",
    ),
    Hyperparameter("SeDR", "segments per document", "max_blocks", SEDR, 4, "4"),
    Hyperparameter(
        "SeDR",
        "training batch",
        "batch_size",
        SEDR,
        17,
        "17 segments of positives a step (+ grad-accum 4)",
        "every row of a table gets the main table's budget (48 queries); 17 was what one V100 held",
    ),
    Hyperparameter(
        "SeDR",
        "learning rate",
        "learning_rates",
        SEDR,
        [5e-5],
        "5e-5 (LAMB)",
        "one dev grid and AdamW for every row of a table; the paper's 5e-5 is LAMB's",
    ),
    Hyperparameter(
        "SeDR",
        "epochs",
        "train_epochs",
        SEDR,
        None,
        "25 (its README evaluates epoch 4)",
        "the retrieval tables share one budget, Longtriever's released 10 epochs",
    ),
    Hyperparameter("SeDR", "late-cache size C", "cache_size", "22_sedr_negatives", 50, "50"),
    Hyperparameter("SeDR", "negative depth K with the cache", "negative_depth", "22_sedr_negatives", 100, "100"),
    Hyperparameter("SeDR", "negative depth without it", "negative_depth_without_cache", "22_sedr_negatives", 200, ""),
    # SMITH (section 5.2.3; upstream notes: the released fine-tuning configs)
    Hyperparameter("SMITH", "sentence block length", "sentence_block_length", SMITH, 32, "32"),
    Hyperparameter("SMITH", "sentence blocks per document", "max_sentence_blocks", SMITH, 48, "48"),
    Hyperparameter("SMITH", "sentence-level layers L1", "sentence_layers", SMITH, 6, "4 (the released WP+SP config)"),
    Hyperparameter("SMITH", "document-level layers L2", "document_layers", SMITH, 3, "3"),
    Hyperparameter("SMITH", "masked sentence blocks per document", "masked_blocks", SMITH, 2, "2"),
    Hyperparameter("SMITH", "batch (pairs)", "batch_size", SMITH, 32, "32"),
    Hyperparameter("SMITH", "learning rate (Adam)", "learning_rates", SMITH, [5e-5], "5e-5"),
    Hyperparameter("SMITH", "fine-tuning steps", "train_steps", SMITH, 100_000, "10k"),
    Hyperparameter("SMITH", "pre-training epochs", "pretrain_epochs", SMITH, 68, ""),
    Hyperparameter("SMITH", "pre-training batch", "pretrain_batch_size", SMITH, 32, ""),
    Hyperparameter(
        "SMITH",
        "precision",
        "precision",
        SMITH,
        None,
        "TensorFlow 1.15 on TPU v3",
    ),
    # NCI (section 4.2; upstream notes: train.sh)
    Hyperparameter(
        "NCI",
        "encoder",
        "backbone",
        NCI,
        "T5-Base",
        "T5 encoder, PAWA decoder",
        "a BERT encoder with NCI's PAWA decoder, so that every retrieval table reads one backbone",
    ),
    Hyperparameter(
        "NCI",
        "precision",
        "precision",
        NCI,
        None,
        "",
        "the paper's V100s had no bf16: bf16 autocast in training on A100/H100, decoding fp32 (--set precision=fp32)",
    ),
    Hyperparameter("NCI", "examples per step", "nci_batch_size", NCI, 128, "train.sh: batch 64, grad-accum 8 / GPUs"),
    Hyperparameter("NCI", "encoder learning rate (decoder: half)", "nci_learning_rates", NCI, [2e-4], "2e-4 / 1e-4"),
    Hyperparameter("NCI", "consistency weight alpha", "nci_alpha", NCI, 0.15, "0.15 (R-Drop)"),
    Hyperparameter("NCI", "beam size", "nci_beam", NCI, 100, "100"),
    Hyperparameter("NCI", "length penalty", "nci_length_penalty", NCI, 0.8, ""),
    Hyperparameter("NCI", "k-means clusters k", "nci_k", NCI, 30, "30"),
    Hyperparameter("NCI", "leaf size c", "nci_c", NCI, 30, "30"),
    Hyperparameter("NCI", "PAWA adaptor layers", "nci_adaptor_layers", NCI, 4, "4"),
    Hyperparameter("NCI", "generated queries per document", "qg_queries", NCI, 15, "15"),
    Hyperparameter(
        "NCI",
        "generator input (tokens)",
        "qg_input_length",
        NCI,
        512,
        "the first 64 characters (a string slice)",
    ),
    Hyperparameter("NCI", "generated query length", "qg_max_length", NCI, 64, "32"),
    Hyperparameter(
        "NCI",
        "epochs (the cap; each row stops at its dev plateau)",
        "nci_train_epochs",
        NCI,
        None,
        "500, its checkpoint chosen on the test set",
        "a cap that each row's dev plateau ends first (Figure 3's curves flatten within it); no test-set choice",
    ),
)


def profile_value(row: Hyperparameter, profile: Path = PAPER_PROFILE) -> object:
    """The value ``profile`` gives ``row.key`` in ``row.notebook`` (its own entry applied)."""
    return parameters_for(profile, REPO_ROOT / "notebooks" / f"{row.notebook}.ipynb")[row.key]


def agrees(stated: object, value: object) -> bool:
    """The profile's value is the paper's (numbers compared as numbers)."""
    if isinstance(stated, list) and isinstance(value, list):
        return len(stated) == len(value) and all(agrees(a, b) for a, b in zip(stated, value))
    if isinstance(stated, (int, float)) and isinstance(value, (int, float)):
        return float(stated) == float(value)
    return stated == value


def problems(profile: Path = PAPER_PROFILE) -> list[str]:
    """Rows whose reason does not match their values: a difference without a reason, or a reason kept
    where the profile now agrees with the paper."""
    found = []
    for row in RECIPES:
        value = profile_value(row, profile)
        same = row.stated is not None and agrees(row.stated, value)
        if row.stated is not None and not same and not row.why:
            found.append(f"{row.paper} {row.key}: the paper states {row.stated!r}, the profile {value!r}, no reason")
        if same and row.why:
            found.append(f"{row.paper} {row.key}: profile and paper agree ({value!r}), yet a reason is given")
    return found


def shown(value: object) -> str:
    if value is None:
        return "not stated"
    if value == "":
        return "''"
    if isinstance(value, list):
        return ", ".join(shown(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(profile: Path = PAPER_PROFILE) -> str:
    lines = [
        "| paper | setting | paper states | released code | profile key (notebook) | `paper` profile | why it differs |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in RECIPES:
        lines.append(
            f"| {row.paper} | {row.setting} | {shown(row.stated)} | {row.released or '-'} | `{row.key}` "
            f"({row.notebook[:2]}) | {shown(profile_value(row, profile))} | {row.why} |"
        )
    return "\n".join(lines)


def readme_block(profile: Path = PAPER_PROFILE) -> str:
    return "\n".join([README_MARKERS[0], table(profile), README_MARKERS[1]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m longdoc.experiments.paper_recipes", description=__doc__)
    parser.add_argument("--readme", action="store_true", help="rewrite the README's hyperparameter table")
    args = parser.parse_args(argv)
    found = problems()
    for problem in found:
        print(f"paper_recipes: {problem}", file=sys.stderr)
    if found:
        return 1
    if args.readme:
        rewrite_marked_block(README, README_MARKERS, readme_block())
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
