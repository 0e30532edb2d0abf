"""The one training loop for dense retrievers, hard-negative mining and cross-device gathering."""

from longdoc.train.loop import TrainConfig, TrainResult, train_biencoder
from longdoc.train.negatives import negatives_from_run

__all__ = ["TrainConfig", "TrainResult", "negatives_from_run", "train_biencoder"]
