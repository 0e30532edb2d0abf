"""GPU-hours per paper table under a profile: the study's own plan of fits, priced by measured step times.

An estimate, not a measurement. For each notebook the paper module's rows are built under the profile
(no data is read, nothing is trained) and walked as :class:`~longdoc.experiments.study.Study` runs them:
a row's learning-rate grid on the first seed, then each of its seeds at the chosen rate (any rate costs
the same); a ``settings_from`` row first costs its source's grid; a warm start costs its own fit;
pre-training is shared by every row with the same start; an ensemble costs its members. Each fit is
counted as work (:class:`Work`): optimizer steps x items per step, and documents encoded (each dev
evaluation encodes the corpus; each further iteration and a miner's negatives encode it once more), and
priced from a measurement file of :mod:`longdoc.bench.training` (``results/bench/h100/training.json``,
one H100, the papers' per-GPU shapes):

- GPU-seconds per item = seconds per step / per-GPU batch, scaled linearly by tokens per document to the
  row's shape (a beam search: by its beams);
- a model that was not measured is priced as its nearest measured one (``STAND_INS``), and a document
  encoding that was not measured as a sixth of a training item (a training item holds two documents;
  a forward pass is about a third of forward + backward); NCI was measured with its two dropout views,
  so a row without the consistency loss (α = 0: DSI, "w/o consistency") costs half;
- a job the GPU run did not measure (NCI's beam search, docT5query's generation; ``DERIVED_FROM``) is
  priced as a measured reference job times the two jobs' CPU-time ratio on this 2-core machine
  (``results/bench/epyc-2core/training.json``), and says so in the ``priced as`` column;
- the CPU stages (tokenising into each block shape, on one core; BM25's index, on every core, and its
  searches) in core-hours of this machine, from :mod:`longdoc.bench.corpus`'s measurements
  (``results/bench/epyc-2core/corpus.json``), apart from the GPU-hours;
- on several GPUs as GPU-hours held (wall time x the fit's GPUs): work split across the fit's processes
  at the published data-parallel efficiency; work every process repeats (NCI's dev decoding) and work
  one process does while the others wait (the final decoding, generation, the identifiers' embeddings)
  at its one-GPU time on each GPU (``Work.spread``); on an A100 and a V100 by published throughput ratios
  (:mod:`longdoc.bench.cards`, each figure's source named there).

Each row's spec states its own fit plan (:meth:`~longdoc.experiments.systems.Spec.fits`: the fits it
needs, each with its cache determinants, its work and what runs it); the study executes that plan, this
module walks the tables and prices it.

Corpus sizes come from :data:`PAPER_SCALE` (the papers' datasets), or for a profile on the embedded
benchmark (``--scale benchmark``, the default for every profile but ``paper``) from
:data:`BENCHMARK_SCALE`. Prices are those of the profile's model size (``minilm``: the 384-wide runs of
the measurement file, else BERT-base's 768), at the measured block shape nearest the row's. Fits shared
through the cache (a row of 10 that 01 already trained) cost nothing in a later notebook: ``own
GPU-hours`` count what a notebook trains first in ``run_all.sh``'s order, ``alone`` what it trains from
an empty cache. The budget ladder (90) costs its rungs above 1x (its 1x rung is the headline notebooks'
fits). Under early stopping (``patience``, ``nci_patience``) every run is priced at its ceiling: an
upper bound. ``python -m longdoc.bench.gpu_hours --profile paper`` prints the table the README quotes;
``--profile gpu`` the one-GPU profile's minutes.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from longdoc.bench.cards import CARDS, card_factor, scaling_efficiency
from longdoc.data.registry import REPO_ROOT
from longdoc.experiments.deadline import price_key
from longdoc.experiments.papers.catalogue import TABLES
from longdoc.experiments.profiles import PRETRAINING, load_profile, notebook_parameter_names, parameters_for
from longdoc.experiments.settings import BudgetSettings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import pretraining_key
from longdoc.io import rewrite_marked_block
from longdoc.models.registry import encoder_class
from longdoc.train.steps import epoch_steps, evaluation_steps

MEASUREMENTS = REPO_ROOT / "results" / "bench" / "h100" / "training.json"
CPU_MEASUREMENTS = REPO_ROOT / "results" / "bench" / "epyc-2core" / "corpus.json"  # tokenising and BM25
CPU_TRAINING = REPO_ROOT / "results" / "bench" / "epyc-2core" / "training.json"  # the ratios of derived prices
DERIVED_FROM = {"decode:nci": "nci", "generate:docT5query": "encode:FirstP"}  # not measured on a GPU: priced as
# the reference's H100 price times the two jobs' CPU-time ratio (both measured on this 2-core machine)
NOTEBOOKS = REPO_ROOT / "notebooks"
PROFILES = NOTEBOOKS / "profiles"
MINILM_HIDDEN = 384  # the packaged backbone's width (the gpu profile's prices)
ENCODE_AS_FORWARD = 1 / 3  # a forward pass of a training item's forward + backward (not measured)


@dataclass(frozen=True)
class Scale:
    """A paper's dataset in numbers (what pricing needs)."""

    name: str
    documents: int  # the corpus every dev evaluation encodes
    pretrain_documents: int  # one pre-training pass (pretrain_steps 0)
    source: str
    dev_queries: int = 0  # held-out dev queries (their BM25 top k are a candidate dev evaluation's documents)
    train_examples: int = 0  # labelled training queries or pairs per pass (a budget in epochs reads it; 0: unknown)
    test_queries: int = 0  # the queries every reported run is scored on (BM25 searches and NCI decodes them)
    stored: bool = False  # its corpus.jsonl is 1 GiB or more, so it is read through a token store the cache keeps
    # (data/corpus_store.py); else it is held in memory and tokenised again by every notebook that loads it


PAPER_SCALE = {
    "retrieval": Scale(
        "MS MARCO documents",
        3_213_835,
        3_213_835,
        "MS MARCO document ranking corpus; dev: 1% of its 367,013 training queries (the README's recipe), "
        "the other 363,343 trained on; test: its 5,193 dev queries",
        dev_queries=3_670,
        train_examples=363_343,
        test_queries=5_193,
        stored=True,  # msmarco-docs.tsv: 22 GB
    ),
    "matching": Scale(
        "Wiki65K",
        164_488,
        164_488,
        "SMITH Table 4: 82,244 pairs, 65,948 of them for training; at most two new documents per pair (an upper bound)",
        train_examples=65_948,
    ),
    "nci": Scale(
        "NQ320k",
        109_739,
        0,
        "NCI section 4.1: 109,739 documents; 307,373 labelled training queries (NCI's NQ_dataset_Process), "
        "5% of them held out for dev (the converter's --dev-fraction), 7,830 test queries",
        dev_queries=15_369,
        train_examples=292_004,
        test_queries=7_830,
    ),
}

BENCHMARK_DOCUMENTS = 1100  # the embedded benchmark's pages (DESIGN.md); pairs and NCI read the same pages
BENCHMARK_SCALE = {
    role: Scale("the embedded benchmark", BENCHMARK_DOCUMENTS, BENCHMARK_DOCUMENTS, "data/manpages (DESIGN.md)")
    for role in ("retrieval", "matching", "nci")
}
SCALES = {"paper": PAPER_SCALE, "benchmark": BENCHMARK_SCALE}


def scale_for(scale: str, role: str, max_docs: int = 0) -> Scale:
    """The corpus a role's notebooks read at ``scale`` (``max_docs`` > 0: that many of the benchmark's)."""
    found = SCALES[scale][role]
    if scale == "benchmark" and 0 < max_docs < found.documents:
        return replace(found, documents=max_docs, pretrain_documents=max_docs)
    return found


# unmeasured models, priced as the measured one they resemble most
STAND_INS = {
    "retrieval:PARADE": "retrieval:MaxP",  # MaxP's passages plus a small aggregator
    "retrieval:Hi-Transformer": "retrieval:Longtriever",  # interleaved block and document layers
    "encode:PARADE": "encode:MaxP",
    "encode:Hi-Transformer": "encode:Longtriever",
    "matching:Longtriever": "retrieval:Longtriever",  # a pair's two documents ~ a query's two
    "matching:SeDR": "retrieval:SeDR",
    "matching:HAN": "matching:SMITH",  # hierarchical over sentence blocks
    "pretrain:SeDR": "pretrain:Longtriever",
}


@dataclass(frozen=True)
class Price:
    """GPU-seconds per item (a query, a pair, a document, an NCI example) at ``tokens`` per document;
    ``others``: ``(seconds, tokens)`` measured at other shapes (4 x 128 and 4 x 256 blocks)."""

    seconds: float
    tokens: int
    measured: str  # the measured job it comes from
    others: tuple = ()

    def per_item(self, tokens: int) -> float:
        """Linear in tokens per document from the measured shape nearest ``tokens`` (by ratio)."""
        seconds, measured = self.seconds, self.tokens
        if tokens and self.others:
            seconds, measured = min(
                [(self.seconds, self.tokens), *self.others], key=lambda s: abs(math.log(tokens / s[1]))
            )
        return seconds * (tokens / measured if measured and tokens else 1.0)

    def scaled(self, factor: float, measured: str) -> Price:
        return Price(self.seconds * factor, self.tokens, measured, tuple((s * factor, t) for s, t in self.others))


def measured_tokens(job: str, shape: dict) -> int:
    """Tokens per document of ``job`` at the measured ``shape`` (0: not scaled by length)."""
    kind, _, model = job.partition(":")
    if kind in ("retrieval", "encode"):
        return shape["block"] * (1 if encoder_class(model).reads_one_block else shape["blocks"])
    if kind == "matching":
        return shape["matchbert_length"] if model == "MatchBERT" else shape["sentence_block"] * shape["sentence_blocks"]
    if kind == "pretrain":
        return (
            shape["block"] * shape["pretrain_blocks"]
            if model == "Longtriever"
            else shape["sentence_block"] * shape["sentence_blocks"]
        )
    if kind == "decode":  # a beam search's cost, linear in its beams (a lower bound at fewer beams than
        return shape.get("nci_beam", 100)  # measured: the query encoder's share does not shrink with them)
    return 0


def items_per_step(job: str, shape: dict) -> int:
    kind = job.partition(":")[0]
    return {"retrieval": shape["batch"], "matching": shape["pair_batch"], "pretrain": shape["pretrain_batch"]}.get(
        kind, shape["nci_batch"]
    )


def priced_width(backbone: str | None) -> int:
    """The measured width whose prices apply to ``backbone``: MiniLM's 384 for it and for a backbone built
    here no wider (``manpages-mlm``, 256 wide; ``tiny-random-bert``, 64: upper bounds), else BERT-base's 768."""
    from longdoc.experiments.backbones import BUILT_BACKBONES, RANDOM_BACKBONES

    built = BUILT_BACKBONES.get(backbone) or RANDOM_BACKBONES.get(backbone)
    if backbone == "minilm" or (built is not None and built.hidden <= MINILM_HIDDEN):
        return MINILM_HIDDEN
    return 768


def load_prices(path: Path = MEASUREMENTS, hidden: int = 768) -> dict[str, Price]:
    """Per job, the mean GPU-seconds per item over the file's runs at ``hidden`` (768: the papers' size;
    384: MiniLM's), per measured tokens per document."""
    samples: dict[str, list[tuple[float, int]]] = {}
    for run in json.loads(Path(path).read_text())["runs"]:
        shape = run["header"]["shape"]
        if shape["hidden"] != hidden:
            continue
        for row in run["rows"]:
            job = row["job"]
            if "seconds_per_step" in row:
                per_item = row["seconds_per_step"] / items_per_step(job, shape)
            elif "documents_per_second" in row or "queries_per_second" in row:
                per_item = 1 / row.get("documents_per_second", row.get("queries_per_second"))
            else:
                continue  # out of memory
            samples.setdefault(job, []).append((per_item, measured_tokens(job, shape)))
    if not samples:
        raise ValueError(f"{path}: no measured job at hidden size {hidden}")
    prices = {}
    for job, values in samples.items():
        shapes: dict[int, list[float]] = {}
        for seconds, tokens in values:
            shapes.setdefault(tokens, []).append(seconds)
        (tokens, first), *rest = shapes.items()
        others = tuple((sum(v) / len(v), t) for t, v in rest)
        prices[job] = Price(sum(first) / len(first), tokens, job, others)
    return prices


def derived_prices(prices: dict[str, Price], cpu_training: Path = CPU_TRAINING, hidden: int = 768) -> dict:
    """A price for each :data:`DERIVED_FROM` job not measured on a GPU: its reference's H100 price times
    the jobs' CPU-seconds ratio on this machine (``cpu_training``; none where a job is missing). A GPU's
    small beam-search steps are more launch-bound than a CPU's, so a derived decoding price is likely low."""
    try:
        cpu = load_prices(cpu_training, hidden)
    except (FileNotFoundError, ValueError):  # no CPU run at this width
        return {}
    found = {}
    for job, reference in DERIVED_FROM.items():
        if job in prices or job not in cpu or reference not in cpu or reference not in prices:
            continue
        ratio = cpu[job].seconds / cpu[reference].seconds  # each at its shape of the CPU run
        base = prices[reference].per_item(cpu[reference].tokens)  # the reference's H100 price at that shape
        found[job] = Price(base * ratio, cpu[job].tokens, f"derived: {reference}'s H100 price x CPU ratio {ratio:.3g}")
    return found


def cpu_prices(path: Path = CPU_MEASUREMENTS) -> dict[str, Price]:
    """Core-seconds per document of tokenising (4 x 512 blocks) and of BM25's index, and per query and
    corpus document of a BM25 search (linear in the corpus), from the largest corpus of
    :mod:`longdoc.bench.corpus`'s file; ``{}`` where the file has no BM25 stage."""
    rows = [row for row in json.loads(Path(path).read_text())["rows"] if "bm25" in row]
    if not rows:
        return {}
    row = max(rows, key=lambda r: r["documents"])
    documents, tokenize, bm25 = row["documents"], row["tokenize"], row["bm25"]
    where = f"{Path(path).parent.name} {documents:,} documents"
    return {
        "cpu:tokenize": Price(tokenize["seconds"] * tokenize.get("cores", 1) / documents, 0, f"tokenize ({where})"),
        "cpu:bm25-index": Price(bm25["index_seconds"] * bm25["cores"] / documents, 0, f"BM25 index ({where})"),
        "cpu:bm25-search": Price(
            bm25["search_seconds"] * bm25["search_threads"] / (bm25["queries"] * documents), 0, f"BM25 search ({where})"
        ),
    }


def all_prices(measurements: Path = MEASUREMENTS, hidden: int = 768, cpu: Path = CPU_MEASUREMENTS) -> dict:
    """The measured GPU prices at ``hidden``, the derived ones, and the CPU stages'."""
    prices = load_prices(measurements, hidden)
    return prices | derived_prices(prices, hidden=hidden) | cpu_prices(cpu)


def price_of(job: str, prices: dict[str, Price]) -> Price | None:
    """``job``'s price, a stand-in's, or (for an encoding) a third of its training item's; None: unpriced."""
    if job in prices:
        return prices[job]
    if job in STAND_INS and STAND_INS[job] in prices:
        return replace(prices[STAND_INS[job]], measured=f"{STAND_INS[job]} (stand-in)")
    kind, _, model = job.partition(":")
    if kind == "encode":
        for trained in (f"retrieval:{model}", f"matching:{model}"):
            base = price_of(trained, prices)
            if base is not None:  # a training item (a pair; a query and two documents) holds two documents
                return base.scaled(ENCODE_AS_FORWARD / 2, f"{base.measured} / 6 (one document's forward pass)")
    return None


ANY_FIT = ("any fit",)  # a stage's need: any fit the notebook builds (Planner._stage's for_fit)
SPREADS = ("split", "every process", "one process")  # how a fit's (or notebook's) GPUs share a work


@dataclass(frozen=True)
class Work:
    """Items of one job: ``items`` queries, pairs, documents or examples at ``tokens`` per document.
    ``spread``: ``split`` across the fit's processes (data parallel, at the published efficiency), done
    by ``every process`` in full, or by ``one process`` while the others wait (held, so counted on each)."""

    what: str  # a kind of work: one of WORK_KINDS (GPU) or CPU_KINDS
    job: str  # a :mod:`longdoc.bench.training` job ("retrieval:MaxP", "encode:SeDR", "nci", "decode:nci", ...)
    # or a CPU stage of :func:`cpu_prices` ("cpu:tokenize", "cpu:bm25-index", "cpu:bm25-search")
    items: float
    tokens: int = 0
    spread: str = "split"

    def __post_init__(self) -> None:
        if self.spread not in SPREADS:
            raise ValueError(f"Work spread {self.spread!r}: expected one of {SPREADS}")


@dataclass
class Plan:
    """What one notebook trains: its fits' work, keyed so that another notebook's identical fit is known."""

    notebook: str
    works: dict[tuple, list[Work]] = field(default_factory=dict)  # fit key -> its work
    unpriced: set[str] = field(default_factory=set)  # work that was not measured
    rows: dict[str, list] = field(default_factory=dict)  # each row run: its seeds ([None]: not trained)
    chains: list[list[tuple]] = field(default_factory=list)  # each fit plan walked: its fits' keys in order
    needed_by: dict[tuple, set] = field(default_factory=dict)  # a stage done only when one of these fits is built
    fitted: set[tuple] = field(default_factory=set)  # the keys of fits (not of stages)

    @property
    def fits(self) -> int:
        return sum(1 for key in self.works if key[0] in ("fit", "pretraining"))


class Planner:
    """Walks a notebook's rows as the study fits them (:meth:`Study.selection`, :meth:`Study.run`): each
    row's spec states its fit plan (:meth:`~longdoc.experiments.systems.Spec.fits`, which the study
    executes); the planner keeps the work under each fit's key, runs nothing and prices nothing itself."""

    def __init__(self, study, scale: Scale, every_rate: bool = False):
        self.study, self.scale = study, scale
        self.every_rate = every_rate  # walk each seed at every rate of the grid (a deadline's prices: the
        # study's chosen rate is not known before it runs, and a fit's key holds it)
        self.plan = Plan(study.notebook)
        self.chosen: dict[str, float] = {}
        self._open: list[list[tuple]] = []  # the chains being walked (a warm start's inside its row's)

    def _walk(self, spec, rate: float, seed: int) -> None:
        """One fit plan (a chain: :mod:`longdoc.experiments.deadline`), its keys kept in order, those of the
        warm starts it needs first (a chain that needs another fit's model is priced with it, so that a
        deadline never leaves a model built whose dependent chain was not: an export carries no model)."""
        self._open.append([])
        try:
            spec.fits(self, rate, seed)
        finally:
            self.plan.chains.append(self._open.pop())

    # -- the study's protocol ----------------------------------------------------------------------
    def run(self, system, seeds: list[int] | None = None) -> None:
        seeds = list(seeds or self.study.seeds)
        spec = system.spec
        if not spec.trained:
            self.plan.rows[system.name] = [None]
            spec.untrained_cost(self, seeds)
            return
        self.plan.rows[system.name] = seeds
        chosen = self.selection(system)
        for rate in self.rates(system) if self.every_rate else [chosen]:
            for seed in seeds:
                self._walk(spec, rate, seed)

    def rates(self, system) -> list[float]:
        """The rates the row may be fitted at: its grid, or its settings source's."""
        source = system
        while source.settings_from is not None:
            source = source.settings_from
        return source.learning_rate_grid(self.study)

    def selection(self, system) -> float:
        """The row's learning rate: its grid fitted with the first seed (``settings_from``: its source's)."""
        if system.name not in self.chosen:
            if system.settings_from is not None:
                self.chosen[system.name] = self.selection(system.settings_from)
            else:
                grid = system.learning_rate_grid(self.study)
                for rate in grid:
                    self._walk(system.spec, rate, self.study.seeds[0])
                self.chosen[system.name] = grid[0]  # any rate costs the same
        return self.chosen[system.name]

    # -- what a spec's fit plan says ------------------------------------------------------------------
    def fit(self, key: tuple, works: list[Work], run=None) -> None:
        """One cached fit (``key``: its cache determinants) and its work (``run``, what executes it, is not
        called); a fit seen before costs nothing."""
        self.plan.works.setdefault(key, works)
        self.plan.fitted.add(key)
        for chain in self._open:  # a warm start's fits belong to every chain that needs its model too
            chain.append(key)

    def needs(self, system, seed: int) -> float:
        """Another row's fit at its chosen rate with ``seed`` (a warm start), with its selection; that rate."""
        rate = self.selection(system)
        for each in self.rates(system) if self.every_rate else [rate]:
            self._walk(system.spec, each, seed)
        return rate

    def not_priced(self, what: str) -> None:
        self.plan.unpriced.add(what)

    def work(self, what: str, job: str, items: float, encoder=None) -> Work:
        return Work(what, job, items, tokens_of(encoder) if encoder is not None else 0)

    def encode(self, what: str, model: str, encoder, times: float = 1, spread: str = "split") -> Work:
        """The corpus encoded ``times`` times by ``model`` (``spread``: :class:`Work`'s; ``one process``
        where the kernel encodes it: zero-shot, mined negatives)."""
        return Work(what, f"encode:{model}", times * self.scale.documents, tokens_of(encoder), spread)

    def budget(self):
        return self.study.settings(BudgetSettings)

    def train_examples(self) -> int:
        """Training queries or pairs per pass at this scale (a budget in epochs: its steps)."""
        if not self.scale.train_examples:
            raise ValueError(
                f"{self.study.notebook}: a budget in epochs (train_steps 0) at {self.scale.name}, whose training "
                "examples this planner does not know: give train_steps, or price it at --scale paper"
            )
        return self.scale.train_examples

    def fine_tuning_steps(self, budget) -> int:
        """A fine-tuning run's steps: ``train_steps``, or ``train_epochs`` passes over this scale's training
        examples, each pass counted as the trainer counts it (:func:`~longdoc.train.steps.epoch_steps`)."""
        if budget.train_steps:
            return budget.train_steps
        return budget.train_epochs * epoch_steps(self.train_examples(), budget.batch_size, budget.n_devices)

    def nci_steps(self, options, queries) -> int:
        """An NCI run's steps: ``nci_train_steps``, or ``nci_train_epochs`` passes over :meth:`nci_examples`."""
        if options.nci_train_steps:
            return options.nci_train_steps
        examples = self.nci_examples(queries, options.qg_queries)
        return options.nci_train_epochs * epoch_steps(examples, options.nci_batch_size, options.n_devices)

    def nci_examples(self, queries, generated_per_document: int) -> int:
        """NCI's (query, identifier) examples per pass, an upper bound: the labelled queries, each document's
        first terms and its random windows, and its generated queries (short documents give fewer windows,
        and generated queries below the quality floor are dropped)."""
        documents = self.scale.documents
        return (
            (self.train_examples() if queries.train_queries else 0)
            + (documents * (1 + queries.windows) if queries.document_as_query else 0)
            + (documents * generated_per_document if queries.generated else 0)
        )

    # -- the stages around the fits, each priced where the study runs it -------------------------------
    def _stage(self, key: tuple, works: list[Work], for_fit: tuple | None = None) -> None:
        """A stage's work under ``key`` (seen before: nothing more); no chain holds it (a deadline prices fits).
        ``for_fit``: done only where that fit is built (a notebook whose fits are all cached skips it)."""
        self.plan.works.setdefault(key, works)
        if for_fit is not None:
            self.plan.needed_by.setdefault(key, set()).add(for_fit)

    def queries(self, *splits: str) -> int:
        """How many queries (or pairs) ``splits`` hold at this scale (0 where unknown)."""
        count = {"train": self.scale.train_examples, "dev": self.scale.dev_queries, "test": self.scale.test_queries}
        return sum(count[split] for split in splits)

    def tokenise(self, encoder) -> None:
        """The corpus cut into ``encoder``'s blocks (None: NCI's windows), on one core (``run_all.sh`` sets
        ``TOKENIZERS_PARALLELISM=false``): once per corpus and the study's segmentation key (tokenizer, block
        shape, document tokens, sentence filling) where a token store keeps it (:attr:`Scale.stored`), else
        again in every notebook that loads the corpus (an in-memory corpus: the cache keeps no tokens)."""
        if encoder is None:
            shape = "NCI"
        else:
            tokenizer = getattr(encoder, "tokenizer", None) or getattr(encoder, "backbone", None)
            shape = (tokenizer, encoder.segment_length, encoder.max_segments, getattr(encoder, "document_tokens", None))
            shape += (getattr(encoder, "sentence_filling", None),)
        works = [Work("tokenising", "cpu:tokenize", self.scale.documents)]
        if self.scale.stored:
            self._stage(("tokens", self.scale.name, shape), works)
        else:  # where the notebook builds any fit
            self._stage(("tokens", (self.scale.name, self.study.notebook), shape), works, ANY_FIT)

    def tokenised_in_processes(self, processes: int) -> list[Work]:
        """An in-memory corpus (not :attr:`Scale.stored`) is tokenised again by each of a fit's ``processes``
        (every worker loads the dataset and cuts it); a stored one is read from its token store."""
        if self.scale.stored or processes < 2:
            return []
        return [Work("tokenising", "cpu:tokenize", processes * self.scale.documents)]

    def bm25_search(self, *splits: str) -> Work:
        """BM25 searches of the corpus for the queries of ``splits`` (their cost grows with the corpus), the
        index built first: once per corpus into the cache, on every core."""
        self._stage(("bm25", self.scale.name), [Work("BM25", "cpu:bm25-index", self.scale.documents)])
        return Work("BM25", "cpu:bm25-search", self.queries(*splits) * self.scale.documents)

    def bm25_per_notebook(self, what: str, *splits: str, own_index: bool = False, for_fit: tuple | None = None) -> None:
        """Searches a notebook's process makes once (kept for the loaded dataset, not in the cache);
        ``own_index``: over an index of its own, built in the notebook (not kept either); ``for_fit``: made
        only when that fit is built (:meth:`_stage`)."""
        works = [self.bm25_search(*splits)]
        if own_index:
            works.append(Work("BM25", "cpu:bm25-index", self.scale.documents))
        self._stage(("bm25 search", self.study.notebook, what), works, for_fit)

    def generation(self, config) -> None:
        """Query generation (docT5query) over the corpus in one process, once per generator setting (the
        cache keeps it); a generator built here (no ready ``generator``, ``train_steps`` > 0) is fine-tuned
        first, split across the processes (not measured: listed unpriced)."""
        works = [Work("query generation", "generate:docT5query", self.scale.documents, spread="one process")]
        if config.train_steps and not config.generator:
            works.append(Work("query generation", "train:doc2query", config.train_steps * config.batch_size))
        self._stage(("generation", self.scale.name, repr(config)), works)

    def identifiers(self, spec, backbone: str, pooling: str) -> None:
        """NCI's semantic identifiers: the backbone's FirstP vector of every document at ``embedding_length``
        tokens, in one process, once per corpus and length (the cache keeps them); then hierarchical k-means
        on the CPU (not measured: listed unpriced)."""
        work = Work("identifiers", "encode:FirstP", self.scale.documents, spec.embedding_length, "one process")
        self._stage(("identifier embeddings", self.scale.name, backbone, pooling, spec.embedding_length), [work])
        self.not_priced("hierarchical k-means of NCI's identifiers (CPU)")

    def decoding(self, steps: int, dev_evaluations: int, dev_beam: int, beam: int) -> tuple[list[Work], list[Work]]:
        """NCI's beam searches of one fit of ``steps`` steps: ``(in the fit, after it)``. In the fit, each dev
        evaluation (every ``steps // dev_evaluations`` steps and after the last, as
        :func:`~longdoc.train.steps.evaluation_steps` places them) decodes the dev queries at ``dev_beam``
        beams in every process (an upper bound: a run that stops at its plateau evaluates fewer times); after
        it, one process decodes the dev-best model's dev and test queries at ``beam`` (cached on its own)."""
        evaluations = len(evaluation_steps(max(1, steps // max(1, dev_evaluations)), 0, steps)) if steps else 0
        dev = Work("decoding", "decode:nci", evaluations * self.queries("dev"), dev_beam, "every process")
        return [dev], [Work("decoding", "decode:nci", self.queries("dev", "test"), beam, "one process")]

    def decoded(self, key: tuple, decoding: str, works: list[Work]) -> None:
        """Fit ``key`` decoded after it under ``decoding`` (cached per model and decoding: a row that decodes
        the fit its own way, the unconstrained ablation, pays for its own)."""
        self._stage(("decoding", key, decoding), works)

    def pretraining(self, model: str, encoder, pretrain, run=None) -> None:
        """A pre-training (shared by every row with the same start); none when ``pretrain`` is None."""
        if pretrain is None:
            return
        steps = pretrain.steps or pretrain.epochs * -(-self.scale.pretrain_documents // pretrain.batch_size)
        self.tokenise(encoder)  # its corpus is the fine-tuning corpus (at its own block shape)
        self.fit(
            pretraining_key(model, encoder, pretrain),
            [Work("pre-training", f"pretrain:{model}", steps * pretrain.batch_size, tokens_of(encoder))],
        )

    def dev_evaluations(self, model: str, encoder, budget) -> list[Work]:
        """Each dev evaluation encodes the corpus; with ``dev_candidates`` k, at most k + 1 documents per dev
        query (BM25's top k and a judged one; an upper bound), then the dev-best checkpoint the whole corpus."""
        if not (budget.dev_candidates and self.scale.dev_queries):  # unknown dev size: the corpus (a bound)
            return [self.encode("dev evaluation", model, encoder, budget.dev_evals)]
        candidates = min(self.scale.documents, self.scale.dev_queries * (budget.dev_candidates + 1))
        return [
            Work("dev evaluation", f"encode:{model}", budget.dev_evals * candidates, tokens_of(encoder)),
            self.encode("dev evaluation", model, encoder),
        ]


def tokens_of(encoder) -> int:
    return encoder.segment_length * encoder.max_segments


LADDER_NOTEBOOK = "90_budget_ladder"
TRAINING_NOTEBOOKS = tuple(TABLES)  # every notebook with a table (papers/catalogue.py), in run_all.sh's order
ESTIMATED_NOTEBOOKS = (*TRAINING_NOTEBOOKS, LADDER_NOTEBOOK)  # the ladder's rungs above 1x


def notebook_plan(
    profile: str | Path,
    notebook: str,
    backbone: str | None = None,
    scale: Scale | str | None = None,
    params: dict | None = None,
    every_rate: bool = False,
    devices: int | None = None,
) -> Plan:
    """The work ``notebook`` does under ``profile`` (its rows built, nothing read or trained). ``backbone``
    replaces the profile's (the rows' shapes do not depend on it; the papers' bert-base-uncased need not
    be on this machine). ``scale``: a :class:`Scale`, or ``"paper"`` / ``"benchmark"`` (default paper).
    ``params``: the notebook's values as given to it (``run_all.sh``'s), instead of the profile's.
    ``every_rate``: each seed walked at every rate of its row's grid (:class:`Planner`; a deadline's prices).
    ``devices``: as ``--set n_devices=`` (each fit's processes), instead of the profile's."""
    overrides = {"backbone": backbone} if backbone else {}  # as --backbone: the ladder's rungs get it too
    if devices is not None:
        overrides["n_devices"] = devices
    overrides = overrides or None
    if params is None:
        params = parameters_for(profile_path(profile), NOTEBOOKS / f"{notebook}.ipynb", overrides)
    if notebook == LADDER_NOTEBOOK:
        return ladder_plan(params, scale)
    table = TABLES[notebook]
    study = Study(notebook, params, table.family, progress=False)
    planner = Planner(study, _scale(scale, table.family.role, params), every_rate)
    for system, seeds in table.runs(study):  # the rows and seeds Study.run_table fits
        planner.run(system, seeds)
    for system in table.beside(study) if table.beside else []:  # measured beside the table, not fitted
        planner.run(system)
    return planner.plan


def _scale(scale: Scale | str | None, role: str, params: dict) -> Scale:
    return scale if isinstance(scale, Scale) else scale_for(scale or "paper", role, params.get("max_docs", 0))


def ladder_plan(params: dict, scale: Scale | str | None) -> Plan:
    """The budget ladder's work: each headline's rows at every rung above 1x, with the rung's seeds (the
    1x rung is the headline notebook's own fits, keyed alike, so it costs nothing here)."""
    from longdoc.experiments.papers import ladder

    plan = Plan(LADDER_NOTEBOOK)
    settings = ladder.ladder_settings(params)
    for headline in ladder.HEADLINES:
        role = headline.family.role
        for multiplier in settings.multipliers(headline.key):
            if multiplier == 1:
                continue
            study = ladder.rung_study(params, headline, multiplier, settings.ladder_two_seeds_until, progress=False)
            planner = Planner(study, _scale(scale, role, study.params))
            planner.plan = plan
            for system in headline.rows(study):
                planner.run(system)
    return plan


def profile_path(profile: str | Path) -> Path:
    path = Path(profile)
    return path if path.suffix == ".yaml" else PROFILES / f"{profile}.yaml"


def priced_by_spread(
    works: list[Work], prices: dict[str, Price], unpriced: set[str], approximated: set[str] | None = None
) -> dict[str, dict[str, float]]:
    """One GPU's hours of ``works`` by spread, then by kind of work; jobs without a price go to
    ``unpriced``, jobs priced as another (a stand-in, a forward pass) to ``approximated``."""
    hours: dict[str, dict[str, float]] = {}
    for work in works:
        price = price_of(work.job, prices)
        if price is None:
            unpriced.add(work.job)
            continue
        if approximated is not None and price.measured != work.job:
            approximated.add(f"{work.job} as {price.measured}")
        kinds = hours.setdefault(work.spread, {})
        kinds[work.what] = kinds.get(work.what, 0.0) + work.items * price.per_item(work.tokens) / 3600
    return hours


def priced(
    works: list[Work], prices: dict[str, Price], unpriced: set[str], approximated: set[str] | None = None
) -> dict[str, float]:
    """One GPU's hours of ``works`` by kind of work (every spread), as :func:`priced_by_spread`."""
    hours: dict[str, float] = {}
    for kinds in priced_by_spread(works, prices, unpriced, approximated).values():
        for kind, each in kinds.items():
            hours[kind] = hours.get(kind, 0.0) + each
    return hours


def chain_seconds(plan: Plan, prices: dict[str, Price]) -> dict[str, float]:
    """For each fit of ``plan`` (by :func:`~longdoc.experiments.deadline.price_key`), the priced GPU-seconds
    from it to the end of its chain (the largest where several chains share it: a warm start's fit is
    priced to the end of the longest chain that starts from it, not of all of them): what a deadline
    asks of the time left before the chain builds its first artefact, at one GPU's time. Unpriced work
    counts as nothing, and so do the stages around the fits (tokenising, BM25's index and the notebook's
    searches, generation, the decoding after a fit), which no chain holds; a fit's own BM25 negatives and
    dev decoding are in its works, so its price holds them (their CPU seconds too)."""
    seconds = {key: 3600 * sum(priced(works, prices, set()).values()) for key, works in plan.works.items()}
    found: dict[str, float] = {}
    for chain in plan.chains:
        remaining = 0.0
        for key in reversed(chain):
            remaining += seconds[key]
            name = price_key(key)
            found[name] = max(found.get(name, 0.0), remaining)
    return found


def notebook_title(notebook: str) -> str:
    """The notebook's first heading (what it reproduces)."""
    for cell in json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return notebook


def estimate(
    profile: str | Path = "paper",
    notebooks: tuple[str, ...] = TRAINING_NOTEBOOKS,
    measurements: Path = MEASUREMENTS,
    backbone: str | None = "minilm",
    scale: str = "paper",
    hidden: int = 768,
    gpus: int = 1,
    cpu_measurements: Path = CPU_MEASUREMENTS,
) -> pd.DataFrame:
    """One row per notebook: its fits; its H100 GPU-hours in ``run_all.sh``'s order and alone, on ``gpus``
    GPUs (:func:`~longdoc.bench.cards.scaling_efficiency`); the same on an A100 and a V100
    (:func:`~longdoc.bench.cards.card_factor`); its CPU core-hours (tokenising, BM25); the H100 hours by
    kind of work, and what was priced as something else or not at all. Priced at model width ``hidden``
    on corpora of ``scale``."""
    prices = all_prices(measurements, hidden, cpu_measurements)
    done: set[tuple] = set()
    rows = []
    for notebook in notebooks:
        plan = notebook_plan(profile, notebook, backbone, scale, devices=gpus)
        unpriced, approximated = set(plan.unpriced), set()
        own = [w for key in plan.works if key not in done and built(plan, key, done) for w in plan.works[key]]
        every = [w for key in plan.works if built(plan, key, set()) for w in plan.works[key]]
        alone = priced_by_spread(every, prices, unpriced, approximated)
        spreads = priced_by_spread(own, prices, unpriced)
        by_kind = priced(own, prices, set())
        rows.append(
            {
                "notebook": notebook,
                "reproduces": notebook_title(notebook).split(" · ", 1)[-1],
                "fits": plan.fits,
                "new fits": sum(1 for key in plan.works if key not in done and key[0] in ("fit", "pretraining")),
                "GPU-hours": on_card(spreads, "H100", gpus),
                "alone": on_card(alone, "H100", gpus),
                **{f"{card} GPU-hours": on_card(spreads, card, gpus) for card in CARDS[1:]},
                "CPU core-hours": sum(by_kind.get(kind, 0.0) for kind in CPU_KINDS),
                **{f"{kind} h": by_kind.get(kind, 0.0) for kind in (*WORK_KINDS, *CPU_KINDS)},
                "priced as": "; ".join(sorted(approximated)),
                "not priced": "; ".join(sorted(unpriced)),
            }
        )
        done |= set(plan.works)
    return pd.DataFrame(rows)


def built(plan: Plan, key: tuple, done: set[tuple]) -> bool:
    """Whether ``plan`` does the work under ``key``: a stage needed only by fits (``needed_by``) is done
    where one of them is built, i.e. not already in ``done`` (an earlier notebook's); one needed by
    :data:`ANY_FIT`, where the notebook builds any."""
    needing = plan.needed_by.get(key)
    if needing is None:
        return True
    if ANY_FIT in needing:
        needing = needing - {ANY_FIT} | plan.fitted
    return bool(needing - done)


def on_card(spreads: dict[str, dict[str, float]], card: str, gpus: int) -> float:
    """GPU-hours held on ``gpus`` of ``card`` (wall time x GPUs) for the GPU kinds of work in ``spreads``
    (one H100's hours by spread, then kind: :func:`priced_by_spread`): split work at the card's scaling
    efficiency, work every process repeats or one process does while the others wait on each GPU."""
    held = 0.0
    for spread, hours in spreads.items():
        on_one = sum(hours.get(kind, 0.0) * card_factor(card, kind) for kind in WORK_KINDS)
        held += on_one / scaling_efficiency(card, gpus) if spread == "split" else on_one * gpus
    return held


WORK_KINDS = (
    "fine-tuning",
    "dev evaluation",
    "negatives",
    "pre-training",
    "zero-shot",
    "decoding",
    "query generation",
    "identifiers",
)  # on the GPUs
CPU_KINDS = ("tokenising", "BM25")  # on the node's cores, priced in core-hours of this 2-core machine
README = REPO_ROOT / "README.md"
README_MARKERS = ("<!-- gpu-hours: python -m longdoc.bench.gpu_hours --readme -->", "<!-- /gpu-hours -->")


RECIPE_PREFIX = "LONGDOC_USE_ACTIVE_ENV=1"  # a node's CUDA environment, not a CPU .venv built by run_all.sh
RECIPE_GPUS = 8  # the papers' 8 GPUs: each step's batch is split across them
RECIPE_DEVICES = f" --set n_devices={RECIPE_GPUS}"
PRETRAINING_TEXT = "BookCorpus + Wikipedia"  # Longtriever's (section 4.1): the user's .txt file or BEIR folder


def recipe_table(frame: pd.DataFrame, profile: str = "paper") -> str:
    """The README's recipe table: each notebook's command, data, fits, GPU-hours on H100 (in order and
    alone), A100 and V100, CPU core-hours, and the totals."""

    lines = [
        "| notebook | reproduces | command | data | fits (new) | H100 GPU-hours in order (alone) | A100 | V100 "
        "| CPU core-hours | mostly |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.to_dict(orient="records"):
        role, number, hours = TABLES[row["notebook"]].family.role, row["notebook"][:2], row["GPU-hours"]
        kinds = {kind: row[f"{kind} h"] for kind in WORK_KINDS}
        top = max(kinds, key=kinds.get)
        share = kinds[top] / sum(kinds.values()) if hours else 0
        mostly = f"{top} {share:.0%}" if hours else "its rows are earlier notebooks'"
        data, corpus = f"--data {role}=DIR", PAPER_SCALE[role].name
        if "pretrain_corpus" in notebook_parameter_names(NOTEBOOKS / f"{row['notebook']}.ipynb"):
            data, corpus = f"{data} --data {PRETRAINING}=TEXT", f"{corpus}; pre-training: {PRETRAINING_TEXT}"
        lines.append(
            f"| {number} | {row['reproduces']} | `{RECIPE_PREFIX} ./run_all.sh --profile {profile}{RECIPE_DEVICES} {data} --only {number}` "
            f"| {corpus} | {row['fits']} ({row['new fits']}) | {hours:,.0f} ({row['alone']:,.0f}) "
            f"| {row['A100 GPU-hours']:,.0f} | {row['V100 GPU-hours']:,.0f} | {row['CPU core-hours']:,.1f} | {mostly} |"
        )
    total = {
        column: frame[column].sum() for column in ("GPU-hours", "A100 GPU-hours", "V100 GPU-hours", "CPU core-hours")
    }
    lines.append(
        f"| all | | `{RECIPE_PREFIX} ./run_all.sh --profile {profile}{RECIPE_DEVICES} --data ...` | | "
        f"| {total['GPU-hours']:,.0f} | {total['A100 GPU-hours']:,.0f} | {total['V100 GPU-hours']:,.0f} "
        f"| {total['CPU core-hours']:,.0f} | |"
    )
    return "\n".join(lines)


def readme_block(frame: pd.DataFrame, profile: str = "paper") -> str:
    return "\n".join([README_MARKERS[0], recipe_table(frame, profile), README_MARKERS[1]])


def write_fit_prices(args) -> None:
    """``--fit-prices``: one notebook's :func:`chain_seconds` as JSON (``LONGDOC_FIT_PRICES`` reads it)."""
    import yaml

    (notebook, *others) = [n for n in TRAINING_NOTEBOOKS if args.only and n.startswith(args.only)] or [None]
    if notebook is None or others or "," in args.only:
        raise SystemExit(f"--fit-prices: --only {args.only!r} must name one training notebook")
    params = yaml.safe_load(args.parameters.read_text()) if args.parameters else None
    values = params or load_profile(profile_path(args.profile))
    scale = args.scale or ("paper" if values.get("profile") == "paper" else "benchmark")
    hidden = args.hidden or priced_width(values.get("backbone"))
    plan = notebook_plan(args.profile, notebook, scale=scale, params=params, every_rate=True)
    found = {
        "notebook": notebook,
        "measurements": str(args.measurements),
        "hidden": hidden,
        "scale": scale,
        "chain_seconds": chain_seconds(plan, load_prices(args.measurements, hidden)),
    }
    args.fit_prices.write_text(json.dumps(found, indent=1) + "\n")


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(prog="python -m longdoc.bench.gpu_hours", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--only", default="", help="notebook number prefixes, e.g. 10,20")
    parser.add_argument("--measurements", type=Path, default=MEASUREMENTS)
    parser.add_argument("--readme", action="store_true", help="rewrite the README's recipe table from the estimate")
    parser.add_argument(
        "--scale",
        choices=sorted(SCALES),
        help="corpus sizes (default: paper for the paper profile, else the embedded benchmark)",
    )
    parser.add_argument(
        "--hidden",
        type=int,
        help="model width whose measured prices apply (default: 384 for minilm and manpages-mlm, else 768)",
    )
    parser.add_argument(
        "--fit-prices",
        type=Path,
        help="write, for one notebook (--only NN), each fit's priced seconds to the end of its chain (a deadline's)",
    )
    parser.add_argument("--parameters", type=Path, help="with --fit-prices: the notebook's values (YAML, run_all.sh's)")
    parser.add_argument(
        "--gpus",
        type=int,
        help=f"GPUs each fit runs on, priced at the published scaling efficiency (default: the profile's n_devices; "
        f"--readme: {RECIPE_GPUS})",
    )
    args = parser.parse_args(argv)
    if args.fit_prices:
        write_fit_prices(args)
        return pd.DataFrame()
    wanted = tuple(p for p in args.only.split(",") if p)
    listed = TRAINING_NOTEBOOKS if args.readme else ESTIMATED_NOTEBOOKS
    notebooks = tuple(n for n in listed if not wanted or n.startswith(wanted))
    profile_name = profile_path(args.profile).stem
    scale = args.scale or ("paper" if profile_name == "paper" else "benchmark")
    values = load_profile(profile_path(args.profile))
    hidden = args.hidden or priced_width(values.get("backbone"))
    gpus = args.gpus or (RECIPE_GPUS if args.readme else int(values.get("n_devices", 1)))
    frame = estimate(args.profile, notebooks, args.measurements, scale=scale, hidden=hidden, gpus=gpus)
    if scale == "benchmark":
        frame.insert(frame.columns.get_loc("GPU-hours"), "GPU-minutes", frame["GPU-hours"] * 60)
        frame.insert(frame.columns.get_loc("alone"), "alone minutes", frame["alone"] * 60)
    with pd.option_context("display.max_columns", None, "display.width", 250, "display.max_colwidth", 60):
        print(frame.round(2).to_string(index=False))
    total = {column: frame[column].sum() for column in ("GPU-hours", "A100 GPU-hours", "V100 GPU-hours")}
    print(
        f"total on {gpus} GPU(s) per fit: {total['GPU-hours']:,.2f} H100 GPU-hours ({total['GPU-hours'] * 60:,.0f} "
        f"minutes), {total['A100 GPU-hours']:,.2f} A100, {total['V100 GPU-hours']:,.2f} V100; "
        f"{frame['CPU core-hours'].sum():,.2f} CPU core-hours; at the {scale} scale, model width {hidden}"
    )
    if args.readme:
        if (
            wanted
            or args.profile != "paper"
            or args.measurements != MEASUREMENTS
            or scale != "paper"
            or gpus != RECIPE_GPUS
        ):
            raise SystemExit(
                "--readme: the README's table is the paper profile's, all notebooks, the committed measurements"
            )
        rewrite_marked_block(README, README_MARKERS, readme_block(frame))
        print(f"wrote the recipe table into {README}")
    return frame


if __name__ == "__main__":
    main()
