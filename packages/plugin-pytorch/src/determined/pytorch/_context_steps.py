"""The training steps of ``PyTorchTrialContext``: ``backward`` and ``step_optimizer``.

Gradient aggregation (``aggregation_frequency``: exchange and step only on the last batch of each
window), AMP loss scaling and unscaling before clipping, and DDP's ``no_sync`` between exchanges.
A base class of :class:`~determined.pytorch.PyTorchTrialContext`, which holds the state it uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn

if TYPE_CHECKING:
    from determined.pytorch._context import PyTorchExperimentalContext


class GradientSteps:
    """``backward`` and ``step_optimizer`` of the trial context."""

    models: list[nn.Module]
    experimental: PyTorchExperimentalContext
    _scaler: Any
    _ddp: bool
    _managed_training: bool
    _aggregation_frequency: int
    _optimizer_configs: dict[int, dict[str, Any]]
    _current_batch_idx: int | None

    def _should_communicate_and_update(self) -> bool:
        if not self._managed_training or self._aggregation_frequency == 1:
            return True
        batch_idx = self._current_batch_idx
        if batch_idx is None:
            raise RuntimeError("training has not started")
        return (batch_idx + 1) % self._aggregation_frequency == 0

    @contextlib.contextmanager
    def _no_sync(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for model in self.models:
                if isinstance(model, nn.parallel.DistributedDataParallel):
                    stack.enter_context(model.no_sync())
            yield

    def backward(
        self,
        loss: torch.Tensor,
        gradient: torch.Tensor | None = None,
        retain_graph: bool = False,
        create_graph: bool = False,
    ) -> None:
        """``loss.backward(...)``, scaled under AMP; with DDP and gradient aggregation, gradients
        are exchanged only on the last batch of each aggregation window."""
        if self._scaler is not None and self.experimental._auto_amp:
            loss = self._scaler.scale(loss)
        if self._ddp and not self._should_communicate_and_update():
            with self._no_sync():
                loss.backward(
                    gradient=gradient, retain_graph=retain_graph, create_graph=create_graph
                )
        else:
            loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Callable[[Iterator[Any]], None] | None = None,
        auto_zero_grads: bool = True,
        scaler: Any | None = None,
    ) -> None:
        """Step ``optimizer`` on the last batch of each aggregation window (every batch by default).

        Args:
            clip_grads: called with the optimizer's parameters before the step (after unscaling
                under AMP), e.g. ``lambda params: torch.nn.utils.clip_grad_norm_(params, 1.0)``.
            auto_zero_grads: zero the gradients after stepping (required with aggregation).
            scaler: the GradScaler from ``wrap_scaler`` (manual AMP).
        """
        if self._aggregation_frequency > 1 and not auto_zero_grads:
            raise ValueError(
                "step_optimizer: auto_zero_grads must be True with aggregation_frequency > 1"
            )
        if not self._should_communicate_and_update():
            return
        config = self._optimizer_configs.get(id(optimizer))
        if config is None:
            raise ValueError("step_optimizer: the optimizer was not returned by wrap_optimizer()")
        if self._aggregation_frequency > 1 and config["average_aggregated_gradients"]:
            divisor = float(self._aggregation_frequency)
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is not None:
                        param.grad.div_(divisor)
        if scaler is None and self.experimental._auto_amp:
            scaler = self._scaler
        if clip_grads is not None:
            if scaler is not None and self.experimental._auto_amp:
                scaler.unscale_(optimizer)
            clip_grads([p for group in optimizer.param_groups for p in group["params"]])  # type: ignore[arg-type]
        if scaler is not None:
            scaler.step(optimizer)
        else:
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()
