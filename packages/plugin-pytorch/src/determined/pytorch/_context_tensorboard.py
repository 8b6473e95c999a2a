"""TensorBoard and profiling of ``PyTorchTrialContext``: the writer, its path and the profiler.

A base class of :class:`~determined.pytorch.PyTorchTrialContext`, which holds the state it uses.
"""

from __future__ import annotations

import pathlib
import sys
import time
import types
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from determined import core


class TensorBoardSteps:
    """TensorBoard logging switches, the ``SummaryWriter`` and ``set_profiler``."""

    _core: core.Context
    _enable_tensorboard_logging: bool
    _tbd_writer: Any
    _last_tb_reset_ts: float | None
    profiler: Any

    def get_enable_tensorboard_logging(self) -> bool:
        return self._enable_tensorboard_logging

    def set_enable_tensorboard_logging(self, enable_tensorboard_logging: bool) -> None:
        if not isinstance(enable_tensorboard_logging, bool):
            raise TypeError("enable_tensorboard_logging: must be a bool")
        self._enable_tensorboard_logging = enable_tensorboard_logging

    def get_tensorboard_path(self) -> pathlib.Path:
        """Where TensorBoard files go (uploaded with the trial on a cluster)."""
        return self._core.train.get_tensorboard_path()

    def get_tensorboard_writer(self) -> Any:
        """A ``torch.utils.tensorboard.SummaryWriter`` writing to :meth:`get_tensorboard_path`."""
        if self._tbd_writer is None:
            if "tensorflow" not in sys.modules:
                # TensorBoard imports all of TensorFlow (seconds) for file I/O it can do without
                # when TF is installed but unused; its documented switch to the stub is this module.
                sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("notf"))
            from torch.utils import tensorboard

            self._tbd_writer = tensorboard.SummaryWriter(str(self.get_tensorboard_path()))
        return self._tbd_writer

    def _maybe_reset_tbd_writer(self) -> None:
        if self._tbd_writer is None:
            return
        now = time.time()
        if self._last_tb_reset_ts is None or int(now) > int(self._last_tb_reset_ts):
            self._tbd_writer.flush()
            self._last_tb_reset_ts = now

    def set_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Profile ``train_batch`` with ``torch.profiler.profile(*args, **kwargs)``; traces go to
        the TensorBoard directory. The loop enters it before training and steps it every batch."""
        self.profiler = torch.profiler.profile(
            *args,
            on_trace_ready=torch.profiler.tensorboard_trace_handler(
                str(self.get_tensorboard_path())
            ),
            **kwargs,
        )
