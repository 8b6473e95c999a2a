"""TensorBoards: ``/api/v1/tensorboards``, TensorBoard tasks over experiments' and trials' event files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class TensorboardsClient:
    """``/api/v1/tensorboards/...``: one method per endpoint; each returns the master's JSON answer
    (upstream's ``Tensorboard`` message under ``tensorboard``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """TensorBoards (``tensorboards``, ``pagination``); ``users``/``userIds`` filter owners."""
        return r.call(self.session, r.TENSORBOARDS_LIST, params=params)

    def launch(
        self,
        *,
        experiment_ids: Sequence[int] = (),
        trial_ids: Sequence[int] = (),
        filters: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        files: Sequence[Mapping[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Start a TensorBoard: ``tensorboard``, ``config``, ``warnings``."""
        body: dict[str, Any] = {
            "experimentIds": list(experiment_ids),
            "trialIds": list(trial_ids),
            "config": dict(config or {}),
        }
        if filters is not None:
            body["filters"] = dict(filters)
        if files:
            body["files"] = list(files)
        return r.call(self.session, r.TENSORBOARD_LAUNCH, body=body)

    def get(self, tensorboard_id: str) -> dict[str, Any]:
        """One TensorBoard: ``tensorboard`` and ``config``."""
        return r.call(self.session, r.TENSORBOARD_GET, tensorboard_id=tensorboard_id)

    def kill(self, tensorboard_id: str) -> dict[str, Any]:
        """Stop a TensorBoard: ``tensorboard``."""
        return r.call(self.session, r.TENSORBOARD_KILL, body={}, tensorboard_id=tensorboard_id)

    def set_priority(self, tensorboard_id: str, priority: int) -> dict[str, Any]:
        """Change a TensorBoard's priority (1..99): ``tensorboard``."""
        return r.call(
            self.session,
            r.TENSORBOARD_SET_PRIORITY,
            body={"priority": priority},
            tensorboard_id=tensorboard_id,
        )
