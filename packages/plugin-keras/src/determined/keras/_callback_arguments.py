"""Checks of DeterminedCallback's constructor arguments, kept apart from the callback's hooks."""

from __future__ import annotations

from typing import Any


def check_callback_arguments(
    core_context: Any,
    checkpoint: str | None,
    continue_id: int | str,
    train_metrics_report_period: int | str,
    checkpoint_epochs: int,
    preemption_check_period: int | None,
) -> int:
    """Raise TypeError/ValueError naming the bad argument; return the preemption check period.

    The period defaults to 1 batch in a single process and 10 with several ranks (every rank asks
    in step, so a check costs a collective there).
    """
    for name in ("train", "checkpoint", "preempt", "distributed"):
        if not hasattr(core_context, name):
            raise TypeError(
                "DeterminedCallback: core_context must be the result of det.core.init(), "
                f"got {type(core_context).__name__}"
            )
    if checkpoint is not None and not isinstance(checkpoint, str):
        raise TypeError(
            f"DeterminedCallback: checkpoint must be a checkpoint id or None, got {checkpoint!r}"
        )
    if isinstance(continue_id, bool) or not isinstance(continue_id, (int, str)):
        raise TypeError(
            f"DeterminedCallback: continue_id must be an int or a str, got {continue_id!r}"
        )
    if train_metrics_report_period != "epoch" and (
        isinstance(train_metrics_report_period, bool)
        or not isinstance(train_metrics_report_period, int)
        or train_metrics_report_period < 1
    ):
        raise ValueError(
            "DeterminedCallback: train_metrics_report_period must be 'epoch' or a positive "
            f"number of batches, got {train_metrics_report_period!r}"
        )
    if isinstance(checkpoint_epochs, bool) or not isinstance(checkpoint_epochs, int):
        raise TypeError(
            f"DeterminedCallback: checkpoint_epochs must be an int, got {checkpoint_epochs!r}"
        )
    if checkpoint_epochs < 0:
        raise ValueError(
            f"DeterminedCallback: checkpoint_epochs must be >= 0, got {checkpoint_epochs}"
        )
    if preemption_check_period is None:
        preemption_check_period = 1 if core_context.distributed.size == 1 else 10
    if (
        isinstance(preemption_check_period, bool)
        or not isinstance(preemption_check_period, int)
        or preemption_check_period < 1
    ):
        raise ValueError(
            "DeterminedCallback: preemption_check_period must be a positive number of batches, "
            f"got {preemption_check_period!r}"
        )
    return preemption_check_period
