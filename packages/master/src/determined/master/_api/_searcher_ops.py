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
from typing import Any

from fastapi import Depends, Request

from determined.master._api._access import P, on_trial
from determined.master._api._deps import (
    Principal,
    authenticate,
    json_body,
    searcher_operations_of,
)
from determined.master._api._json_route import api_router
from determined.master._wire import APIError, get, sub_object, to_float

router = api_router(tags=["Trials"])


def _completed() -> dict[str, Any]:
    return {"op": None, "completed": True}


def _operation(length: int) -> dict[str, Any]:
    # protojson writes 64-bit integers as strings (upstream's harness does int() on it).
    return {"op": {"validateAfter": {"length": str(length)}}, "completed": False}


def _answer(length: int | None) -> dict[str, Any]:
    """The answer of ``searcher/operation``: the operation, or ``completed`` for None."""
    return _operation(length) if length is not None else _completed()


@router.get(
    "/api/v1/trials/{trial_id}/searcher/operation",
    dependencies=[on_trial(P.VIEW_EXPERIMENT_METADATA)],
)
def get_searcher_operation(
    request: Request, trial_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The trial's next operation: ``{"op": {"validateAfter": {"length": "N"}}, "completed": false}``,
    or ``{"op": null, "completed": true}`` once the searcher needs nothing more from it (it was
    stopped, e.g. by ASHA, or completed every operation)."""
    return _answer(
        searcher_operations_of(request).next_operation(trial_id, principal.allocation_id)
    )


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


@router.post(
    "/api/v1/trials/{trial_id}/searcher/completed_operation",
    dependencies=[on_trial(P.UPDATE_EXPERIMENT)],
)
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

    Upstream answers ``{}``. det adds ``nextOperation``, what ``searcher/operation`` would answer
    now, so that det's client skips that question (upstream's clients ignore the field).
    """
    payload = sub_object(body, "completed_operation")
    length = _parse_length(get(payload, "op"))
    raw_metric = get(payload, "searcher_metric")
    if raw_metric is None:
        raise APIError(400, "searcherMetric: required, the value of the searcher metric")
    metric = to_float(raw_metric)
    if metric is None or math.isnan(metric) or isinstance(raw_metric, bool):
        raise APIError(400, f"searcherMetric: must be a number, got {raw_metric!r}")
    following = searcher_operations_of(request).operation_completed(
        trial_id, principal.allocation_id, length, metric
    )
    return {} if following is None else {"nextOperation": _answer(following.length)}
