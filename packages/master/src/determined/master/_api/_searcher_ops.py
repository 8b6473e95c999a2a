"""The searcher-operations protocol of the Core API's searcher loop (upstream 0.37 and earlier).

``for op in core_context.searcher.operations()`` asks ``GET /api/v1/trials/{id}/searcher/operation``
for the length to train to next, and ``op.report_completed(metric)`` posts
``/api/v1/trials/{id}/searcher/completed_operation``. The answers come from the experiment's
searcher: ASHA rung lengths one after the other, one operation of the full length for the other
methods. Upstream 0.38 removed the protocol (its ``operations()`` fabricates one op and reports
nothing); det keeps it working, so code written for either version runs unchanged.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from fastapi import APIRouter, Depends, Request
from sqlalchemy.orm import Session

from determined.master._api._deps import Principal, authenticate, json_body, master_of
from determined.master._wire import TERMINAL_STATES, APIError, get, sub_object, to_float
from determined.master.db import Experiment, Run

router = APIRouter(tags=["Trials"])

_LIVE_RUN_STATES = ("ACTIVE", "PAUSED")
_LIVE_EXPERIMENT_STATES = ("ACTIVE", "PAUSED")

_continued_lock = threading.Lock()
_continued_done: dict[tuple[int, int], int] = {}
"""For experiments re-run by ``continue`` (no searcher): (trial id, run id) -> completed length."""


def _run_and_exp(session: Session, trial_id: int) -> tuple[Run, Experiment]:
    run = session.get(Run, trial_id)
    if run is None:
        raise APIError(404, f"trial {trial_id} not found")
    exp = session.get(Experiment, run.experiment_id)
    if exp is None:
        raise APIError(404, f"experiment of trial {trial_id} not found")
    return run, exp


def _check_caller(principal: Principal, run: Run, manager: Any) -> None:
    """A trial's allocation token may only drive its own trial's operations."""
    if principal.allocation_id is None:
        return
    alloc = manager.allocs.get(principal.allocation_id)
    if alloc is not None and alloc.trial_id != run.id:
        raise APIError(403, f"allocation {principal.allocation_id} does not run trial {run.id}")


def _completed() -> dict[str, Any]:
    return {"op": None, "completed": True}


def _operation(length: int) -> dict[str, Any]:
    # protojson writes 64-bit integers as strings (upstream's harness does int() on it).
    return {"op": {"validateAfter": {"length": str(length)}}, "completed": False}


def _full_length(exp: Experiment) -> int:
    from determined.master.searchers._config import get_length

    try:
        return get_length(exp.config.get("searcher") or {})[1]
    except ValueError as e:
        raise APIError(400, str(e)) from None


@router.get("/api/v1/trials/{trial_id}/searcher/operation")
def get_searcher_operation(
    request: Request, trial_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The trial's next operation: ``{"op": {"validateAfter": {"length": "N"}}, "completed": false}``,
    or ``{"op": null, "completed": true}`` once the searcher needs nothing more from it (it was
    stopped, e.g. by ASHA, or completed every operation)."""
    manager = master_of(request).manager
    with manager.txn() as session:
        run, exp = _run_and_exp(session, trial_id)
        _check_caller(principal, run, manager)
        if (
            run.state not in _LIVE_RUN_STATES
            or exp.state not in _LIVE_EXPERIMENT_STATES
            or run.early_stopped_by_searcher
        ):
            return _completed()
        if exp.id in manager.continued:
            full = _full_length(exp)
            with _continued_lock:
                done = _continued_done.get((run.id, run.run_id), 0)
            return _operation(full) if done < full else _completed()
        searcher = manager.searcher_of(exp)
        try:
            length = searcher.next_operation(run.request_id)
        except ValueError as e:
            raise APIError(400, str(e)) from None
        manager.apply_actions(session, exp, [])  # persists that the trial uses operations
        return _operation(length) if length is not None else _completed()


def _parse_length(op: Any) -> int:
    """``op.length`` in any of upstream's forms: ``{"length": N}`` (0.37),
    ``{"validateAfter": {"length": N}}``, ``{"length": {"length": N, "unit": U}}`` (older);
    N may be a string (protojson's 64-bit integers)."""
    if not isinstance(op, dict):
        raise APIError(400, 'op: required, an object like {"length": 100}')
    value = op.get("length")
    if isinstance(op.get("validateAfter"), dict):
        value = op["validateAfter"].get("length")
    elif isinstance(op.get("validate_after"), dict):
        value = op["validate_after"].get("length")
    if isinstance(value, dict):
        value = value.get("length")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise APIError(400, f"op.length: must be an integer, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise APIError(400, f"op.length: must be a positive integer, got {value!r}")
    return value


@router.post("/api/v1/trials/{trial_id}/searcher/completed_operation")
def complete_searcher_operation(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """The trial trained to ``op.length``: ``{"op": {"length": N}, "searcherMetric": value}``.

    The searcher hears it as a validation with the searcher metric and ``time_metric = N``
    (unless the trial already reported a validation at that length), so ASHA promotes or stops
    the trial here; a stopped trial gets its preemption signal and ``completed: true`` next.
    """
    payload = sub_object(body, "completed_operation")
    length = _parse_length(get(payload, "op"))
    raw_metric = get(payload, "searcher_metric")
    if raw_metric is None:
        raise APIError(400, "searcherMetric: required, the value of the searcher metric")
    metric = to_float(raw_metric)
    if metric is None or math.isnan(metric) or isinstance(raw_metric, bool):
        raise APIError(400, f"searcherMetric: must be a number, got {raw_metric!r}")
    manager = master_of(request).manager
    with manager.txn() as session:
        run, exp = _run_and_exp(session, trial_id)
        _check_caller(principal, run, manager)
        if exp.state in TERMINAL_STATES or run.state in TERMINAL_STATES:
            return {}
        if exp.id in manager.continued:
            with _continued_lock:
                key = (run.id, run.run_id)
                _continued_done[key] = max(_continued_done.get(key, 0), length)
            return {}
        request_id = run.request_id
        manager.searcher_event(
            session, exp, lambda s: s.operation_completed(request_id, length, metric)
        )
    return {}
