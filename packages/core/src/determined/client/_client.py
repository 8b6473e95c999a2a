"""The typed master client: one method per endpoint a task process calls.

Paths and JSON field names are upstream Determined's (grpc-gateway camelCase), so a trial written
against det talks to a det master and the wire stays familiar. Tests fake the master with a real HTTP
server on a loopback port, never by patching these methods.
"""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple

from determined.client import _errors
from determined.client import _routes as r
from determined.client._session import Session


def utc_now_iso() -> str:
    """The current time as RFC 3339 UTC, the way the master stores report times."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


class MasterClient:
    """Calls the master on behalf of one task (trial) process.

    Args:
        session: the HTTP session (it carries the master URL and the allocation token).
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._batch_metrics_supported: bool | None = None

    # ---- master ---------------------------------------------------------------------------------
    def get_master_info(self) -> dict[str, Any]:
        return r.call(self.session, r.MASTER_INFO)

    # ---- runs and trials --------------------------------------------------------------------------
    def start_run(self, run_id: int, checkpoint_storage: dict[str, Any] | None) -> int | None:
        """POST /api/v1/runs/start: announce the run; returns the master's storage backend id."""
        body: dict[str, Any] = {"runId": run_id}
        if checkpoint_storage is not None:
            body["checkpointStorage"] = checkpoint_storage
        answer = r.call(self.session, r.RUN_START, body=body)
        storage_id = answer.get("storageId")
        return int(storage_id) if storage_id is not None else None

    def report_trial_metrics(
        self,
        trial_id: int,
        trial_run_id: int,
        group: str,
        metrics: dict[str, Any],
        steps_completed: int | None = None,
        batch_metrics: list[dict[str, Any]] | None = None,
        report_time: str | None = None,
    ) -> None:
        """POST /api/v1/trials/{id}/metrics."""
        body = metrics_body(
            trial_id, trial_run_id, group, metrics, steps_completed, batch_metrics, report_time
        )
        r.call(self.session, r.TRIAL_REPORT_METRICS, body=body, trial_id=trial_id)

    def report_trial_metrics_batch(self, trial_id: int, reports: list[dict[str, Any]]) -> None:
        """Several reports (bodies as :func:`metrics_body` builds them) in one request.

        Uses det's batch endpoint when the master has it, else one upstream request per report.
        """
        if self._batch_metrics_supported is not False and len(reports) > 1:
            try:
                r.call(
                    self.session,
                    r.TRIAL_REPORT_METRICS_BATCH,
                    body={"reports": reports},
                    trial_id=trial_id,
                )
                self._batch_metrics_supported = True
                return
            except _errors.APIError as exc:
                if exc.status not in (404, 405) or self._batch_metrics_supported:
                    raise
                self._batch_metrics_supported = False
        for report in reports:
            r.call(self.session, r.TRIAL_REPORT_METRICS, body=report, trial_id=trial_id)

    def report_progress(self, trial_id: int, progress: float) -> None:
        body = {"progress": progress, "is_raw": True}
        r.call(self.session, r.TRIAL_PROGRESS, body=body, trial_id=trial_id)

    def set_runner_status(self, trial_id: int, status: str) -> None:
        r.call(self.session, r.TRIAL_RUNNER_METADATA, body={"state": status}, trial_id=trial_id)

    def report_early_exit(self, trial_id: int, reason: str) -> bool:
        """Returns False when the master already had an early exit for this trial (HTTP 400)."""
        try:
            r.call(self.session, r.TRIAL_EARLY_EXIT, body={"reason": reason}, trial_id=trial_id)
        except _errors.APIError as exc:
            if exc.status == 400:
                return False
            raise
        return True

    def get_best_searcher_validation_metric(self, experiment_id: int) -> float | None:
        try:
            answer = r.call(
                self.session, r.EXPERIMENT_BEST_SEARCHER_METRIC, experiment_id=experiment_id
            )
        except _errors.NotFoundError:
            return None
        metric = (answer or {}).get("metric")
        return float(metric) if metric is not None else None

    def set_run_metadata(self, run_id: int, metadata: dict[str, Any]) -> dict[str, Any]:
        body = {"runId": run_id, "metadata": metadata}
        answer = r.call(self.session, r.RUN_METADATA_SET, body=body, run_id=run_id)
        return dict((answer or {}).get("metadata") or {})

    def get_run_metadata(self, run_id: int) -> dict[str, Any]:
        answer = r.call(self.session, r.RUN_METADATA_GET, run_id=run_id)
        return dict((answer or {}).get("metadata") or {})

    def get_trial(self, trial_id: int) -> dict[str, Any]:
        return dict(r.call(self.session, r.TRIAL_GET, trial_id=trial_id).get("trial") or {})

    # ---- searcher operations (the Core API's searcher loop) ---------------------------------------
    def get_searcher_operation(self, trial_id: int) -> int | None:
        """GET /api/v1/trials/{id}/searcher/operation: the length to train to next, or None when
        the searcher needs nothing more from this trial (``completed``)."""
        answer = r.call(self.session, r.TRIAL_SEARCHER_OPERATION, trial_id=trial_id)
        return _operation_length(answer, "GET", r.TRIAL_SEARCHER_OPERATION.path(trial_id=trial_id))

    def complete_searcher_operation(
        self, trial_id: int, length: int, searcher_metric: float
    ) -> NextOperation | None:
        """POST /api/v1/trials/{id}/searcher/completed_operation (upstream 0.37's body).

        Returns the next operation when the master gave it with its answer (det's
        ``nextOperation``; upstream's master answers ``{}``): then the trial need not ask."""
        body = {"op": {"length": length}, "searcherMetric": searcher_metric}
        answer = r.call(self.session, r.TRIAL_COMPLETE_OPERATION, body=body, trial_id=trial_id)
        following = (answer or {}).get("nextOperation")
        if not isinstance(following, dict):
            return None
        path = r.TRIAL_COMPLETE_OPERATION.path(trial_id=trial_id)
        return NextOperation(_operation_length(following, "POST", path))

    # ---- checkpoints ------------------------------------------------------------------------------
    def report_checkpoint(
        self,
        uuid: str,
        *,
        task_id: str,
        allocation_id: str | None,
        resources: dict[str, int],
        metadata: dict[str, Any],
        storage_id: int | None = None,
        report_time: str | None = None,
    ) -> None:
        """POST /api/v1/checkpoints: a completed checkpoint (resource sizes are sent as strings)."""
        body: dict[str, Any] = {
            "uuid": uuid,
            "taskId": task_id,
            "reportTime": report_time or utc_now_iso(),
            "resources": {path: str(size) for path, size in resources.items()},
            "metadata": metadata,
            "state": "STATE_COMPLETED",
            "training": {},
        }
        if allocation_id is not None:
            body["allocationId"] = allocation_id
        if storage_id is not None:
            body["storageId"] = storage_id
        r.call(self.session, r.CHECKPOINT_REPORT, body=body)

    def patch_checkpoint_resources(self, uuid: str, resources: dict[str, int]) -> None:
        """PATCH /api/v1/checkpoints: the files that remain after a (partial) delete."""
        body = {
            "checkpoints": [
                {
                    "uuid": uuid,
                    "resources": {"resources": {k: str(v) for k, v in resources.items()}},
                }
            ]
        }
        r.call(self.session, r.CHECKPOINTS_PATCH, body=body)

    def get_checkpoint(self, uuid: str) -> dict[str, Any]:
        return dict(r.call(self.session, r.CHECKPOINT_GET, uuid=uuid).get("checkpoint") or {})

    # ---- allocations ------------------------------------------------------------------------------
    def get_preemption_signal(self, allocation_id: str, timeout_seconds: int) -> bool:
        """Long-poll: returns as soon as the master asks this allocation to stop, or after the timeout."""
        answer = r.call(
            self.session,
            r.ALLOCATION_PREEMPTION,
            params={"timeout_seconds": timeout_seconds},
            timeout=timeout_seconds + 10,
            allocation_id=allocation_id,
        )
        return bool((answer or {}).get("preempt", False))

    def ack_preemption(self, allocation_id: str) -> None:
        r.call(self.session, r.ALLOCATION_ACK_PREEMPTION, allocation_id=allocation_id)

    # ---- misc -------------------------------------------------------------------------------------
    def post_task_logs(self, logs: list[dict[str, Any]]) -> None:
        r.call(self.session, r.TASK_LOGS_POST, body={"logs": logs})

    def post_custom_webhook(
        self, experiment_id: int, trial_id: int, title: str, description: str, level: str
    ) -> None:
        body = {
            "data": {"title": title, "description": description, "level": level},
            "experimentId": experiment_id,
            "trialId": trial_id,
        }
        r.call(self.session, r.WEBHOOK_CUSTOM, body=body)

    def post_trial_source_info(self, trial_source_info: dict[str, Any]) -> None:
        body = {"trialSourceInfo": trial_source_info}
        r.call(self.session, r.TRIAL_SOURCE_INFO, body=body)

    def close(self) -> None:
        self.session.close()


def metrics_body(
    trial_id: int,
    trial_run_id: int,
    group: str,
    metrics: dict[str, Any],
    steps_completed: int | None = None,
    batch_metrics: list[dict[str, Any]] | None = None,
    report_time: str | None = None,
) -> dict[str, Any]:
    """The JSON body of one metrics report."""
    inner: dict[str, Any] = {"avgMetrics": metrics}
    if batch_metrics is not None:
        inner["batchMetrics"] = batch_metrics
    report: dict[str, Any] = {"trialId": trial_id, "trialRunId": trial_run_id, "metrics": inner}
    if steps_completed is not None:
        report["stepsCompleted"] = steps_completed
    if report_time is not None:
        report["reportTime"] = report_time
    return {"group": group, "metrics": report}


class NextOperation(NamedTuple):
    """A trial's next searcher operation, given by the master with its completed one:
    ``length`` None when the searcher needs nothing more from the trial."""

    length: int | None


def _operation_length(answer: dict[str, Any], method: str, path: str) -> int | None:
    """The length of a searcher-operation answer (``{"op": {"validateAfter": {"length": "N"}},
    "completed": false}``), None when ``completed``."""
    if answer.get("completed"):
        return None
    op = answer.get("op") or {}
    length = (op.get("validateAfter") or op.get("validate_after") or op).get("length")
    if length is None:
        raise _errors.APIError(
            method, path, 502, f"the master's answer has no op.validateAfter.length: {answer}"
        )
    return int(length)  # protojson sends 64-bit integers as strings
