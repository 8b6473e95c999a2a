"""Trials and runs: the resource client for ``/api/v1/trials/...`` and ``/api/v1/runs/...``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session

Params = Mapping[str, Any]


class TrialsClient:
    """One method per trial endpoint the SDK and the CLI call; each returns the master's JSON answer
    (the task process's own trial calls are :class:`~determined.client.MasterClient`'s)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, trial_id: int | str) -> dict[str, Any]:
        """One trial (``trial``)."""
        return r.call(self.session, r.TRIAL_GET, trial_id=trial_id)

    def create_unmanaged(
        self, experiment_id: int, hparams: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Add a trial to an unmanaged experiment (``trial``, its ``taskId`` included)."""
        body = {
            "experimentId": int(experiment_id),
            "hparams": dict(hparams or {}),
            "unmanaged": True,
        }
        return r.call(self.session, r.TRIAL_CREATE, body=body)

    def put_unmanaged(
        self,
        experiment_id: int,
        external_trial_id: str,
        hparams: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The unmanaged experiment's trial with this external id, created on first use (its
        hyperparameters replaced by ``hparams``): ``trial``."""
        create = {
            "experimentId": int(experiment_id),
            "hparams": dict(hparams or {}),
            "unmanaged": True,
        }
        body = {"createTrialRequest": create, "externalTrialId": external_trial_id}
        return r.call(self.session, r.TRIAL_PUT, body=body)

    def start_unmanaged(self, trial_id: int, *, resume: bool = True) -> dict[str, Any]:
        """Begin a run of an unmanaged trial: ``trialRunId``, ``stepsCompleted`` and, when an
        earlier run left one, ``latestCheckpoint`` (without ``resume``, only a new trial starts)."""
        body = {"trialId": int(trial_id), "resume": resume}
        return r.call(self.session, r.TRIAL_START, body=body, trial_id=trial_id)

    def patch_unmanaged(self, trial_id: int, state: str | None = None) -> dict[str, Any]:
        """An unmanaged trial's heartbeat; with ``state`` (``STATE_RUNNING``, ``STATE_COMPLETED``,
        ``STATE_ERROR``, ...) also its new state. Answers the ``trial``."""
        body: dict[str, Any] = {"trialId": int(trial_id)}
        if state is not None:
            body["state"] = state
        return r.call(self.session, r.TRIAL_PATCH, body=body, trial_id=trial_id)

    def kill(self, trial_id: int | str, *, retry: bool = True) -> dict[str, Any]:
        """Stop a trial for good (``retry=False`` sends the request once)."""
        return r.call(self.session, r.TRIAL_KILL, body={}, idempotent=retry, trial_id=trial_id)

    def checkpoints(self, trial_id: int | str, params: Params | None = None) -> dict[str, Any]:
        """One page of a trial's checkpoints (``checkpoints``, ``pagination``)."""
        return r.call(self.session, r.TRIAL_CHECKPOINTS, params=params, trial_id=trial_id)

    def workloads(self, trial_id: int | str, params: Params | None = None) -> dict[str, Any]:
        """One page of a trial's workloads (``workloads``, ``pagination``)."""
        return r.call(self.session, r.TRIAL_WORKLOADS, params=params, trial_id=trial_id)

    def logs(
        self, trial_id: int | str, params: Params | None = None, *, timeout: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """A trial's log entries as the master streams them (``follow`` keeps the stream open)."""
        return r.stream(
            self.session, r.TRIAL_LOGS, params=params, timeout=timeout, trial_id=trial_id
        )

    def metrics(
        self, trial_ids: Sequence[int], group: str, params: Params | None = None
    ) -> Iterator[dict[str, Any]]:
        """Streamed chunks of the metric reports of ``group`` of several trials (``metrics``)."""
        query = {"trialIds": [int(t) for t in trial_ids], "group": group, **(params or {})}
        return r.stream(self.session, r.TRIALS_METRICS, params=query)

    def get_run_metadata(self, run_id: int | str) -> dict[str, Any]:
        """The metadata a run's process stored (``metadata``)."""
        return r.call(self.session, r.RUN_METADATA_GET, run_id=run_id)
