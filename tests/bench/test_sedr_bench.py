"""The SeDR speed benchmark runs at tiny sizes and reports its ratios (figures, not timed assertions)."""

from longdoc.bench.sedr import encoding_ratio, step_ratio


def test_the_benchmark_prints_positive_ratios_at_tiny_sizes():
    encoding = encoding_ratio(documents=3, segment_length=16, segments=2, repeats=1)
    assert encoding["segments"] >= 3 and encoding["ratio"] > 0
    step = step_ratio(batch=2, cache=4, segment_length=16, segments=2, repeats=1)
    assert step["cache"] == 4 and step["ratio"] > 0
