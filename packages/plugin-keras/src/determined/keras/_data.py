"""SequenceAdapter (deprecated upstream) and how TFKerasTrial's data and loader settings reach fit().

Keras 2's ``fit()`` takes ``workers``, ``use_multiprocessing`` and ``max_queue_size``; Keras 3's
does not: there they are properties of the ``keras.utils.PyDataset`` (``Sequence``) itself. The
runner therefore hands them to ``fit()`` on Keras 2 and sets them on the dataset on Keras 3.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from determined.keras._compat import KERAS_MAJOR

logger = logging.getLogger("determined.keras")

ArrayLike = np.ndarray | list[np.ndarray] | dict[str, np.ndarray]
"""Array data as upstream typed it: one array, a list of arrays, or arrays by input name."""

LOADER_ARGS = ("workers", "use_multiprocessing", "max_queue_size")
"""``fit()`` arguments of Keras 2 that Keras 3 moved onto ``PyDataset``."""


class SequenceAdapter:
    """A ``keras.utils.Sequence`` (Keras 3: ``PyDataset``) with the settings of the loader that
    feeds it, returned from a TFKerasTrial's data-loader builders.

    Deprecated upstream: use ``context.configure_fit(workers=..., use_multiprocessing=...,
    max_queue_size=...)`` (or, on Keras 3, the ``PyDataset`` constructor's arguments). The
    training adapter's settings apply to the validation data too, as upstream did.

    Args:
        sequence: the Sequence / PyDataset.
        use_multiprocessing: load batches in processes instead of threads.
        workers: how many threads or processes load batches.
        max_queue_size: how many batches may wait in the queue.
    """

    def __init__(
        self,
        sequence: Any,
        use_multiprocessing: bool = False,
        workers: int = 1,
        max_queue_size: int = 10,
    ) -> None:
        warnings.warn(
            "det.keras.SequenceAdapter is deprecated since Determined 0.38.0 and will be removed: "
            "return the Sequence / PyDataset itself and set its loader with "
            "context.configure_fit(workers=..., use_multiprocessing=..., max_queue_size=...).",
            FutureWarning,
            stacklevel=2,
        )
        self.sequence = sequence
        self.use_multiprocessing = use_multiprocessing
        self.workers = workers
        self.max_queue_size = max_queue_size


def unwrap(data: Any) -> tuple[Any, dict[str, Any]]:
    """``(data, loader settings)``: a SequenceAdapter's sequence and settings; else ``data``, {}."""
    if isinstance(data, SequenceAdapter):
        return data.sequence, {name: getattr(data, name) for name in LOADER_ARGS}
    return data, {}


def apply_loader_args(
    fit_args: dict[str, Any], loader_args: dict[str, Any], datasets: list[Any]
) -> dict[str, Any]:
    """``fit_args`` with the loader settings placed where this Keras takes them.

    ``loader_args`` (from a SequenceAdapter) are overridden by the same names in ``fit_args``
    (from ``configure_fit``). On Keras 3 they are set on every ``PyDataset`` in ``datasets`` and
    left out of the returned arguments; data of another kind has no loader, and they are dropped
    with a log line.
    """
    settings = {**loader_args, **{k: fit_args[k] for k in LOADER_ARGS if k in fit_args}}
    rest = {k: v for k, v in fit_args.items() if k not in LOADER_ARGS}
    if not settings:
        return rest
    if KERAS_MAJOR < 3:
        return {**rest, **settings}
    applied = False
    for dataset in datasets:
        if all(hasattr(dataset, name) for name in LOADER_ARGS) and hasattr(dataset, "__getitem__"):
            for name, value in settings.items():
                setattr(dataset, name, value)
            applied = True
    if not applied:
        logger.info(
            "%s: ignored, the data is not a keras.utils.PyDataset (Keras 3 takes these settings "
            "on the PyDataset only)",
            ", ".join(sorted(settings)),
        )
    return rest
