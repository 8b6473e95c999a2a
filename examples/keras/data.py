"""The iris data set, bundled with scikit-learn (no download): 120 training and 30 validation samples."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_iris

NUM_CLASSES = 3


def load() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``((train_x, train_y), (validation_x, validation_y))`` with one-hot labels."""
    features, labels = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(labels))
    features = features[order].astype("float32")
    one_hot = np.eye(NUM_CLASSES, dtype="float32")[labels[order]]
    return (features[:120], one_hot[:120]), (features[120:], one_hot[120:])
