"""The rows of the BEIR layout's JSON Lines files (``corpus.jsonl``, ``queries.jsonl``), checked, and the
document they hold: what the in-memory reader (:mod:`longdoc.data.beir`) and the memory-mapped corpus
store (:mod:`longdoc.data.corpus_store`) share."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from longdoc.data.errors import DataFormatError, json_type, shown, text_lines


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str

    @property
    def full_text(self) -> str:
        """Title and body, the input the papers' encoders see (Longtriever: ``title + ' ' + text``)."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are all different (json's default keeps the last of a repeated key)."""
    row = {}
    for key, value in pairs:
        if key in row:
            raise _RepeatedKey(key)
        row[key] = value
    return row


_SURROGATE = re.compile("[\ud800-\udfff]")


class LongInteger(str):
    """A JSON integer of more digits than Python's ``int`` reads (4,300), kept as its text: a valid id."""


def _integer(text: str) -> int | LongInteger:
    return int(text) if len(text) <= 4000 else LongInteger(text)


def jsonl_rows(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of every non-blank line: valid JSON, an object with ``_id``, no key twice.
    An integer id of any length is read (as its digits)."""
    for number, line in text_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=_unique_keys, parse_int=_integer)
        except _RepeatedKey as err:
            raise DataFormatError(
                path, f"the key {shown(err.args[0])} appears twice in one JSON object", number
            ) from None
        except ValueError as err:  # JSONDecodeError
            raise DataFormatError(path, f"not valid JSON ({getattr(err, 'msg', err)})", number) from None
        except RecursionError:
            raise DataFormatError(path, "a JSON value nested too deeply to be a document or a query", number) from None
        if not isinstance(row, dict) or "_id" not in row:
            raise DataFormatError(path, "expected a JSON object with an '_id' field", number)
        yield number, row


def text_field(row: dict, name: str, path: Path, number: int) -> str:
    """A ``title``/``text`` field: a string, or absent/null for none (a list or object is an error,
    not silently stringified)."""
    value = row.get(name)
    if name == "text" and name not in row:
        others = sorted(set(row) - {"_id", "title", "metadata"})
        if others:  # "body", "contents": the text would be silently empty
            raise DataFormatError(
                path, f"no field 'text' (the row has {shown(others)}; the BEIR layout names the text 'text')", number
            )
    if value is None:
        return ""
    if not isinstance(value, str) or isinstance(value, LongInteger):
        raise DataFormatError(path, f"field {name!r} must be a string, got {json_type(value)}", number)
    lone = _SURROGATE.search(value)
    if lone:  # "\ud800" in JSON: valid JSON, but no UTF-8 text (a store, a tokenizer, a write would fail)
        raise DataFormatError(
            path, f"field {name!r} holds a lone surrogate U+{ord(lone.group()):04X} (not text)", number
        )
    return value
