"""The trial that `det-cli launch --config-dir conf` runs: a Core API script fitting y = 3x + 1.

Its hyperparameters are the ``hyperparameters`` section Hydra composed (one sample of it when a
searcher draws from ranges); the script prints them, trains ``steps`` batches, and reports the
searcher metric ``validation_loss`` with the ``batches`` time metric every few batches. An ASHA
searcher that stops the trial early does so through the preemption signal.

Off-cluster (``python train.py``) it runs with the constants below.
"""

from __future__ import annotations

import json
import logging
import random

import determined as det

OFF_CLUSTER_HPARAMS = {"lr": 0.05, "batch_size": 16, "steps": 50, "seed": 0}
REPORT_EVERY = 5


class Line:
    """y = w x + b, fitted by plain gradient descent on fresh synthetic batches."""

    def __init__(self, lr: float, batch_size: int, seed: int) -> None:
        self.w = self.b = 0.0
        self.lr, self.batch_size = lr, batch_size
        self.rng = random.Random(seed)

    def batch(self, size: int) -> list[tuple[float, float]]:
        xs = [self.rng.uniform(-1, 1) for _ in range(size)]
        return [(x, 3 * x + 1 + self.rng.gauss(0, 0.01)) for x in xs]

    def loss(self, data: list[tuple[float, float]]) -> float:
        return sum((self.w * x + self.b - y) ** 2 for x, y in data) / len(data)

    def train_batch(self) -> float:
        data = self.batch(self.batch_size)
        grad_w = sum(2 * (self.w * x + self.b - y) * x for x, y in data) / len(data)
        grad_b = sum(2 * (self.w * x + self.b - y) for x, y in data) / len(data)
        self.w -= self.lr * grad_w
        self.b -= self.lr * grad_b
        return self.loss(data)


def main(core_context: det.core.Context) -> None:
    info = det.get_cluster_info()
    hparams = info.trial.hparams if info is not None and info.trial else OFF_CLUSTER_HPARAMS
    print("hparams:", json.dumps(hparams, sort_keys=True), flush=True)
    model = Line(float(hparams["lr"]), int(hparams["batch_size"]), int(hparams["seed"]))
    steps = int(hparams["steps"])
    for step in range(1, steps + 1):
        loss = model.train_batch()
        if step % REPORT_EVERY and step != steps:
            continue
        core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
        validation = model.loss(model.batch(256))
        core_context.train.report_validation_metrics(
            steps_completed=step, metrics={"validation_loss": validation, "batches": step}
        )
        core_context.train.report_progress(step / steps)
        if core_context.preempt.should_preempt():
            return


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with det.core.init() as core_context:
        main(core_context)
