"""Evaluation with trec_eval semantics: ranking metrics, TREC run files, significance tests."""

from longdoc.eval.classification import classification_metrics
from longdoc.eval.metrics import evaluate, per_query
from longdoc.eval.run_files import read_run, write_run
from longdoc.eval.significance import paired_bootstrap, paired_t_test

__all__ = [
    "classification_metrics",
    "evaluate",
    "paired_bootstrap",
    "paired_t_test",
    "per_query",
    "read_run",
    "write_run",
]
