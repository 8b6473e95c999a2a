"""A small tf.estimator classifier as an EstimatorTrial: a custom ``model_fn`` (one hidden layer) on
scikit-learn's bundled breast-cancer data (569 samples, 30 features; no download).

Needs TensorFlow < 2.16 (tf.estimator), e.g. the repository's legacy venv (``make legacy-venv``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_breast_cancer

from determined import estimator

NUM_FEATURES = 30


def load_data(validation_fraction: float = 0.2) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """``((train_x, train_y), (validation_x, validation_y))``, features standardised."""
    features, labels = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(labels))
    features = features[order]
    features = ((features - features.mean(0)) / features.std(0)).astype("float32")
    labels = labels[order].astype("int32")
    cut = int(len(labels) * (1 - validation_fraction))
    return (features[:cut], labels[:cut]), (features[cut:], labels[cut:])


class CancerTrial(estimator.EstimatorTrial):
    """Hyperparameters: ``global_batch_size``, ``learning_rate``, ``hidden``."""

    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        self.context = context
        self.train_data, self.validation_data = load_data()

    def _model_fn(self, features: Any, labels: Any, mode: str) -> tf.estimator.EstimatorSpec:
        v1 = tf.compat.v1
        hidden = v1.layers.dense(features["x"], self.context.get_hparam("hidden"), tf.nn.relu)
        logits = v1.layers.dense(hidden, 2)
        predictions = {"class": tf.argmax(logits, 1), "probability": tf.nn.softmax(logits)}
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=predictions)
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        if mode == tf.estimator.ModeKeys.EVAL:
            accuracy = v1.metrics.accuracy(labels, predictions["class"])
            return tf.estimator.EstimatorSpec(
                mode, loss=loss, eval_metric_ops={"accuracy": accuracy}
            )
        optimizer = self.context.wrap_optimizer(
            v1.train.GradientDescentOptimizer(self.context.get_hparam("learning_rate"))
        )
        train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def build_estimator(self) -> tf.estimator.Estimator:
        return tf.estimator.Estimator(model_fn=self._model_fn)

    def _dataset(self, data: tuple[Any, Any], shuffle: bool) -> tf.data.Dataset:
        features, labels = data
        dataset = tf.data.Dataset.from_tensor_slices(({"x": features}, labels))
        dataset = self.context.wrap_dataset(dataset)
        if shuffle:
            dataset = dataset.shuffle(len(labels))
        return dataset.batch(self.context.get_per_slot_batch_size())

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        return tf.estimator.TrainSpec(lambda: self._dataset(self.train_data, shuffle=True))

    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        return tf.estimator.EvalSpec(
            lambda: self._dataset(self.validation_data, shuffle=False), steps=None
        )

    def build_serving_input_receiver_fns(self) -> dict[str, estimator.ServingInputReceiverFn]:
        def raw_features() -> tf.estimator.export.ServingInputReceiver:
            x = tf.compat.v1.placeholder(tf.float32, [None, NUM_FEATURES], name="x")
            return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})

        return {"raw": raw_features}
