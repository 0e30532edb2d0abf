"""Why a system ranked a document where it did: for segment models the segment whose vector scored
the query highest (MaxP, SeDR: the document's score is that maximum), with the query's terms marked;
for NCI the decoded identifier and how many documents share each of its prefixes."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import numpy as np

STOPWORDS = frozenset(
    "a an and are as at be by for from how in is it of on or that the this to what when where which who why with".split()
)


@dataclass(frozen=True)
class Evidence:
    """The deciding segment of one document for one query (``segment`` None: one vector for the whole
    document, so no single segment decides), every segment's score, and the text to show."""

    segment: int | None
    scores: list[float]
    segments: int
    text: str
    note: str


def query_terms(query: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9_]+", query.lower()) if len(t) > 1 and t not in STOPWORDS]


def highlight(text: str, query: str) -> str:
    """``text`` as HTML with the query's terms (not its stop words) in ``<mark>``, case-insensitively."""
    terms = query_terms(query)
    escaped = html.escape(text)
    if not terms:
        return escaped
    pattern = re.compile(
        r"\b(" + "|".join(re.escape(t) for t in sorted(set(terms), key=len, reverse=True)) + r")\b", re.I
    )
    return pattern.sub(r"<mark>\1</mark>", escaped)


def deciding_segment(searcher, doc_id: str, query: str) -> Evidence:
    """The segment of ``doc_id`` that decided its score for ``query`` under a dense searcher (its
    model, corpus and corpus vectors, :class:`~longdoc.explore.ranking.Searcher`)."""
    retriever = searcher.engine()
    model, corpus = searcher.model, searcher.corpus
    number = corpus.doc_ids.index(doc_id)
    rows = np.flatnonzero(retriever.owners == number)
    segments = corpus.segments[number]
    decode = model.tokenizer.decode
    if retriever.exact:
        return Evidence(
            None,
            [],
            len(segments),
            decode(segments[0]),
            f"{model.name} scores a document with its own function over all {len(segments)} segment(s)",
        )
    query_vector = model.encode_queries([query])[0]
    scores = [float(v) for v in retriever.vectors[rows] @ query_vector]
    if len(rows) == len(segments):
        best = int(np.argmax(scores))
        interaction = getattr(model.config, "interaction", "none")
        if len(segments) == 1:
            note = "the model read one segment"
        elif interaction == "none":
            note = f"segment {best + 1} of {len(segments)} decided the score"
        else:
            note = f"segment {best + 1} of {len(segments)} scored best (its vector also read the others: {interaction})"
        return Evidence(best, scores, len(segments), decode(segments[best]), note)
    return Evidence(
        None,
        scores,
        len(segments),
        decode(segments[0]),
        f"one vector for all {len(segments)} blocks, none decides alone (the first shown)",
    )


def identifier_path(retriever, doc_id: str, examples: int = 3) -> list[dict]:
    """NCI: the document's semantic identifier, and for each of its prefixes how many documents share
    it and a few of their ids (the deeper the shared prefix, the closer the documents were clustered)."""
    number = retriever.doc_ids.index(doc_id)
    identifier = tuple(retriever.identifiers[number])
    rows = []
    for depth in range(1, len(identifier) + 1):
        prefix = identifier[:depth]
        under = [d for d, i in zip(retriever.doc_ids, retriever.identifiers) if tuple(i[:depth]) == prefix]
        rows.append(
            {
                "prefix": "-".join(map(str, prefix)),
                "documents": len(under),
                "examples": ", ".join([d for d in under if d != doc_id][:examples]),
            }
        )
    return rows
