"""Time and memory measurement for the efficiency notebooks (benchmarks that print figures, not tests)."""
