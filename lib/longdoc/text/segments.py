"""WordPiece segments of documents: FirstP (first segment only) and MaxP (consecutive segments).

A segment is ``[CLS] + up to (segment_length - 2) content tokens + [SEP]``; a document of n content
tokens gives ceil(n / (segment_length - 2)) segments, at most ``max_segments``.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase


def segment_ids(token_ids: list[int], segment_length: int, max_segments: int) -> list[list[int]]:
    """Split content token ids into consecutive chunks of ``segment_length - 2`` (room for [CLS]/[SEP])."""
    if segment_length < 3:
        raise ValueError(f"segment_length must be >= 3, got {segment_length}")
    if max_segments < 1:
        raise ValueError(f"max_segments must be >= 1, got {max_segments}")
    width = segment_length - 2
    chunks = [token_ids[i : i + width] for i in range(0, len(token_ids), width)][:max_segments]
    return chunks or [[]]


@dataclass
class SegmentedCorpus:
    """Token ids of every document, cut into segments once and reused across epochs and encodings."""

    doc_ids: list[str]
    segments: list[list[list[int]]]  # per document, per segment: content token ids

    @classmethod
    def build(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        doc_ids: list[str],
        texts: list[str],
        segment_length: int = 512,
        max_segments: int = 1,
        document_tokens: int = 0,
        batch_size: int = 256,
        sentence_filling: bool = False,
    ) -> SegmentedCorpus:
        """``document_tokens`` > 0 reads at most that many content tokens per document (the last
        block is then shorter); 0 reads all that ``max_segments`` blocks hold. ``sentence_filling``:
        blocks of whole sentences (SMITH, :func:`longdoc.text.sentences.sentence_blocks`) instead of
        consecutive windows."""
        if sentence_filling:
            from longdoc.text.sentences import sentence_blocks

            if document_tokens:
                raise ValueError("document_tokens is not defined for sentence-filled blocks (set max_segments)")
            return cls(list(doc_ids), sentence_blocks(tokenizer, texts, segment_length, max_segments))
        limit = (segment_length - 2) * max_segments
        if document_tokens:
            limit = min(limit, document_tokens)
        segments = []
        for start in range(0, len(texts), batch_size):
            encoded = tokenizer(
                texts[start : start + batch_size], add_special_tokens=False, truncation=True, max_length=limit
            )["input_ids"]
            segments.extend(segment_ids(ids, segment_length, max_segments) for ids in encoded)
        return cls(list(doc_ids), segments)

    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def num_segments(self) -> int:
        return sum(map(len, self.segments))
