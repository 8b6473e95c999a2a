"""Searching runs (trials) with the web UI's filter language: upstream's ``SearchRuns``.

A filter is the JSON text ``{"filterGroup": GROUP, "showArchived": bool}``; a GROUP is
``{"kind": "group", "conjunction": "and"|"or", "children": [...]}`` and a child either a GROUP or
a field ``{"kind": "field", "columnName", "location", "operator", "value"}``. Run columns
(``location`` ``LOCATION_TYPE_RUN``, or ``LOCATION_TYPE_EXPERIMENT`` for the experiment's own
ones) become SQL conditions; hyperparameter, metadata and metric locations are not supported yet
and are refused with a 400 naming the field. A field with no value matches everything, as upstream.
The sort is ``col=asc|desc`` pairs, comma-separated, over the same columns.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import and_, func, or_, select, true
from sqlalchemy.orm import Session

from determined.master._wire import APIError, parse_ts, unstate
from determined.master.db import Checkpoint, Experiment, Run
from determined.master.db._visibility import runs_visible

_TEXT = "text"
_NUMBER = "number"
_DATE = "date"


def _config_text(*path: str, default: str | None = None) -> Any:
    value: Any = Experiment.config
    for key in path:
        value = value[key]
    text = value.as_string()
    return func.coalesce(text, default) if default is not None else text


def _run_columns() -> dict[str, tuple[Any, str]]:
    """Run-table column names (upstream's ``runColumnNameToSQL``) -> (SQL expression, kind)."""
    return {
        "id": (Run.id, _NUMBER),
        "experimentId": (Run.experiment_id, _NUMBER),
        "experimentName": (_config_text("name"), _TEXT),
        "experimentDescription": (_config_text("description"), _TEXT),
        "searcherType": (_config_text("searcher", "name"), _TEXT),
        "searcherMetric": (_config_text("searcher", "metric"), _TEXT),
        "resourcePool": (_config_text("resources", "resource_pool", default="default"), _TEXT),
        "startTime": (Run.start_time, _DATE),
        "endTime": (Run.end_time, _DATE),
        "state": (Run.state, _TEXT),
        "user": (Experiment.owner_id, _NUMBER),
        "forkedFrom": (Experiment.parent_id, _NUMBER),
        "projectId": (Experiment.project_id, _NUMBER),
        "searcherMetricsVal": (Run.searcher_metric_value, _NUMBER),
        "externalRunId": (Run.external_trial_id, _TEXT),
        "externalExperimentId": (Experiment.external_experiment_id, _TEXT),
        "logPolicyMatched": (Run.log_policy_matched, _TEXT),
    }


def _experiment_columns() -> dict[str, tuple[Any, str]]:
    """Experiment-location columns (upstream's ``expColumnNameToSQL``) that exist here."""
    runs = _run_columns()
    return {
        "id": (Experiment.id, _NUMBER),
        "name": runs["experimentName"],
        "description": runs["experimentDescription"],
        "searcherType": runs["searcherType"],
        "searcherMetric": runs["searcherMetric"],
        "startTime": (Experiment.start_time, _DATE),
        "endTime": (Experiment.end_time, _DATE),
        "state": (Experiment.state, _TEXT),
        "user": runs["user"],
        "forkedFrom": runs["forkedFrom"],
        "resourcePool": runs["resourcePool"],
        "projectId": runs["projectId"],
        "externalExperimentId": runs["externalExperimentId"],
    }


_LOCATIONS = {
    "LOCATION_TYPE_RUN": _run_columns,
    "LOCATION_TYPE_EXPERIMENT": _experiment_columns,
}
_COMPARISONS = {
    "=": lambda c, v: c == v,
    "!=": lambda c, v: c != v,
    "<": lambda c, v: c < v,
    "<=": lambda c, v: c <= v,
    ">": lambda c, v: c > v,
    ">=": lambda c, v: c >= v,
}


def parse_filter(text: str | None) -> tuple[Any, bool]:
    """The SQL condition of a filter text and whether archived runs are shown."""
    if text in (None, ""):
        return true(), True
    try:
        root = json.loads(text or "")
    except ValueError as exc:
        raise APIError(400, f"filter: not valid JSON ({exc})") from None
    if not isinstance(root, dict):
        raise APIError(400, "filter: must be a JSON object")
    show_archived = root.get("showArchived", False)
    if not isinstance(show_archived, bool):
        raise APIError(400, "filter.showArchived: must be a boolean")
    group = root.get("filterGroup")
    condition = true() if group is None else _node(group, "filter.filterGroup")
    return condition, show_archived


def _node(node: Any, path: str) -> Any:
    if not isinstance(node, dict):
        raise APIError(400, f"{path}: must be an object")
    kind = node.get("kind")
    if kind == "group":
        conjunction = node.get("conjunction")
        if conjunction not in ("and", "or"):
            raise APIError(400, f'{path}.conjunction: must be "and" or "or", got {conjunction!r}')
        children = node.get("children") or []
        if not isinstance(children, list):
            raise APIError(400, f"{path}.children: must be a list")
        if not children:
            return true()
        parts = [_node(child, f"{path}.children[{i}]") for i, child in enumerate(children)]
        return and_(*parts) if conjunction == "and" else or_(*parts)
    if kind == "field":
        return _field(node, path)
    raise APIError(400, f'{path}.kind: must be "group" or "field", got {kind!r}')


def _field(node: dict[str, Any], path: str) -> Any:
    operator = node.get("operator")
    if not isinstance(operator, str):
        raise APIError(400, f"{path}.operator: required")
    location = node.get("location") or "LOCATION_TYPE_EXPERIMENT"
    columns = _LOCATIONS.get(location)
    if columns is None:
        raise APIError(400, f"{path}.location: {location!r} is not supported for run searches")
    name = node.get("columnName")
    found = columns().get(name) if isinstance(name, str) else None
    if found is None:
        raise APIError(400, f"{path}.columnName: unknown {location} column {name!r}")
    column, kind = found
    value = node.get("value")
    if operator == "isEmpty":
        return column.is_(None)
    if operator == "notEmpty":
        return column.is_not(None)
    if value is None:
        return true()
    if operator in ("contains", "notContains"):
        if kind != _TEXT:
            raise APIError(400, f"{path}.operator: {operator} needs a text column, not {name}")
        like = column.contains(str(value), autoescape=True)
        return like if operator == "contains" else ~like
    compare = _COMPARISONS.get(operator)
    if compare is None:
        raise APIError(400, f"{path}.operator: unknown operator {operator!r}")
    return compare(column, _typed(value, kind, str(name), f"{path}.value"))


def _typed(value: Any, kind: str, name: str, path: str) -> Any:
    if kind == _NUMBER:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise APIError(400, f"{path}: {name} needs a number")
        try:
            return float(value) if isinstance(value, float) or "." in str(value) else int(value)
        except ValueError:
            raise APIError(400, f"{path}: {name} needs a number, got {value!r}") from None
    if kind == _DATE:
        try:
            parsed = parse_ts(value)
        except ValueError:
            parsed = None
        if parsed is None:
            raise APIError(400, f"{path}: {name} needs an RFC 3339 time, got {value!r}")
        return parsed
    return unstate(str(value)) if name == "state" else str(value)


def parse_sort(text: str | None) -> list[Any]:
    """``col=asc,col2=desc`` -> ORDER BY clauses (run id ascending last, so pages are stable)."""
    columns = _run_columns()
    order: list[Any] = []
    for index, part in enumerate(p for p in (text or "").split(",") if p.strip()):
        name, _, direction = part.strip().partition("=")
        found = columns.get(name)
        if found is None:
            raise APIError(400, f"sort[{index}]: unknown run column {name!r}")
        if direction not in ("asc", "desc"):
            raise APIError(400, f"sort[{index}]: direction must be asc or desc, got {direction!r}")
        order.append(found[0].desc() if direction == "desc" else found[0].asc())
    order.append(Run.id.asc())
    return order


def search_runs(
    session: Session,
    workspaces: Collection[int] | None,
    *,
    project_id: int | None,
    filter_text: str | None,
    sort_text: str | None,
    offset: int,
    limit: int,
) -> tuple[list[tuple[Run, Experiment]], int]:
    """A page of the runs the caller may see that pass the filter, and how many pass it in all
    (``limit`` 0: every run from ``offset`` on)."""
    condition, show_archived = parse_filter(filter_text)
    order = parse_sort(sort_text)
    where = [Experiment.state != "DELETED", runs_visible(workspaces), condition]
    if project_id is not None:
        where.append(Experiment.project_id == project_id)
    if not show_archived:
        where += [Run.archived.is_(False), Experiment.archived.is_(False)]
    base = select(Run, Experiment).join(Experiment, Experiment.id == Run.experiment_id)
    total: int | None = session.scalar(
        select(func.count())
        .select_from(Run)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .where(*where)
    )
    stmt = base.where(*where).order_by(*order).offset(offset)
    if limit > 0:
        stmt = stmt.limit(limit)
    rows = [(run, exp) for run, exp in session.execute(stmt)]
    return rows, total or 0


def checkpoint_totals(session: Session, run_ids: list[int]) -> dict[int, tuple[int, int]]:
    """``run id -> (completed checkpoints, their total size in bytes)`` for a page of runs."""
    if not run_ids:
        return {}
    rows = session.execute(
        select(
            Checkpoint.trial_id,
            func.count(Checkpoint.id),
            func.coalesce(func.sum(Checkpoint.size), 0),
        )
        .where(Checkpoint.trial_id.in_(run_ids), Checkpoint.state == "COMPLETED")
        .group_by(Checkpoint.trial_id)
    )
    return {int(tid): (int(count), int(size)) for tid, count, size in rows if tid is not None}
