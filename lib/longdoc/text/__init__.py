"""Tokenization of documents into fixed-length segments."""

from longdoc.text.segments import SegmentedCorpus, segment_ids

__all__ = ["SegmentedCorpus", "segment_ids"]
