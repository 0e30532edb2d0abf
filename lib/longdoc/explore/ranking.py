"""A system's top k for any query text, with relevance marks (where the query is a judged one) and
document lengths; and the test queries on which two systems disagree most."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from longdoc.eval.metrics import per_query
from longdoc.explore.catalog import Entry
from longdoc.index.bm25 import BM25Retriever
from longdoc.index.dense_retriever import DenseRetriever


@dataclass
class Searcher:
    """Answers ``search(text, k)`` for one catalog entry; built on first use (BM25 indexes the corpus;
    a dense row loads its fit and reuses the corpus vectors kept at its dev-best evaluation where
    there are some, else encodes the corpus once; NCI decodes with the study's beam)."""

    entry: Entry
    _engine: object = field(default=None, repr=False)
    model: object = field(default=None, repr=False)
    corpus: object = field(default=None, repr=False)

    def engine(self):
        if self._engine is None:
            self._engine = {"bm25": self._bm25, "dense": self._dense, "nci": self._nci}[self.entry.kind]()
        return self._engine

    def _bm25(self):
        data = self.entry.study.data
        return BM25Retriever().index(data.doc_ids, data.texts)

    def _dense(self):
        from longdoc.experiments.families.retrieval import segment_corpus, stored_index
        from longdoc.models.registry import build_encoder

        spec, study = self.entry.system.spec, self.entry.study
        fit = self.entry.fit() if spec.trained else None
        self.model = fit.model() if fit else build_encoder(spec.model, spec.encoder, study.seeds[0])
        self.corpus = segment_corpus(self.model, study.data)
        retriever = DenseRetriever(self.model, self.corpus, progress=False)
        stored = stored_index(fit) if fit else None
        return retriever.build() if stored is None else retriever.use_vectors(*stored)

    def _nci(self):
        from longdoc.experiments.families.generative import NciSettings, nci_retriever

        study, spec = self.entry.study, self.entry.system.spec
        fit = self.entry.fit()
        self.model = fit.model()
        return nci_retriever(fit, study.data, spec.decoding or study.settings(NciSettings).decoding(), self.model)

    def search(self, text: str, k: int = 10) -> list[tuple[str, float]]:
        """``[(doc id, score), ...]`` best first (an NCI beam may name fewer than k documents)."""
        if not text.strip():
            raise ValueError("the query is empty: type a query or pick a test query")
        hits = self.engine().search({"q": text}, k).get("q", {})
        return sorted(hits.items(), key=lambda item: -item[1])[:k]


def document_tokens(study, tokenizer=None) -> dict[str, int]:
    """WordPiece tokens per document (title + text), counted once per study."""
    cached = getattr(study, "_explore_lengths", None)
    if cached is None:
        from transformers import AutoTokenizer

        from longdoc.data.stats import document_lengths
        from longdoc.experiments.backbones import tokenizer_name
        from longdoc.models.backbone import resolve_backbone

        tokenizer = tokenizer or AutoTokenizer.from_pretrained(
            resolve_backbone(tokenizer_name(study.params["backbone"]))
        )
        cached = document_lengths(study.data, tokenizer)["tokens"].to_dict()
        study._explore_lengths = cached
    return cached


def ranking_table(entry: Entry, hits: list[tuple[str, float]], qrels: dict[str, int] | None) -> pd.DataFrame:
    """The hits as a table: rank, document id, title, score, relevance (— where the query is not
    judged), and the document's length in tokens."""
    data = entry.study.data
    lengths = document_tokens(entry.study)
    rows = []
    for rank, (doc_id, score) in enumerate(hits, 1):
        document = data.corpus.get(doc_id)
        rows.append(
            {
                "rank": rank,
                "document": doc_id,
                "title": document.title if document else "(not a document: an invalid identifier)",
                "score": float(score),
                "relevant": "—" if qrels is None else ("yes" if qrels.get(doc_id, 0) > 0 else "no"),
                "tokens": lengths.get(doc_id, 0),
            }
        )
    return pd.DataFrame(rows, columns=["rank", "document", "title", "score", "relevant", "tokens"])


def test_runs(searcher: Searcher, queries: dict[str, str], depth: int = 100) -> dict[str, dict[str, float]]:
    """The system's run on ``queries`` (the explorer's own search: the same model, the same index)."""
    return searcher.engine().search(queries, depth)


def disagreements(
    a: Searcher, b: Searcher, queries: dict[str, str], qrels: dict, measure: str = "MRR@100", top: int = 10
) -> pd.DataFrame:
    """The queries on which two systems differ most in ``measure`` (per query, pytrec_eval semantics),
    largest |difference| first, with each system's value and its first relevant document's rank."""
    values = {}
    ranks = {}
    for name, searcher in (("a", a), ("b", b)):
        run = test_runs(searcher, queries)
        values[name] = per_query(run, qrels, [measure])[measure]
        ranks[name] = {q: first_relevant_rank(run.get(q, {}), qrels[q]) for q in queries}
    frame = pd.DataFrame(
        {
            "query": list(queries),
            "text": [queries[q] for q in queries],
            f"{a.entry.name}": [values["a"].get(q, 0.0) for q in queries],
            f"{b.entry.name}": [values["b"].get(q, 0.0) for q in queries],
            f"{a.entry.name} rank": [ranks["a"][q] for q in queries],
            f"{b.entry.name} rank": [ranks["b"][q] for q in queries],
        }
    )
    if a.entry.name == b.entry.name:
        raise ValueError("pick two different systems")
    frame["difference"] = frame[a.entry.name] - frame[b.entry.name]
    order = np.argsort(-frame["difference"].abs().to_numpy(), kind="stable")
    return frame.iloc[order[:top]].reset_index(drop=True)


def first_relevant_rank(scores: dict[str, float], judged: dict[str, int]) -> int | None:
    ranked = sorted(scores, key=lambda d: -scores[d])
    return next((i for i, d in enumerate(ranked, 1) if judged.get(d, 0) > 0), None)
