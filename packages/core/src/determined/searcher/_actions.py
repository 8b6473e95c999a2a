"""What a search method says (actions) and why a trial ended early (exit reasons)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True)
class Create:
    """Start a new trial.

    Attributes:
        request_id: the trial's searcher identity, a UUIDv4 string drawn from the searcher's RNG.
        trial_seed: the trial's random seed, in ``[0, 2**31)``.
        hparams: the trial's hyperparameters (a nested dict, JSON-ready).
        parent_request_id: when set, the new trial is warm-started from the latest checkpoint
            of the trial created by that request (upstream's create-from-checkpoint, used by
            population-based training); its ``latest_checkpoint`` is that checkpoint.
        parent_steps: with ``parent_request_id``, take the parent's latest checkpoint of at most
            this many ``steps_completed`` (its state at the end of a round, even when it has
            trained on since).
    """

    request_id: str
    trial_seed: int
    hparams: dict[str, Any] = field(default_factory=dict)
    parent_request_id: str | None = None
    parent_steps: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"type": "create", "request_id", "trial_seed", "hparams"}``, plus
        ``parent_request_id`` when the trial is warm-started from another one."""
        data: dict[str, Any] = {
            "type": "create",
            "request_id": self.request_id,
            "trial_seed": self.trial_seed,
            "hparams": self.hparams,
        }
        if self.parent_request_id is not None:
            data["parent_request_id"] = self.parent_request_id
        if self.parent_steps is not None:
            data["parent_steps"] = self.parent_steps
        return data


@dataclass(frozen=True)
class Stop:
    """Stop the trial created by ``request_id``: the searcher needs no more of its results."""

    request_id: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"type": "stop", "request_id"}``."""
        return {"type": "stop", "request_id": self.request_id}


@dataclass(frozen=True)
class Shutdown:
    """End the search.

    Attributes:
        cancel: every trial was canceled by a user (the experiment ends CANCELED).
        failure: every trial errored (the experiment ends in ERROR); both false means COMPLETED.
    """

    cancel: bool = False
    failure: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"type": "shutdown", "cancel", "failure"}``."""
        return {"type": "shutdown", "cancel": self.cancel, "failure": self.failure}


Action: TypeAlias = Create | Stop | Shutdown
"""Anything a search method can ask the experiment to do."""


def action_from_dict(data: dict[str, Any]) -> Action:
    """Rebuild an action from its ``to_dict()`` form; ValueError naming the bad field otherwise."""
    kind = data.get("type")
    if kind == "create":
        return Create(
            request_id=str(data["request_id"]),
            trial_seed=int(data["trial_seed"]),
            hparams=dict(data.get("hparams") or {}),
            parent_request_id=(
                str(data["parent_request_id"]) if data.get("parent_request_id") else None
            ),
            parent_steps=int(data["parent_steps"])
            if data.get("parent_steps") is not None
            else None,
        )
    if kind == "stop":
        return Stop(request_id=str(data["request_id"]))
    if kind == "shutdown":
        return Shutdown(cancel=bool(data.get("cancel")), failure=bool(data.get("failure")))
    raise ValueError(f"action.type: expected 'create', 'stop' or 'shutdown', got {kind!r}")


class ExitedReason(enum.Enum):
    """Why a trial ended before the searcher stopped it (upstream's ``model.ExitedReason``)."""

    ERRORED = "ERRORED"
    """The trial failed (counts as a failure of the search)."""
    USER_CANCELED = "USER_CANCELED"
    """A user killed or canceled the trial."""
    INVALID_HP = "INVALID_HP"
    """User code raised ``det.InvalidHP`` during training: the hyperparameters are unusable."""
    INIT_INVALID_HP = "INIT_INVALID_HP"
    """User code raised ``det.InvalidHP`` while building the trial."""
    USER_REQUESTED_STOP = "USER_REQUESTED_STOP"
    """User code asked to stop the trial early."""
