"""``LRScheduler``: a torch LR scheduler plus when the training loop should step it."""

from __future__ import annotations

import enum
from typing import Any


class LRScheduler:
    """Wraps a torch LR scheduler with a step mode (see :meth:`PyTorchTrialContext.wrap_lr_scheduler`).

    Args:
        scheduler: the torch scheduler.
        step_mode: when the loop steps it (``MANUAL_STEP``: never; you call ``step()``).
        frequency: step every ``frequency`` batches, optimizer steps or epochs.
    """

    class StepMode(enum.Enum):
        """When the training loop steps a wrapped scheduler."""

        STEP_EVERY_EPOCH = 1
        STEP_EVERY_BATCH = 2
        MANUAL_STEP = 3
        STEP_EVERY_OPTIMIZER_STEP = 4

    def __init__(self, scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1) -> None:
        if not isinstance(step_mode, LRScheduler.StepMode):
            raise TypeError(
                f"step_mode: must be a det.pytorch.LRScheduler.StepMode, not {step_mode!r}"
            )
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
            raise ValueError(f"frequency: must be a positive int, got {frequency!r}")
        self._scheduler = scheduler
        self._step_mode = step_mode
        self._frequency = frequency

    @property
    def scheduler(self) -> Any:
        """The wrapped torch scheduler."""
        return self._scheduler

    def step(self, *args: Any, **kwargs: Any) -> None:
        self._scheduler.step(*args, **kwargs)

    def get_last_lr(self) -> list[float]:
        return list(self._scheduler.get_last_lr())

    def state_dict(self) -> dict[str, Any]:
        return dict(self._scheduler.state_dict())

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._scheduler.load_state_dict(state_dict)
