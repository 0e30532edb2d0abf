"""The document-matching family's dataset: a corpus, labelled document pairs per split, and (where the
dataset has them) each page's outgoing links per split for document-to-document ranking.

Layout, beside or without a BEIR retrieval dataset: ``corpus.jsonl``, ``pairs/<split>.tsv`` and
optionally ``links/<split>.tsv`` (:mod:`longdoc.data.see_also_pairs`). Without links, ranking asks
each source of a split to retrieve its positive partners.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path

from longdoc.data.beir import Document, read_corpus
from longdoc.data.errors import DataFormatError, shown, text_lines
from longdoc.data.pairs import DocumentPair, load_pairs
from longdoc.data.registry import ensure_built

SPLITS = ("train", "dev", "test")


@dataclass
class MatchingDataset:
    name: str
    corpus: dict[str, Document]
    pairs: dict[str, list[DocumentPair]]
    links: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # split -> source -> linked pages
    checksum: str = "unknown"
    manifest: dict = field(default_factory=dict)
    views: dict = field(
        default_factory=dict, repr=False, compare=False
    )  # derived once per loaded dataset (cache.dataset_view)

    def split(self, name: str) -> list[DocumentPair]:
        if name not in self.pairs:
            raise ValueError(
                f"{self.name} has no pair split {name!r} (no pairs/{name}.tsv); it has {sorted(self.pairs)}"
            )
        if not self.pairs[name]:
            raise ValueError(f"{self.name}: pairs/{name}.tsv has no pair")
        return self.pairs[name]

    def documents(self, split: str) -> list[str]:
        """The documents of a split's pairs, in first-seen order."""
        return list(dict.fromkeys(d for p in self.split(split) for d in (p.source, p.target)))

    def ranking_qrels(self, split: str) -> dict[str, dict[str, int]]:
        """Document-to-document ranking: each source page of ``split`` -> the pages it links to (or,
        without links, its positive partners). A linked page that is one of the source's negative pairs
        is left out: the matcher is trained to score it low."""
        if self.links.get(split):
            negatives = {(p.source, p.target) for p in self.pairs.get(split, []) if not p.label}
            qrels = {s: {t: 1 for t in targets if (s, t) not in negatives} for s, targets in self.links[split].items()}
            return {s: judged for s, judged in qrels.items() if judged}
        qrels: dict[str, dict[str, int]] = {}
        for pair in self.split(split):
            if pair.label:
                qrels.setdefault(pair.source, {})[pair.target] = 1
        return qrels

    def texts(self, ids: list[str]) -> list[str]:
        return [self.corpus[d].full_text for d in ids]

    def counts(self) -> dict:
        return {
            split: {
                "pairs": len(rows),
                "positive": sum(p.label for p in rows),
                "sources": len({p.source for p in rows}),
                "documents": len({d for p in rows for d in (p.source, p.target)}),
            }
            for split, rows in self.pairs.items()
        }

    def subsample(self, max_docs: int, seed: int = 0) -> MatchingDataset:
        """A smaller dataset for smoke runs: pairs in a seeded order are kept while their documents fit
        in ``max_docs``; links are kept between kept documents."""
        if max_docs <= 0 or max_docs >= len(self.corpus):
            return self
        order = [(split, p) for split in sorted(self.pairs) for p in self.pairs[split]]
        random.Random(seed).shuffle(order)
        keep: set[str] = set()
        kept: dict[str, list[DocumentPair]] = {split: [] for split in self.pairs}
        for split, pair in order:
            if len(keep | {pair.source, pair.target}) <= max_docs:
                keep |= {pair.source, pair.target}
                kept[split].append(pair)
        for rows in kept.values():
            rows.sort(key=lambda p: (p.source, p.target))
        links = {
            split: {s: t & keep for s, t in sources.items() if s in keep and t & keep}
            for split, sources in self.links.items()
        }
        corpus = {d: doc for d, doc in self.corpus.items() if d in keep}
        return MatchingDataset(
            f"{self.name}[{max_docs}]",
            corpus,
            kept,
            links,
            self.checksum,
            dict(self.manifest, subsample={"max_docs": max_docs, "seed": seed}),
        )


def read_links(path: Path, corpus: dict) -> dict[str, set[str]]:
    links: dict[str, set[str]] = {}
    for number, line in text_lines(path):
        fields = line.rstrip("\n").split("\t")
        if number == 1 and fields[0] == "source-id" or not line.strip():
            continue
        if len(fields) != 2:
            raise DataFormatError(
                path, f"expected 2 tab-separated fields 'source-id target-id', found {len(fields)}", number
            )
        for doc in fields:
            if doc not in corpus:
                raise DataFormatError(path, f"unknown document id {shown(doc)}", number)
        links.setdefault(fields[0], set()).add(fields[1])
    return links


def _checksum(directory: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def load_matching(name: str = "manpages", max_docs: int = 0, seed: int = 0) -> MatchingDataset:
    """The matching dataset ``name`` (``manpages``, built on first use, or a directory holding
    ``corpus.jsonl`` and ``pairs/``); ``max_docs`` > 0 subsamples for smoke runs. Every split's
    documents must be in the corpus, and train, dev and test must all have pairs."""
    directory = ensure_built(name)
    if not (directory / "corpus.jsonl").exists():
        raise DataFormatError(directory / "corpus.jsonl", "missing (a matching dataset needs corpus.jsonl and pairs/)")
    corpus = read_corpus(directory / "corpus.jsonl")
    pairs = load_pairs(directory, known_ids=corpus)
    for split in SPLITS:
        if not pairs.get(split):
            raise DataFormatError(
                directory / "pairs" / f"{split}.tsv", "missing or empty: matching needs train, dev and test pairs"
            )
    link_files = sorted((directory / "links").glob("*.tsv")) if (directory / "links").is_dir() else []
    links = {p.stem: read_links(p, corpus) for p in link_files}
    files = [directory / "corpus.jsonl", *sorted((directory / "pairs").glob("*.tsv")), *link_files]
    dataset = MatchingDataset(
        "manpages" if name == "manpages" else directory.name,
        corpus,
        pairs,
        links,
        _checksum(directory, files),
        {"dataset_parameter": name},
    )
    return dataset.subsample(max_docs, seed)
