"""The retrieval family's rows: the fine-tuning :class:`Protocol`, :class:`BM25`, :class:`Dense` (any encoder of
the registry, optionally pre-trained and warm-started) and :class:`ExactSearch`."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from longdoc.eval.probes import in_batch_probe
from longdoc.experiments.cache import portable
from longdoc.experiments.families.pretraining import PretrainedStart
from longdoc.experiments.families.retrieval.family import PROBE_QUERIES, RETRIEVAL, RunOutcome, evaluation_queries
from longdoc.experiments.families.retrieval.fitting import finetune, fit_costs, order_end, stored_index
from longdoc.experiments.families.retrieval.runs import bm25_run, exact_cosine_run, segment_corpus, zero_shot
from longdoc.experiments.fitting import FineTuned
from longdoc.experiments.settings import BudgetSettings
from longdoc.experiments.systems import Spec, System
from longdoc.models.biencoder import BiEncoder, EncoderConfig
from longdoc.models.registry import build_encoder
from longdoc.train.pretrain import PretrainConfig


@dataclass(frozen=True)
class Protocol:
    """How a dense system is fine-tuned; each of the papers' tables states one (``papers/``)."""

    name: str
    negatives: str = "none"  # "none": in-batch only; "bm25": plus BM25 hard negatives in iteration 1;
    # "warm start": plus static hard negatives from the warm-start system's run (SeDR: STAR's top K)
    hard_negatives: int = 0
    iterations: int = 1  # > 1: later iterations mine hard negatives with the model itself
    negative_depth: int = 100  # K: hard negatives are sampled from the top K of the mining run
    cache_size: int = 0  # C: SeDR's late-cache negatives (0: none)


IN_BATCH = Protocol("in-batch negatives, one iteration (Longtriever Tables 2 and 4)")


@dataclass(frozen=True)
class BM25(Spec):
    """BM25 over the documents (:class:`~longdoc.index.bm25.BM25Retriever`)."""

    family = RETRIEVAL
    trained = False

    def evaluate(self, study, seeds: list[int]) -> tuple[list, list[RunOutcome]]:
        runs = {split: bm25_run(study.data, queries) for split, queries in evaluation_queries(study.data).items()}
        return [None], [RunOutcome(runs)]

    def untrained_cost(self, planner, seeds: list[int]) -> None:
        """The cached index, and the dev and test queries searched in this notebook."""
        planner.bm25_per_notebook("BM25 row", "dev", "test")


@dataclass(frozen=True)
class Dense(PretrainedStart, Spec):
    """A dense encoder of the registry: fine-tuned under ``protocol`` (``None``: the backbone as it is),
    from ``pretrain`` (continued pre-training on ``pretrain_corpus``, Longtriever) and/or from the
    fine-tuned ``warm_start`` row (its first-seed fit at its chosen learning rate; SeDR starts from
    STAR), which also mines "warm start" negatives."""

    model: str  # a name of :data:`longdoc.models.registry.ENCODERS`
    encoder: EncoderConfig
    protocol: Protocol | None = IN_BATCH
    pretrain: PretrainConfig | None = None
    pretrain_corpus: str = ""  # "": the dataset's own documents; see :mod:`~longdoc.experiments.families.pretraining`
    warm_start: System | None = None

    family = RETRIEVAL

    @property
    def trained(self) -> bool:
        return self.protocol is not None

    def evaluate(self, study, seeds: list[int]) -> tuple[list, list[RunOutcome]]:
        return [None], [
            RunOutcome(zero_shot(self.model, study.data, self.encoder, study.seeds[0], progress=study.progress))
        ]

    def pretraining_input(self, study) -> tuple:
        return self.pretrain_corpus or study.data, self.encoder, study.data

    def start_key(self) -> str:
        warm = self.warm_start.spec.start_key() if self.warm_start is not None else None
        return repr((self.model, self.encoder, self.pretrain, self.pretrain_corpus, warm))

    def measure(self, study, fit: FineTuned) -> None:
        """The fit's costs (:func:`fit_costs`: SeDR's cost columns), measured where its model is."""
        fit_costs(study, fit)

    def start_origin(self, study) -> dict:
        """The pre-training, and the warm start's fit (at its chosen rate, first seed), the start loads."""
        warm = self.warm_start_fit(study)
        return {**super().start_origin(study), "warm_start": portable(warm.directory) if warm is not None else None}

    def start_probe(self, study) -> dict:
        """The in-batch probe of the start on dev queries (:func:`~longdoc.eval.probes.in_batch_probe`):
        score = accuracy of the relevant document among the batch's, loss its cross-entropy."""
        model = self.starting_model(study)
        queries, qrels = study.split("dev")
        probe = in_batch_probe(model, segment_corpus(model, study.data), queries, qrels, size=PROBE_QUERIES)
        return {
            "probe": f"dev in-batch probe ({probe['queries']} queries, accuracy)",
            "score": probe["accuracy"],
            **probe,
        }

    def warm_start_fit(self, study, seed: int | None = None) -> FineTuned | None:
        """The fit this row starts from: its ``warm_start`` at that row's chosen rate with the same ``seed``
        (default: the first), so each seed's chain is its own replicate and continues its own order; or None."""
        warm = self.checked_warm_start()
        return None if warm is None else study.fit(warm, seed)

    def checked_warm_start(self) -> System | None:
        """``warm_start``, refused unless it is a fine-tuned dense row (before anything is fitted)."""
        if self.warm_start is not None and not (
            isinstance(self.warm_start.spec, Dense) and self.warm_start.spec.trained
        ):
            raise ValueError(f"the warm start {self.warm_start.name!r} is not a fine-tuned dense system")
        return self.warm_start

    def starting_encoder(self, study, seed: int | None = None) -> EncoderConfig:
        """The row's encoder, reading the warm start's backbone (of the same seed) where it has one."""
        start = self.warm_start_fit(study, seed)
        return (
            self.encoder
            if start is None
            else replace(self.encoder, backbone=str(start.directory / "model" / "backbone"))
        )

    def starting_model(self, study, seed: int | None = None) -> BiEncoder:
        """The model before fine-tuning (for the in-batch probe)."""
        seed = study.seeds[0] if seed is None else seed
        return build_encoder(self.model, self.starting_encoder(study, seed), seed, self.start(study))

    def fine_tune(self, study, learning_rate: float, seed: int) -> FineTuned:
        """The fit itself (:func:`finetune`: its earlier iterations and a miner's negatives within)."""
        protocol = self.protocol
        budget = study.settings(BudgetSettings)
        train = budget.train_config(learning_rate, seed, protocol.hard_negatives, protocol.cache_size)
        warm = self.warm_start_fit(study, seed)
        if warm is not None:  # the same seed's shuffle, continued after the warm start's steps: new queries first
            train = replace(train, first_step=order_end(warm))
        miner = warm if protocol.negatives == "warm start" else None
        if protocol.negatives == "warm start" and miner is None:
            raise ValueError(f"{self.model}: 'warm start' negatives need a warm_start system")
        return finetune(
            self.model,
            study.data,
            self.starting_encoder(study, seed),
            train,
            negatives="miner" if miner is not None else protocol.negatives,
            negative_depth=protocol.negative_depth,
            iterations=protocol.iterations,
            init=self.start(study),
            progress=study.progress,
            n_devices=budget.n_devices,
            miner=miner,
            dev_candidates=budget.dev_candidates,
        )

    def outcome(self, study, fit: FineTuned) -> RunOutcome:
        return RunOutcome(fit.outputs)

    # -- its fit plan (the study executes it, the GPU-hour planner prices it) ------------------------------
    def fits(self, plan, learning_rate: float, seed: int) -> None:
        """Its pre-training, its warm start's fit at that row's chosen rate, then one cached fit per
        iteration (fine-tuning, dev evaluations, and from the second iteration the previous model's
        negatives; the last runs the earlier ones within), and a warm start's mining run (run within the
        last iteration's fit, so it has no ``run`` of its own)."""
        warm = self.checked_warm_start()
        plan.pretraining(self.model, self.encoder, self.pretrain, self.start)
        warm_rate = plan.needs(warm, seed) if warm is not None else None
        budget, protocol = plan.budget(), self.protocol
        plan.tokenise(self.encoder)
        for iteration in range(1, protocol.iterations + 1):  # each iteration is its own cached fit
            works = [
                plan.work(
                    "fine-tuning",
                    f"retrieval:{self.model}",
                    plan.fine_tuning_steps(budget) * budget.batch_size,
                    self.encoder,
                ),
                *plan.dev_evaluations(self.model, self.encoder, budget),
                *plan.tokenised_in_processes(budget.n_devices),
            ]
            if iteration > 1:  # hard negatives mined by the previous iteration's model, in the kernel
                works.append(plan.encode("negatives", self.model, self.encoder, spread="one process"))
            elif protocol.negatives == "bm25":  # BM25's negatives of every training query, searched by each fit
                works.append(plan.bm25_search("train"))
            at = replace(self, protocol=replace(protocol, iterations=iteration))
            last = iteration == protocol.iterations
            run = functools.partial(self.fine_tune, learning_rate=learning_rate, seed=seed) if last else None
            key = ("fit", repr(at), repr(budget), learning_rate, seed)
            plan.fit(key, works, run)
            if budget.dev_candidates:  # BM25's top k of each dev query, once per notebook that builds a fit
                plan.bm25_per_notebook("dev candidates", "dev", for_fit=key)
        if protocol.negatives == "warm start" and warm is not None:  # the miner encodes once
            miner = warm.spec  # one run per warm-start fit (cached by its directory)
            key = ("mining", repr(miner), warm_rate, seed)
            plan.fit(key, [plan.encode("negatives", miner.model, miner.encoder, spread="one process")])

    def untrained_cost(self, planner, seeds: list[int]) -> None:
        """Zero-shot: the corpus tokenised and encoded once."""
        planner.tokenise(self.encoder)
        planner.fit(
            ("zero-shot", repr(self)), [planner.encode("zero-shot", self.model, self.encoder, spread="one process")]
        )


@dataclass(frozen=True)
class ExactSearch(Spec):
    """A dense row's fits, searched by exact cosine between every query and every document over the
    vectors kept at the dev-best evaluation (NCI Table 1's "BERT + BruteForce"; one vector per document);
    where the fit kept none (larger than ``INDEX_LIMIT_BYTES``: NQ320k at 768 dimensions, a candidate
    dev evaluation), the dev-best model encodes the corpus again."""

    dense: Dense

    family = RETRIEVAL

    def summary(self, fit: FineTuned, seed: int) -> None:
        return None  # its training is the dense row's

    def fits(self, plan, learning_rate: float, seed: int) -> None:
        self.dense.fits(plan, learning_rate, seed)  # the same fits

    def outcome(self, study, fit: FineTuned) -> RunOutcome:
        model = fit.model()
        stored = stored_index(fit)
        vectors, owners = stored or model.encode_corpus(segment_corpus(model, study.data), progress=study.progress)
        documents = np.empty_like(vectors)
        documents[owners] = vectors  # one vector per document
        return RunOutcome(
            {
                split: exact_cosine_run(
                    model.encode_queries(list(queries.values())), documents, study.data.doc_ids, list(queries)
                )
                for split, queries in evaluation_queries(study.data).items()
            }
        )
