"""Cost of ``det.keras.DeterminedCallback`` in ``model.fit()``, against a plain ``fit()``.

Same model (an MLP, 32 -> 64 -> 10, Adam), same synthetic data (``--samples`` training samples,
batch 32, validation on 1,024 samples each epoch), same process, ``--epochs`` epochs per fit. Each
round runs, in this order:

- ``plain``: ``fit()`` with no callback;
- ``det``: ``fit()`` with a DeterminedCallback at its defaults (off-cluster core context: training
  metrics and a checkpoint every epoch, a preemption check every batch);
- ``det-ckpt0``: the same with ``checkpoint_epochs=0`` (one checkpoint, at the end of ``fit()``), which
  isolates the per-batch and per-epoch bookkeeping from the checkpoint writes;
- ``keras-ckpt``: plain ``fit()`` with Keras's own ``ModelCheckpoint(save_weights_only=True)`` every
  epoch: what saving the weights each epoch costs without det;
- ``plain`` again.

Times are wall time per training batch over the whole ``fit()`` (validation and checkpoints
included). Each runner's ratio is taken against the mean of the two plain fits of its round (the load
of a shared machine drifts over minutes), and the median over ``--rounds`` rounds is printed. The
target is at most 3 % over plain ``fit()``. A checkpoint is a Keras ``save_weights`` call (tens of
milliseconds even for this model), so its share depends on the epoch length: with the default
512-batch epochs (about a second each) it is a few percent of an epoch; ``--samples 4096`` (128
batches, a quarter-second epoch) shows the degenerate case. ``KERAS_BACKEND`` picks the backend.

    .venv/bin/python benchmarks/bench_keras_overhead.py [--samples N] [--epochs E] [--rounds R]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

import determined as det

VALIDATION, BATCH = 1024, 32


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16384)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    logging.getLogger("determined").setLevel(logging.WARNING)  # the local backend logs reports
    rng = np.random.default_rng(0)
    total = args.samples + VALIDATION
    x = rng.normal(size=(total, 32)).astype("float32")
    y = keras.utils.to_categorical(rng.integers(0, 10, size=total), 10)
    train = (x[: args.samples], y[: args.samples])
    validation = (x[args.samples :], y[args.samples :])
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((32,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    batches = args.epochs * (args.samples // BATCH)

    def fit(callbacks: list[object]) -> float:
        start = time.perf_counter()
        model.fit(
            *train,
            batch_size=BATCH,
            epochs=args.epochs,
            validation_data=validation,
            callbacks=callbacks,
            verbose=0,
        )
        return (time.perf_counter() - start) / batches * 1e6

    fit([])  # warm-up: tracing and compilation
    with (
        tempfile.TemporaryDirectory() as storage,
        det.core.init(checkpoint_storage=storage) as core_context,
    ):
        runners: dict[str, Callable[[int], list[object]]] = {
            "det": lambda r: [det.keras.DeterminedCallback(core_context, None, f"d{r}")],
            "det-ckpt0": lambda r: [
                det.keras.DeterminedCallback(core_context, None, f"z{r}", checkpoint_epochs=0)
            ],
            "keras-ckpt": lambda r: [
                keras.callbacks.ModelCheckpoint(
                    os.path.join(storage, f"k{r}.weights.h5"), save_weights_only=True
                )
            ],
        }
        times: dict[str, list[float]] = {"plain": [], **{name: [] for name in runners}}
        ratios: dict[str, list[float]] = {name: [] for name in times}
        for round_ in range(args.rounds):
            before = fit([])
            measured = {name: fit(make(round_)) for name, make in runners.items()}
            after = fit([])
            plain = (before + after) / 2
            measured["plain"] = after
            for name, value in measured.items():
                times[name].append(value)
                ratios[name].append(value / (before if name == "plain" else plain))
    print(
        f"keras {keras.__version__}, backend {keras.backend.backend()}: {args.rounds} rounds of "
        f"{args.epochs} epochs x {args.samples // BATCH} batches (+ validation)"
    )
    print("wall time per training batch; ratio = over the plain fits of the same round (median)")
    print(f"{'runner':<11} {'median us':>10} {'best us':>9} {'ratio':>7}")
    for name in times:
        print(
            f"{name:<11} {statistics.median(times[name]):>10.1f} {min(times[name]):>9.1f} "
            f"{statistics.median(ratios[name]):>6.3f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
