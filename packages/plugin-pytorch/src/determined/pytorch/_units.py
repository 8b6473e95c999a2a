"""Training lengths and periods: ``Batch`` and ``Epoch``, and the loop's persistent state."""

from __future__ import annotations

import collections.abc
import sys
from dataclasses import asdict, dataclass
from typing import Any

from determined import core


class TrainUnit:
    """A length or period of training in some unit.

    ``value`` is an ``int`` (a period: every ``value`` units; values below 1 mean "every unit") or a
    ``collections.abc.Container`` of unit counts (a schedule: exactly at those counts).
    """

    def __init__(self, value: int | collections.abc.Container[int]) -> None:
        if isinstance(value, (bool, str, bytes)) or not isinstance(
            value, (int, collections.abc.Container)
        ):
            raise TypeError(
                f"{type(self).__name__}(value): must be an int or a container of ints, "
                f"not {type(value).__name__}"
            )
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}(value={self.value!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.value)))

    def should_stop(self, step_num: int) -> bool:
        """Whether the period fires after ``step_num`` units (1-based)."""
        if isinstance(self.value, int):
            if self.value < 1:
                return True
            return step_num != 0 and step_num % self.value == 0
        return step_num in self.value

    @staticmethod
    def _from_searcher_unit(
        length: int, unit: core.Unit | None, global_batch_size: int | None = None
    ) -> TrainUnit:
        if unit == core.Unit.EPOCHS:
            return Epoch(length)
        if unit == core.Unit.RECORDS:
            if not global_batch_size:
                raise ValueError(
                    "searcher length in records needs an integer global_batch_size hyperparameter"
                )
            return Batch._from_records(length, global_batch_size)
        if unit == core.Unit.BATCHES or unit is None:
            return Batch(length)
        raise ValueError(f"unrecognized searcher unit {unit!r}")

    def _to_searcher_unit(self) -> core.Unit:
        return core.Unit.BATCHES if isinstance(self, Batch) else core.Unit.EPOCHS

    @staticmethod
    def _from_values(
        batches: int | None = None,
        records: int | None = None,
        epochs: int | None = None,
        global_batch_size: int | None = None,
    ) -> TrainUnit:
        """One unit from an upstream ``{batches|records|epochs: n}`` config value (n < 1: never)."""
        given = [v for v in (batches, records, epochs) if v is not None]
        if len(given) != 1:
            raise ValueError(
                f"expected exactly one of batches, records, epochs; got batches={batches} "
                f"records={records} epochs={epochs}"
            )
        if batches is not None:
            return Batch(batches if batches >= 1 else sys.maxsize)
        if records is not None:
            if records < 1:
                return Batch(sys.maxsize)
            if not global_batch_size:
                raise ValueError("a period in records needs a global_batch_size hyperparameter")
            return Batch._from_records(records, global_batch_size)
        assert epochs is not None
        return Epoch(epochs if epochs >= 1 else sys.maxsize)


class Batch(TrainUnit):
    """Batches: ``Batch(100)`` is every 100 batches, ``Batch([5, 30])`` after batches 5 and 30.

    One batch is one optimizer-step's worth of data on every rank (a global batch).
    """

    @staticmethod
    def _from_records(records: int, global_batch_size: int) -> Batch:
        return Batch(max(records // global_batch_size, 1))


class Epoch(TrainUnit):
    """Epochs: ``Epoch(2)`` is every 2 epochs, ``Epoch([1, 5])`` after epochs 1 and 5.

    An epoch is one pass over the training data loader (``len(loader)`` batches).
    """


@dataclass
class TrialState:
    """What the training loop must remember across a pause: where it is and what it last did."""

    trial_id: int = 0
    last_ckpt: int = 0
    step_id: int = 0
    last_val: int = 0
    batches_trained: int = 0
    epochs_trained: int = 0

    def to_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialState:
        known = {k: int(data[k]) for k in cls.__dataclass_fields__ if data.get(k) is not None}
        return cls(**known)


class ShouldExit(Exception):
    """Unwinds the training loop to checkpoint and return (preemption or a stop request)."""

    def __init__(self, skip_exit_checkpoint: bool = False) -> None:
        super().__init__("training stopped early")
        self.skip_exit_checkpoint = skip_exit_checkpoint


# the names det.pytorch exported before the extension module (kept for compatibility)
_TrialState = TrialState
_ShouldExit = ShouldExit
