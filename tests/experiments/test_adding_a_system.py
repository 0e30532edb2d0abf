"""The "Adding a system" guide, proven: a ColBERT-style late-interaction retriever written here, in the
test file, runs through the study on the smoke profile's data (fine-tuning, dev selection, search,
findings, record) without any library file knowing it.

What it takes is what the guide lists: the model (a :class:`BiEncoder` subclass that overrides
``embed_queries``, ``document_vectors`` and ``score``), one ``register_encoder`` line, and the rows and
claims a paper module would hold."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from longdoc.experiments.families.retrieval import BM25, RETRIEVAL, Dense, RunOutcome, segment_corpus
from longdoc.experiments.profiles import parameters_for
from longdoc.experiments.settings import EncoderSettings
from longdoc.experiments.study import Study
from longdoc.experiments.systems import System
from longdoc.experiments.verdicts import HOLDS, NOT_SHOWN, REVERSED, Claim
from longdoc.index.dense_retriever import DenseRetriever
from longdoc.models.biencoder import BiEncoder, DocBatch
from longdoc.models.registry import ENCODERS, register_encoder

ROOT = __import__("pathlib").Path(__file__).parents[2]


class ToyColBERT(BiEncoder):
    """Late interaction (Khattab & Zaharia 2020): one unit vector per token of the query and of the
    document; relevance = Σ over query tokens of the max over the document's token vectors."""

    name = "ToyColBERT"
    scored = 0  # calls of score() (the losses, the probe and the search all go through it)

    def query_inputs(self, texts: list[str]) -> dict[str, torch.Tensor]:
        return self.tokenizer(
            texts, padding="max_length", truncation=True, max_length=self.config.max_query_length, return_tensors="pt"
        )

    def embed_queries(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return F.normalize(hidden, dim=-1) * attention_mask.unsqueeze(-1)  # [B, T, d], padding rows zero

    @property
    def max_vectors(self) -> int:
        return self.config.max_segments * self.config.segment_length

    def slots_per_document(self, batch: DocBatch) -> int:
        return batch.max_segments * batch.input_ids.shape[1]

    def document_vectors(self, batch: DocBatch):
        hidden = F.normalize(
            self.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state, dim=-1
        )
        rows, tokens = batch.attention_mask.nonzero(as_tuple=True)
        width = batch.input_ids.shape[1]
        return hidden[rows, tokens], batch.owner[rows], batch.position[rows] * width + tokens

    def score(self, queries: torch.Tensor, documents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        type(self).scored += 1
        similarity = torch.einsum("bth,dsh->btds", queries, documents)
        return similarity.masked_fill(~mask[None, None], float("-inf")).amax(-1).clamp(min=-1e4).sum(1)


@pytest.fixture
def toy_registered():
    register_encoder("ToyColBERT", ToyColBERT)
    yield
    ENCODERS.pop("ToyColBERT", None)


@pytest.mark.slow
def test_a_late_interaction_retriever_runs_through_the_study(isolated_outputs, toy_registered):
    params = parameters_for(ROOT / "notebooks" / "profiles" / "smoke.yaml", ROOT / "notebooks" / "01_baselines.ipynb")
    study = Study("01_baselines", params | {"profile": "test-new-system"}, RETRIEVAL, progress=False)
    toy = System("ToyColBERT", Dense("ToyColBERT", study.settings(EncoderSettings).encoder("ToyColBERT")))
    bm25 = System("BM25", BM25())
    results = study.run_all([bm25, toy])

    # dev selection over the study's grid, one fine-tuning per seed
    chosen = study.selection(toy)
    assert (
        set(chosen["dev"]) == {str(lr) for lr in study.params["learning_rates"]} and chosen["measure"] == "dev MRR@100"
    )
    assert results[1].seeds == study.seeds and len(results[1].fits) == len(study.seeds)
    assert ToyColBERT.scored > 0  # training losses and search scored through the model's own score()

    # search: the test runs are the exact late-interaction ranking of the model the fit kept
    model = results[1].fits[0].model()
    corpus = segment_corpus(model, study.data)
    queries = dict(list(study.split("test")[0].items())[:3])
    run = DenseRetriever(model, corpus, progress=False).search(queries, k=5)
    vectors, owners = model.encode_corpus(corpus, progress=False)
    with torch.no_grad():
        for qid, text in queries.items():
            q = torch.from_numpy(model.encode_queries([text]))
            brute = {
                doc: float(
                    model.score(
                        q,
                        torch.from_numpy(vectors[owners == n])[None],
                        torch.ones(1, (owners == n).sum(), dtype=torch.bool),
                    )
                )
                for n, doc in enumerate(corpus.doc_ids)
            }
            best = sorted(brute, key=lambda d: -brute[d])[:5]
            assert list(run[qid]) == best
            assert list(run[qid].values()) == pytest.approx([brute[d] for d in best], rel=1e-4)

    # tables, intervals, findings and the record read it like any other row
    assert isinstance(results[1].outcomes[0], RunOutcome)
    table = study.table()
    assert list(table.index) == ["BM25", "ToyColBERT"] and 0 <= table.loc["ToyColBERT", "MRR@100"] <= 1
    findings = study.findings([Claim("late interaction beats BM25", "ToyColBERT", "BM25", "toy")])
    assert findings.table["verdict"].iloc[0] in (HOLDS, NOT_SHOWN, REVERSED)
    record = json.loads((study.record() / "metrics.json").read_text())
    assert record["metrics"]["systems"]["ToyColBERT"]["system"]["model"] == "ToyColBERT"
    assert all(np.isfinite(seed["MRR@100"]) for seed in record["metrics"]["systems"]["ToyColBERT"]["test"])
