"""Pair-classification metrics for document matching (SMITH Table 5: Accuracy, Precision, Recall, F1)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, precision_recall_fscore_support


def classification_metrics(labels, scores, threshold: float = 0.5) -> dict[str, float]:
    """Binary metrics of ``scores >= threshold`` against 0/1 ``labels`` (SMITH thresholds the sigmoid at 0.5)."""
    labels = np.asarray(labels).astype(int)
    predicted = (np.asarray(scores, dtype=float) >= threshold).astype(int)
    precision, recall, f1, _ = precision_recall_fscore_support(labels, predicted, average="binary", zero_division=0)
    return {
        "Accuracy": float(accuracy_score(labels, predicted)),
        "Precision": float(precision),
        "Recall": float(recall),
        "F1": float(f1),
    }


def accuracy_threshold(labels, scores) -> float:
    """The threshold on ``scores`` with the highest accuracy on these (dev) labels: a midpoint between
    consecutive distinct scores, or below/above all of them (the lowest such threshold on ties)."""
    labels = np.asarray(labels).astype(int)
    scores = np.asarray(scores, dtype=float)
    if len(scores) == 0:
        raise ValueError("no scores to choose a threshold from")
    values = np.unique(scores)
    cuts = np.concatenate([[values[0] - 1.0], (values[1:] + values[:-1]) / 2, [values[-1] + 1.0]])
    correct = [(labels == (scores >= cut)).sum() for cut in cuts]
    return float(cuts[int(np.argmax(correct))])


def pair_outcomes(labels, scores, threshold: float) -> np.ndarray:
    """1 where the pair is classified correctly at ``threshold``, else 0 (per-pair accuracy, for
    intervals and paired tests over pairs)."""
    return (np.asarray(labels).astype(int) == (np.asarray(scores, dtype=float) >= threshold)).astype(float)
