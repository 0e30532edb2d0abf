"""Document pairs for long-to-long matching (SMITH): ``pairs/<split>.tsv`` beside a BEIR corpus.

Internal format: header ``source-id target-id label``, one labelled pair per line (label 1 = match).
Importers for the published pair files (GWikiMatch, Wiki65K, AAN104K) map onto it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from longdoc.data.errors import ASCII_NUMBER, DataFormatError, check_id, shown, text_lines, visible
from longdoc.data.jsonl import Document
from longdoc.io import atomic_directory

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
    labels: tuple[int, ...] = (0, 1),
    binarise: bool = False,
    lines: dict | None = None,
) -> list[DocumentPair]:
    """Read tab-separated labelled pairs whose three columns are named by ``columns`` (a permutation of
    ``source-id``, ``target-id``, ``label``). A first line naming the three columns, in any order, is a
    header and gives their order.
    A label outside ``labels``, a document paired with itself, a repeated pair and a pair whose
    reverse carries another label are errors naming the line. Pairs naming an id outside
    ``known_ids`` are an error, or with ``on_unknown='skip'`` skipped and counted in
    ``stats['skipped_unknown']``. ``binarise``: labels > 0 become 1 (before the contradiction check). ``lines`` (when given)
    receives each pair's line, for :func:`refuse_shared_pairs`."""
    if sorted(columns) != sorted(HEADER):
        raise ValueError(f"columns must be a permutation of {HEADER}, got {columns}")
    where = {name: columns.index(name) for name in HEADER}
    path = Path(path)
    pairs: list[DocumentPair] = []
    seen: dict[tuple[str, str], tuple[int, int]] = {}  # (source, target) -> (label, line)
    skipped = 0
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("\t")]
        if number == 1 and sorted(f.lower() for f in fields) == sorted(HEADER):
            where = {name: [f.lower() for f in fields].index(name) for name in HEADER}  # a header says its order
            continue
        if number == 1 and len(fields) == 3 and fields[where["label"]].lower() == "label":
            continue
        if len(fields) != 3:
            raise DataFormatError(
                path, f"expected 3 tab-separated fields {' '.join(columns)!r}, found {len(fields)}", number
            )
        source, target, label = (fields[where[name]] for name in HEADER)
        value = _label(label, labels, path, number)
        value = int(value > 0) if binarise else value
        source, target = check_id(source, path, number), check_id(target, path, number)
        if source == target:
            raise DataFormatError(path, f"document {source!r} is paired with itself", number)
        if known_ids is not None and (source not in known_ids or target not in known_ids):
            if on_unknown == "skip":
                skipped += 1
                continue
            unknown = source if source not in known_ids else target
            raise DataFormatError(path, f"unknown document id {shown(unknown)}", number)
        if (source, target) in seen:
            raise DataFormatError(
                path, f"duplicate pair ({source!r}, {target!r}); first on line {seen[source, target][1]}", number
            )
        reverse = seen.get((target, source))
        if reverse is not None and reverse[0] != value:
            raise DataFormatError(
                path, f"label {value} contradicts label {reverse[0]} of the reverse pair on line {reverse[1]}", number
            )
        seen[source, target] = (value, number)
        pairs.append(DocumentPair(source, target, value))
    if stats is not None:
        stats["skipped_unknown"] = stats.get("skipped_unknown", 0) + skipped
    if lines is not None:
        lines.update({pair: line for pair, (_, line) in seen.items()})
    return pairs


def refuse_shared_pairs(splits: dict[str, tuple[Path, dict[tuple[str, str], int]]]) -> None:
    """``splits``: per split, its pair file and each pair's line (``read_pair_tsv(lines=...)``). A pair of
    documents in two splits, either way round and whatever its labels (SMITH's leakage: a matcher scored on
    a pair it was trained or selected on; with other labels, a contradiction), is an error naming both
    files and lines."""
    seen: dict[frozenset, tuple[str, Path, int, tuple[str, str]]] = {}
    order = ("train", "dev", "test")  # the later split is named first: the one scored on a pair seen before
    for split, (path, lines) in sorted(
        splits.items(), key=lambda item: (order.index(item[0]) if item[0] in order else 3, item[0])
    ):
        for pair, line in sorted(lines.items(), key=lambda item: item[1]):
            other = seen.get(frozenset(pair))
            if other is not None and other[0] != split:
                other_split, other_path, other_line, other_pair = other
                raise DataFormatError(
                    path,
                    f"pair {pair} of split {split!r} is in split {other_split!r} too ({other_pair} at {other_path}, "
                    f"line {other_line}): a pair belongs to one split (in two, a matcher would be scored on a pair "
                    "it was trained or selected on, or taught two labels)",
                    line,
                )
        for pair, line in lines.items():
            seen.setdefault(frozenset(pair), (split, path, line, pair))


def _label(text: str, allowed: tuple[int, ...], path: Path, number: int) -> int:
    """A label written in ASCII (``1``, ``1.0``, ``1e0``; Python's float would also read ``1_0`` and ``١``)."""
    if not ASCII_NUMBER.fullmatch(text):
        raise DataFormatError(path, f"label {text!r} is not a number (ASCII digits)", number)
    value = float(text)
    if not math.isfinite(value) or value != int(value) or int(value) not in allowed:
        raise DataFormatError(path, f"label {text!r} is not one of {list(allowed)}", number)
    return int(value)


def save_pairs(pairs: dict[str, list[DocumentPair]], directory: str | Path) -> None:
    """``<directory>/pairs/<split>.tsv`` for every split, the folder replaced whole (a split of an
    earlier save that ``pairs`` lacks does not survive beside the new ones)."""
    with atomic_directory(Path(directory) / "pairs") as folder:
        write_pair_files(pairs, folder)


def write_pair_files(pairs: dict[str, list[DocumentPair]], folder: Path) -> None:
    for split, rows in pairs.items():
        with open(folder / f"{split}.tsv", "w", encoding="utf-8", newline="\n") as handle:
            handle.write("\t".join(HEADER) + "\n")
            for pair in rows:
                handle.write(f"{pair.source}\t{pair.target}\t{pair.label}\n")


def load_pairs(directory: str | Path, known_ids: set[str] | dict | None = None) -> dict[str, list[DocumentPair]]:
    """``pairs/<split>.tsv`` of ``directory``, each split's pairs; a pair in two splits is refused."""
    folder = Path(directory) / "pairs"
    if not folder.is_dir():
        raise DataFormatError(folder, "missing: this dataset has no document pairs")
    stray = sorted(p.name for p in folder.iterdir() if not p.name.startswith(".") and p.suffix != ".tsv")
    if stray:
        raise DataFormatError(
            folder, f"{stray} are not <split>.tsv files (rename them, e.g. train.tsv, or remove them)"
        )
    pairs, lines = {}, {}
    for path in sorted(folder.glob("*.tsv")):
        lines[path.stem] = (path, {})
        pairs[path.stem] = read_pair_tsv(path, known_ids=known_ids, lines=lines[path.stem][1])
    refuse_shared_pairs(lines)
    return pairs


def read_gwikimatch(
    path: str | Path, known_ids=None, on_unknown: str = "error", stats=None, lines=None
) -> list[DocumentPair]:
    """GWikiMatch release TSV: ``source URL, target URL, label`` (labels 0/1/2; 1 and 2 count as a match,
    as in its README). Our label is binarised; the graded label is not kept."""
    return read_pair_tsv(
        path,
        ("source-id", "target-id", "label"),
        known_ids,
        on_unknown,
        stats,
        labels=(0, 1, 2),
        binarise=True,
        lines=lines,
    )


def read_smash_pairs(
    path: str | Path, known_ids=None, on_unknown: str = "error", stats=None, lines=None
) -> list[DocumentPair]:
    """Wiki65K / AAN104K pair files (Jiang et al. 2019, used by SMITH): ``label, source id, target id``
    per line, tab-separated. The documents themselves come as a BEIR corpus (``_id`` = the pair ids)."""
    return read_pair_tsv(path, ("label", "source-id", "target-id"), known_ids, on_unknown, stats, lines=lines)


DOCUMENT_COLUMNS = ("id", "title", "text")


def pair_documents(path: str | Path) -> Iterator[tuple[int, Document]]:
    """``(line, document)`` of a pair collection's documents as they stream: ``id <TAB> title <TAB> text``
    per line (SMITH's Table 2 shows Wiki65K's documents as URL, title and content: the id is what the pair
    files name, the URL for Wiki65K), no header or a first line ``id title text``; ``.gz`` read as it
    streams. A document with neither title nor text is an error naming its line."""
    path = Path(path)
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and [f.strip().lower() for f in fields] == list(DOCUMENT_COLUMNS):
            continue
        if len(fields) != 3:
            raise DataFormatError(path, f"expected 3 tab-separated fields 'id title text', found {len(fields)}", number)
        doc_id = check_id(fields[0].strip(), path, number)
        title, text = fields[1].strip(), fields[2].strip()
        if not (visible(title) or visible(text)):
            raise DataFormatError(path, f"document {doc_id!r} is empty (no title and no text)", number)
        yield number, Document(doc_id, title, text)
