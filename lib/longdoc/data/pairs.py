"""Document pairs for long-to-long matching (SMITH): ``pairs/<split>.tsv`` beside a BEIR corpus.

Internal format: header ``source-id target-id label``, one labelled pair per line (label 1 = match).
Importers for the published pair files (GWikiMatch, Wiki65K, AAN104K) map onto it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from longdoc.data.errors import DataFormatError
from longdoc.io import atomic_write

HEADER = ("source-id", "target-id", "label")


@dataclass(frozen=True)
class DocumentPair:
    source: str
    target: str
    label: int


def read_pair_tsv(
    path: str | Path,
    columns: tuple[str, str, str] = HEADER,
    known_ids: set[str] | dict | None = None,
    on_unknown: str = "error",
    stats: dict | None = None,
) -> list[DocumentPair]:
    """Read tab-separated labelled pairs whose three columns are named by ``columns`` (a permutation of
    ``source-id``, ``target-id``, ``label``). A header line equal to the column names is skipped.
    Pairs naming an id outside ``known_ids`` are an error, or with ``on_unknown='skip'`` skipped and
    counted in ``stats['skipped_unknown']``; a repeated pair is always an error."""
    if sorted(columns) != sorted(HEADER):
        raise ValueError(f"columns must be a permutation of {HEADER}, got {columns}")
    where = {name: columns.index(name) for name in HEADER}
    path = Path(path)
    pairs: list[DocumentPair] = []
    seen: set[tuple[str, str]] = set()
    skipped = 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            fields = [f.strip() for f in line.rstrip("\n").split("\t")]
            if number == 1 and (tuple(fields) == columns or fields[where["label"]].lower() == "label"):
                continue
            if len(fields) != 3:
                raise DataFormatError(path, f"expected 3 tab-separated fields, found {len(fields)}", number)
            source, target, label = (fields[where[name]] for name in HEADER)
            try:
                value = int(float(label))
            except ValueError:
                raise DataFormatError(path, f"label {label!r} is not a number", number) from None
            if not source or not target:
                raise DataFormatError(path, "empty document id", number)
            if known_ids is not None and (source not in known_ids or target not in known_ids):
                if on_unknown == "skip":
                    skipped += 1
                    continue
                unknown = source if source not in known_ids else target
                raise DataFormatError(path, f"unknown document id {unknown!r}", number)
            key = (source, target)
            if key in seen:
                raise DataFormatError(path, f"duplicate pair ({source!r}, {target!r})", number)
            seen.add(key)
            pairs.append(DocumentPair(source, target, value))
    if stats is not None:
        stats["skipped_unknown"] = skipped
    return pairs


def save_pairs(pairs: dict[str, list[DocumentPair]], directory: str | Path) -> None:
    for split, rows in pairs.items():
        with atomic_write(Path(directory) / "pairs" / f"{split}.tsv") as handle:
            handle.write("\t".join(HEADER) + "\n")
            for pair in rows:
                handle.write(f"{pair.source}\t{pair.target}\t{pair.label}\n")


def load_pairs(directory: str | Path, known_ids: set[str] | dict | None = None) -> dict[str, list[DocumentPair]]:
    folder = Path(directory) / "pairs"
    if not folder.is_dir():
        raise DataFormatError(folder, "missing: this dataset has no document pairs")
    return {p.stem: read_pair_tsv(p, known_ids=known_ids) for p in sorted(folder.glob("*.tsv"))}


def read_gwikimatch(path: str | Path, known_ids=None, on_unknown: str = "error", stats=None) -> list[DocumentPair]:
    """GWikiMatch release TSV: ``source URL, target URL, label`` (labels 0/1/2; 1 and 2 count as a match,
    as in its README). Our label is binarised; the graded label is not kept."""
    pairs = read_pair_tsv(path, ("source-id", "target-id", "label"), known_ids, on_unknown, stats)
    return [DocumentPair(p.source, p.target, int(p.label > 0)) for p in pairs]


def read_smash_pairs(path: str | Path, known_ids=None, on_unknown: str = "error", stats=None) -> list[DocumentPair]:
    """Wiki65K / AAN104K pair files (Jiang et al. 2019, used by SMITH): ``label, source id, target id``
    per line, tab-separated. The documents themselves come as a BEIR corpus (``_id`` = the pair ids)."""
    return read_pair_tsv(path, ("label", "source-id", "target-id"), known_ids, on_unknown, stats)
