"""The study protocol for NCI's notebooks (40-45): the retrieval :class:`~longdoc.experiments.study.Study`
(data, seeds, dev selection, recording) with the generative family beside BM25 and the dense rows.

- **NCI and DSI rows** (``System.model == "NCI"``, ``System.nci`` an :class:`NciSpec`): every one trains
  ``nci_train_steps`` steps of ``nci_batch_size`` examples; the encoder learning rate is chosen from
  ``nci_learning_rates`` by dev MRR@100 with the first seed (the decoder takes half, the paper's
  ratio), an ablation row takes its full system's choice (``settings_from``); within a run the dev-best
  of ``nci_dev_evals`` evaluations (beam ``nci_dev_beam``) is kept. The reported runs decode the dev
  and test queries with beam ``nci_beam`` and length penalty ``nci_length_penalty``, or with the
  row's own ``decoding`` (the unconstrained ablation decodes the full system's weights).
- **Ensemble** (``"NCI ensemble"``): its members (models on identifiers of other k-means seeds) vote,
  each document scoring Σ 1 / (rank/5 + 1) over the members' lists (the released ensembling).
- **BM25 + DocT5Query** (``"BM25+DocT5Query"``): BM25 over each document followed by the queries NCI
  trains on (the same generated queries, as the paper's baseline).
- **Dense FirstP** (``"FirstP"``, fine-tuned by the retrieval protocol): searched with FAISS (flat
  inner product) by :meth:`Study.run`, and by exact cosine over the same vectors
  (``"FirstP brute force"``), the paper's two BERT rows.
- Measures: Success@1/10/100 (NCI's "Recall@N", the hit rate), MRR@100 and R-Precision.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from longdoc.eval.metrics import Run, evaluate, ranking
from longdoc.experiments.nci import (NCI_MEASURES, FineTunedNci, IdentifierSpec, NciSpec, QuerySpec, decode_nci,
                                     expanded_corpus, finetune_nci, generated_queries)
from longdoc.experiments.retrieval import RUN_DEPTH, evaluation_queries
from longdoc.experiments.study import Study, System, SystemResult
from longdoc.index.bm25 import BM25Retriever
from longdoc.index.nci_retriever import DecodingConfig
from longdoc.models.doc2query import QueryGenerationConfig
from longdoc.train.nci import NciTrainConfig

DECODER_LEARNING_RATE_SHARE = 0.5  # the paper: encoder 2e-4, decoder 1e-4


def ensemble_run(runs: list[Run], depth: int = RUN_DEPTH) -> Run:
    """The released ensemble vote: a document gains 1 / (rank / 5 + 1) from each list it is in (rank 0
    first), and the top ``depth`` by total are kept."""
    merged: Run = {}
    for qid in set().union(*runs):
        votes: dict[str, float] = {}
        for run in runs:
            for rank, doc in enumerate(ranking(run.get(qid, {}))):
                votes[doc] = votes.get(doc, 0.0) + 1.0 / (rank / 5 + 1)
        merged[qid] = dict(sorted(votes.items(), key=lambda item: (-item[1], item[0]))[:depth])
    return merged


def brute_force_run(query_vectors: np.ndarray, doc_vectors: np.ndarray, doc_ids: list[str], qids: list[str],
                    k: int = RUN_DEPTH) -> Run:
    """Exact cosine similarity between every query and every document (the paper's "BERT + BruteForce")."""
    import torch

    queries = torch.nn.functional.normalize(torch.from_numpy(np.asarray(query_vectors, dtype=np.float32)), dim=1)
    docs = torch.nn.functional.normalize(torch.from_numpy(np.asarray(doc_vectors, dtype=np.float32)), dim=1)
    scores, best = (queries @ docs.T).topk(min(k, len(doc_ids)), dim=1)
    return {qid: {doc_ids[d]: float(s) for s, d in zip(scores[row].tolist(), best[row].tolist())}
            for row, qid in enumerate(qids)}


class NciStudy(Study):
    selection_measure = "MRR@100"

    # -- configurations ------------------------------------------------------------------------
    def generation(self) -> QueryGenerationConfig:
        p = self.params
        return QueryGenerationConfig(generator=p["qg_generator"], queries_per_document=p["qg_queries"],
                                     input_length=p["qg_input_length"], max_query_length=p["qg_max_length"],
                                     train_steps=p["qg_train_steps"], seed=self.seeds[0])

    def spec(self, **changes) -> NciSpec:
        """The full NCI system under the study's parameters; ``changes`` override fields (ablations)."""
        p = self.params
        fields = dict(decoder_layers=p["nci_decoder_layers"], adaptor_layers=p["nci_adaptor_layers"],
                      adaptor_rank=p["nci_adaptor_rank"], query_length=p["nci_query_length"], alpha=p["nci_alpha"],
                      identifiers=IdentifierSpec(k=p["nci_k"], c=p["nci_c"]),
                      queries=QuerySpec(terms=p["doc_query_terms"], windows=p["doc_query_windows"],
                                        generation=self.generation()))
        return NciSpec(**(fields | changes))

    def dsi_spec(self) -> NciSpec:
        """DSI (Tay et al.) as NCI's paper compares it: the same encoder and decoder depth, one digit
        vocabulary for every depth (with a learned step embedding), no PAWA, no consistency loss, trained on the labelled queries and
        each document's first terms (DSI's indexing), semantic identifiers."""
        base = self.spec()
        return replace(base, adaptor_layers=0, alpha=0.0, identifiers=replace(base.identifiers, positional=False),
                       queries=replace(base.queries, windows=0, generated=False))

    def decoding(self) -> DecodingConfig:
        return DecodingConfig(beam_size=self.params["nci_beam"], length_penalty=self.params["nci_length_penalty"])

    def dev_decoding(self) -> DecodingConfig:
        return replace(self.decoding(), beam_size=self.params["nci_dev_beam"])

    def nci_train_config(self, learning_rate: float, seed: int, alpha: float) -> NciTrainConfig:
        p = self.params
        return NciTrainConfig(steps=p["nci_train_steps"], batch_size=p["nci_batch_size"], encoder_learning_rate=learning_rate,
                              decoder_learning_rate=learning_rate * DECODER_LEARNING_RATE_SHARE, alpha=alpha,
                              eval_every=max(1, p["nci_train_steps"] // p["nci_dev_evals"]), seed=seed)

    # -- NCI runs ------------------------------------------------------------------------------
    def nci_fit(self, system: System, learning_rate: float, seed: int) -> FineTunedNci:
        spec = system.nci
        return finetune_nci(self.data, spec, self.nci_train_config(learning_rate, seed, spec.alpha), self.dev_decoding(),
                            self.params["backbone"], self.params["pooling"], progress=self.progress)

    def _finetune(self, system: System, learning_rate: float, seed: int):
        if system.model == "NCI":
            return self.nci_fit(system, learning_rate, seed)
        return super()._finetune(system, learning_rate, seed)

    def selection(self, system: System) -> dict:
        if system.model == "NCI" and not system.learning_rates:
            system = replace(system, learning_rates=tuple(self.params["nci_learning_rates"]))
        return super().selection(system)

    def fits(self, system: System, seeds: list[int] | None = None) -> list[FineTunedNci]:
        chosen = self.selection(system)["learning_rate"]
        return [self.nci_fit(system, chosen, seed) for seed in (seeds or self.seeds)]

    def run(self, system: System, seeds: list[int] | None = None) -> SystemResult:
        seeds = list(seeds or self.seeds)
        if system.model == "NCI":
            fits = self.fits(system, seeds)
            decoded = [decode_nci(fit, self.data, system.decoding or self.decoding())[0] for fit in fits]
            training = [{"seed": seed, "best_step": f.history["best_step"], "best_dev": f.best_dev,
                         "dev_curve": [[int(step), round(c[self.selection_measure], 4)] for step, c in f.history["curve"].items()],
                         "train_seconds": round(f.history["train_seconds"], 1), "examples": f.history["examples"]}
                        for seed, f in zip(seeds, fits)]
            result = SystemResult(system, seeds, [r["test"] for r in decoded], [r["dev"] for r in decoded],
                                  self.selection(system), training)
        elif system.model == "NCI ensemble":  # members' first-seed runs (a member already in the table keeps its seeds)
            members = [self.results[m.name] if m.name in self.results else self.run(m, seeds[:1]) for m in system.members]
            result = SystemResult(system, seeds[:1], [ensemble_run([m.test_runs[0] for m in members])],
                                  [ensemble_run([m.dev_runs[0] for m in members])])
        elif system.model == "BM25+DocT5Query":
            generated, _ = generated_queries(self.data, self.generation(), self.params["backbone"], self.progress)
            retriever = BM25Retriever().index(self.data.doc_ids, expanded_corpus(self.data, generated))
            runs = {split: retriever.search(queries, RUN_DEPTH) for split, queries in evaluation_queries(self.data).items()}
            result = SystemResult(system, [None], [runs["test"]], [runs["dev"]])
        elif system.model == "FirstP brute force":
            result = self._brute_force(system, seeds)
        else:
            return super().run(system, seeds)
        self.results[system.name] = result
        return result

    def _brute_force(self, system: System, seeds: list[int]) -> SystemResult:
        dense = replace(system, model="FirstP")
        chosen = self.selection(dense)["learning_rate"]
        test_runs, dev_runs = [], []
        for seed in seeds:
            fit = self._finetune(dense, chosen, seed)
            stored = fit.index()
            if stored is None:
                raise RuntimeError(f"{system.name}: the FirstP run kept no corpus vectors to search by brute force")
            vectors, owners = stored
            documents = np.empty_like(vectors)
            documents[owners] = vectors  # FirstP: one vector per document
            model = fit.model()
            runs = {}
            for split, queries in evaluation_queries(self.data).items():
                runs[split] = brute_force_run(model.encode_queries(list(queries.values())), documents,
                                              self.data.doc_ids, list(queries))
            test_runs.append(runs["test"])
            dev_runs.append(runs["dev"])
        return SystemResult(system, seeds, test_runs, dev_runs, self.selection(dense))

    # -- tables --------------------------------------------------------------------------------
    def nci_table(self, names: list[str] | None = None, split: str = "test") -> pd.DataFrame:
        return self.table(names, NCI_MEASURES, split)

    def compare(self, pairs: list[tuple[str, str]], measure: str = "MRR@100") -> pd.DataFrame:
        return super().compare(pairs, measure)

    def system_records(self) -> dict:
        systems = {}
        if self.results:
            qrels = {split: self.split(split)[1] for split in ("dev", "test")}
            for name, result in self.results.items():
                systems[name] = {"system": result.system.describe(), "seeds": result.seeds,
                                 "test": result.metrics(qrels["test"], NCI_MEASURES),
                                 "dev": [evaluate(run, qrels["dev"], NCI_MEASURES) for run in result.dev_runs],
                                 "selection": result.selection, "training": result.training}
        return systems
