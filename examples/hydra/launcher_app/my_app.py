"""An ordinary Hydra app whose task function returns the validation loss.

Locally (``python my_app.py lr=0.1``, or ``-m`` with Hydra's basic launcher) it trains in this
process. With ``-m hydra/launcher=det`` the whole sweep becomes one det experiment: every sweep
point is a trial on the master, the return values come back to Hydra, and the experiment's best
trial is the point with the smallest loss. Inside a trial, ``det.core.init()`` talks to the master,
so the training curve of every point shows up there too.
"""

from __future__ import annotations

import logging
import random

import hydra
from omegaconf import DictConfig

import determined as det

log = logging.getLogger(__name__)


def fit(lr: float, steps: int, batch_size: int, seed: int, core_context: det.core.Context) -> float:
    """Fit y = 3x + 1 by gradient descent; return the validation loss."""
    rng = random.Random(seed)
    w = b = 0.0

    def batch(size: int) -> list[tuple[float, float]]:
        xs = [rng.uniform(-1, 1) for _ in range(size)]
        return [(x, 3 * x + 1 + rng.gauss(0, 0.01)) for x in xs]

    for step in range(1, steps + 1):
        data = batch(batch_size)
        grad_w = sum(2 * (w * x + b - y) * x for x, y in data) / batch_size
        grad_b = sum(2 * (w * x + b - y) for x, y in data) / batch_size
        w, b = w - lr * grad_w, b - lr * grad_b
        if step % 20 == 0:
            loss = sum((w * x + b - y) ** 2 for x, y in data) / batch_size
            core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
    validation = batch(256)
    return sum((w * x + b - y) ** 2 for x, y in validation) / len(validation)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def train(cfg: DictConfig) -> float:
    if cfg.lr <= 0:
        raise ValueError(f"lr must be positive, got {cfg.lr}")
    with det.core.init() as core_context:
        loss = fit(cfg.lr, cfg.steps, cfg.batch_size, cfg.seed, core_context)
    log.info(f"lr={cfg.lr}: validation loss {loss:.6f}")
    return loss


if __name__ == "__main__":
    train()
