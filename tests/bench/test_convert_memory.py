"""The converter's memory benchmark runs end to end on a small input (its figures are printed, never
asserted against a time)."""

import gzip

from longdoc.bench.convert_memory import generate, measure


def test_the_generated_files_are_shaped_as_ms_marco_distributes_them(tmp_path):
    facts = generate(tmp_path, 200_000)
    lines = gzip.decompress((tmp_path / "msmarco-docs.tsv.gz").read_bytes()).decode().splitlines()
    assert len(lines) == facts["documents"] and all(len(line.split("\t")) == 4 for line in lines)
    assert lines[0].startswith("D0\thttp://example.org/0\tDocument 0\t")
    assert (tmp_path / "qrels.tsv").read_text().splitlines()[0] == "0 0 D0 1"


def test_a_small_conversion_is_measured_and_its_files_removed(tmp_path):
    facts = measure(300_000, scratch=tmp_path)
    assert f"{facts['documents']} documents" in facts["output"]
    assert 10e6 < facts["peak_bytes"] < 1.5e9
    assert list(tmp_path.iterdir()) == []
