"""NCI retrieval: beam search over identifiers (section 3.4, Algorithm 2) behind the
:class:`~longdoc.types.Retriever` protocol.

Decoding is ``transformers``' beam search (``generate``) on :class:`~longdoc.models.nci.NciModel`,
batched over queries, with :class:`~longdoc.index.prefix_tree.PrefixConstraint` as a logits
processor for the constrained search (as GENRE constrains BART's beam search); ``constrained=False``
is the ablation, where any token may follow any prefix. A hypothesis's score is
``Σ log p(r_t | q, r_<t) / L^length_penalty`` over its L generated tokens (EOS included), as
Algorithm 2's ``sum_log_prob / len(prefix)`` with the paper's length penalty of 0.8 as exponent;
the probabilities are the model's, not renormalised over the allowed tokens (Algorithm 2's
``f(r_i)``). A search returns the ``beam_size`` best complete identifiers, so ``k`` above
``beam_size`` gives ``beam_size`` documents. An identifier that names no document (possible only
unconstrained) keeps its rank in the run under the id ``nci-invalid:<its tokens>``, a miss for every
metric, as the released code kept invalid ids in its lists.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LogitsProcessorList

from longdoc.index.prefix_tree import PrefixConstraint, PrefixTree
from longdoc.index.semantic_ids import IdTokenizer
from longdoc.models.nci import NciModel
from longdoc.progress import tqdm
from longdoc.types import Run

INVALID_PREFIX = "nci-invalid:"
FILLER_SCORE = -1e8


@dataclass(frozen=True)
class DecodingConfig:
    beam_size: int = 100  # the paper's B
    length_penalty: float = 0.8  # the paper's
    constrained: bool = True
    batch_size: int = 16  # queries decoded together

    def __post_init__(self) -> None:
        if self.beam_size < 1 or self.batch_size < 1:
            raise ValueError(f"beam_size and batch_size must be >= 1: {self}")


def beam_search(
    model: NciModel, queries: list[str], tree: PrefixTree, config: DecodingConfig, k: int | None = None
) -> list[list[tuple[list[int], float]]]:
    """For each query, up to ``min(k, beam_size)`` ``(identifier tokens, score)``, best first (tokens end
    in EOS unless an unconstrained hypothesis ran to the length limit without it)."""
    beams = min(config.beam_size, len(tree)) if config.constrained else config.beam_size
    returned = min(k or beams, beams)
    processors = LogitsProcessorList([PrefixConstraint(tree)] if config.constrained else [])
    device = next(model.parameters()).device
    inputs = {name: tensor.to(device) for name, tensor in model.query_inputs(queries).items()}
    with torch.no_grad():
        out = model.generate(
            inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            num_beams=beams,
            num_return_sequences=returned,
            max_new_tokens=model.nci.max_id_length,
            length_penalty=config.length_penalty,
            early_stopping="never",
            do_sample=False,
            logits_processor=processors,
            output_scores=True,
            return_dict_in_generate=True,
            use_cache=True,
        )
    sequences, scores = out.sequences[:, 1:].tolist(), out.sequences_scores.tolist()
    results = []
    for row in range(len(queries)):
        hits = []
        for tokens, score in zip(
            sequences[row * returned : (row + 1) * returned], scores[row * returned : (row + 1) * returned]
        ):
            if score < FILLER_SCORE:
                continue  # a filler hypothesis (fewer valid identifiers than beams: -inf or transformers' -1e9)
            hits.append((tokens[: tokens.index(IdTokenizer.EOS) + 1] if IdTokenizer.EOS in tokens else tokens, score))
        results.append(hits)
    return results


class NciRetriever:
    """``search(queries, k)``: the documents whose identifiers the model decodes for each query."""

    def __init__(
        self,
        model: NciModel,
        doc_ids: list[str],
        identifiers: list[tuple[int, ...]],
        id_tokenizer: IdTokenizer,
        config: DecodingConfig = DecodingConfig(),
        progress: bool = False,
    ):
        if len(doc_ids) != len(identifiers):
            raise ValueError(f"{len(doc_ids)} documents but {len(identifiers)} identifiers")
        self.model, self.doc_ids, self.id_tokenizer, self.config, self.progress = (
            model,
            doc_ids,
            id_tokenizer,
            config,
            progress,
        )
        self.identifiers = identifiers
        self.tree = PrefixTree([id_tokenizer.encode(i) for i in identifiers], id_tokenizer.vocab_size, IdTokenizer.EOS)

    def document(self, tokens: list[int]) -> str:
        number = self.tree.sequence_number(tokens)
        if number is not None:
            return self.doc_ids[number]
        digits = tokens[:-1] if tokens and tokens[-1] == IdTokenizer.EOS else tokens
        return INVALID_PREFIX + "-".join(str(t) for t in digits)

    def decode(self, queries: dict[str, str], k: int = 100) -> dict[str, list[tuple[str, float]]]:
        """``{query id: [(doc id, score), ...]}`` best first."""
        qids = list(queries)
        self.model.eval()
        out: dict[str, list[tuple[str, float]]] = {}
        size = self.config.batch_size
        for start in tqdm(range(0, len(qids), size), desc="NCI beam search", disable=not self.progress):
            chunk = qids[start : start + size]
            for qid, hits in zip(
                chunk, beam_search(self.model, [queries[q] for q in chunk], self.tree, self.config, k)
            ):
                out[qid] = [(self.document(tokens), score) for tokens, score in hits]
        return out

    def search(self, queries: dict[str, str], k: int = 100) -> Run:
        return {qid: dict(hits) for qid, hits in self.decode(queries, k).items()}
