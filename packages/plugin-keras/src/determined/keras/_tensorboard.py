"""det.keras.TensorBoard: Keras's TensorBoard callback, writing where det uploads TensorBoard files from.

The event files go to ``core_context.train.get_tensorboard_path()``. With the default
``tensorboard_mode=AUTO`` det-core uploads that directory to checkpoint storage
(``tensorboard/experiment/<id>/trial/<id>/``) after every checkpoint and when the context closes;
this callback also flushes its writers and asks for an upload at the end of every epoch, so
TensorBoard shows an experiment while it trains.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING, Any

from determined.keras._compat import keras

if TYPE_CHECKING:
    from determined import core

logger = logging.getLogger("determined.keras")


class TensorBoard(keras.callbacks.TensorBoard):  # type: ignore[misc]
    """``keras.callbacks.TensorBoard`` writing into det's TensorBoard directory.

    Args:
        core_context: the context from ``det.core.init()``.
        *args, **kwargs: as for ``keras.callbacks.TensorBoard``; a ``log_dir`` is ignored (with a
            warning): det decides where the files go.
    """

    def __init__(self, core_context: core.Context, *args: Any, **kwargs: Any) -> None:
        if importlib.util.find_spec("tensorboard") is None:
            raise ImportError(
                "det.keras.TensorBoard needs the tensorboard package: pip install tensorboard "
                "(or det-plugin-keras[tensorflow])"
            )
        log_dir = core_context.train.get_tensorboard_path()
        if "log_dir" in kwargs:
            logger.warning(
                "det.keras.TensorBoard: log_dir=%r is ignored; writing to %s",
                kwargs.pop("log_dir"),
                log_dir,
            )
        elif args:
            logger.warning(
                "det.keras.TensorBoard: log_dir=%r is ignored; writing to %s", args[0], log_dir
            )
            args = args[1:]
        super().__init__(str(log_dir), *args, **kwargs)
        self._core = core_context

    def _flush(self) -> None:
        for writer in list(getattr(self, "_writers", {}).values()):
            writer.flush()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        self._flush()
        sync = getattr(self._core.train, "_sync_tensorboard", None)
        if sync is not None:
            sync()  # AUTO mode only, at most once a second

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        super().on_train_end(logs)
        self._flush()
