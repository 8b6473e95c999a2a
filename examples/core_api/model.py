"""A tiny model shared by the Core API examples: fit y = 3x + 1 with plain gradient descent.

It needs no framework, so every stage runs in about a second with plain ``python``.
"""

from __future__ import annotations

import random


class LinearModel:
    def __init__(self, lr: float = 0.05, seed: int = 0) -> None:
        self.w = 0.0
        self.b = 0.0
        self.lr = lr
        self.rng = random.Random(seed)

    def batch(self, size: int = 16) -> list[tuple[float, float]]:
        xs = [self.rng.uniform(-1, 1) for _ in range(size)]
        return [(x, 3 * x + 1 + self.rng.gauss(0, 0.01)) for x in xs]

    def train_batch(self) -> float:
        data = self.batch()
        grad_w = grad_b = loss = 0.0
        for x, y in data:
            err = self.w * x + self.b - y
            loss += err * err
            grad_w += 2 * err * x
            grad_b += 2 * err
        n = len(data)
        self.w -= self.lr * grad_w / n
        self.b -= self.lr * grad_b / n
        return loss / n

    def validate(self) -> float:
        data = self.batch(64)
        return sum((self.w * x + self.b - y) ** 2 for x, y in data) / len(data)

    def state(self) -> dict[str, float]:
        return {"w": self.w, "b": self.b}

    def load(self, state: dict[str, float]) -> None:
        self.w, self.b = state["w"], state["b"]
