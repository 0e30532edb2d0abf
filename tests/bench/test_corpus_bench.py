"""The corpus benchmark's stages run on a generated corpus and report what the GPU-hour planner reads
(figures, not timed assertions)."""

from longdoc.bench import corpus
from longdoc.index.bm25 import search_threads


def test_the_store_tokenize_and_bm25_stages_report_their_work_and_cores(tmp_path):
    corpus.generate(tmp_path / "corpus.jsonl", 40)
    assert corpus.stage("store", tmp_path, encode=0)["seconds"] >= 0
    tokenized = corpus.stage("tokenize", tmp_path, encode=0)
    assert tokenized["segments"] >= 40 and tokenized["cores"] == 1  # TOKENIZERS_PARALLELISM=false, as run_all.sh
    again = corpus.stage("tokenize", tmp_path, encode=0)  # built again, not read from the first store
    assert again["segments"] == tokenized["segments"]
    bm25 = corpus.stage("bm25", tmp_path, encode=0, bm25_queries=7)
    assert bm25["queries"] == 7 and bm25["index_seconds"] >= 0 and bm25["search_seconds"] >= 0
    assert bm25["search_threads"] == search_threads(7, 40) == 1
