"""Pair-classification metrics for document matching (SMITH Table 5: Accuracy, Precision, Recall, F1)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, precision_recall_fscore_support


def classification_metrics(labels, scores, threshold: float = 0.5) -> dict[str, float]:
    """Binary metrics of ``scores >= threshold`` against 0/1 ``labels`` (SMITH thresholds the sigmoid at 0.5)."""
    labels = np.asarray(labels).astype(int)
    predicted = (np.asarray(scores, dtype=float) >= threshold).astype(int)
    precision, recall, f1, _ = precision_recall_fscore_support(
        labels, predicted, average="binary", zero_division=0
    )
    return {"Accuracy": float(accuracy_score(labels, predicted)), "Precision": float(precision), "Recall": float(recall), "F1": float(f1)}
