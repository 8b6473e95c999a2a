"""Cost of ``det.keras.DeterminedCallback`` in ``model.fit()``, against a plain ``fit()``.

Same model (an MLP, 32 -> 64 -> 10), same synthetic data (4096 samples, batch 32: 128 batches an
epoch, validation on 1024 samples), same process. Rounds alternate: a plain ``fit(epochs=3)``, then
the same ``fit`` with a DeterminedCallback (off-cluster core context, its defaults: training metrics
and a checkpoint every epoch, a preemption check every batch). Prints the median wall time per batch
of each (and the fastest round, less sensitive to a busy machine) and the ratio; the target is
at most 3 % overhead. ``KERAS_BACKEND`` picks the backend.

    .venv/bin/python benchmarks/bench_keras_overhead.py
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

import determined as det

ROUNDS = 11
EPOCHS = 2
SAMPLES, VALIDATION, BATCH = 4096, 1024, 32


def main() -> int:
    logging.getLogger("determined").setLevel(logging.WARNING)  # the local backend logs reports
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES + VALIDATION, 32)).astype("float32")
    y = keras.utils.to_categorical(rng.integers(0, 10, size=SAMPLES + VALIDATION), 10)
    train, validation = (x[:SAMPLES], y[:SAMPLES]), (x[SAMPLES:], y[SAMPLES:])
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((32,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    batches = EPOCHS * (SAMPLES // BATCH)

    def fit(callbacks: list[object]) -> float:
        start = time.perf_counter()
        model.fit(
            *train,
            batch_size=BATCH,
            epochs=EPOCHS,
            validation_data=validation,
            callbacks=callbacks,
            verbose=0,
        )
        return (time.perf_counter() - start) / batches * 1e6

    fit([])  # warm-up: tracing and compilation
    plain, with_callback = [], []
    with (
        tempfile.TemporaryDirectory() as storage,
        det.core.init(checkpoint_storage=storage) as core_context,
    ):
        for round_ in range(ROUNDS):
            plain.append(fit([]))
            callback = det.keras.DeterminedCallback(core_context, None, f"bench-{round_}")
            with_callback.append(fit([callback]))
    base, det_us = statistics.median(plain), statistics.median(with_callback)
    best_base, best_det = min(plain), min(with_callback)
    print(f"keras {keras.__version__}, backend {keras.backend.backend()}: {ROUNDS} rounds of "
          f"{EPOCHS} epochs x {SAMPLES // BATCH} batches (+ validation)")  # fmt: skip
    print(f"plain fit():                    median {base:8.1f} us per batch, best {best_base:8.1f}")
    print(
        f"fit() with DeterminedCallback:  median {det_us:8.1f} us per batch, best {best_det:8.1f}"
    )
    print(
        f"ratio callback / plain: median {det_us / base:.3f} "
        f"(overhead {100 * (det_us / base - 1):+.1f} %), best rounds {best_det / best_base:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
