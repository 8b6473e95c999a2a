"""The list routes notebooks and TensorBoards share: upstream's ``users``/``userIds`` and
``workspaceId`` filters, ``sortBy``/``orderBy`` over the JSON rows, ``offset``/``limit`` paging,
visible tasks only. Tasks of a deleted workspace are not listed (upstream lists only the tasks it
still runs; deleting a workspace stops its tasks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Request
from sqlalchemy import select

from determined.master._api._access import P, visible_tasks
from determined.master._api._deps import Principal, authz_of, int_param, master_of
from determined.master._wire import APIError, pagination
from determined.master.db import User, Workspace

if TYPE_CHECKING:
    from determined.master._core._tasks import TaskView

SORT_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "SORT_BY_UNSPECIFIED": lambda row: row["id"],
    "SORT_BY_ID": lambda row: row["id"],
    "SORT_BY_DESCRIPTION": lambda row: row["description"],
    "SORT_BY_START_TIME": lambda row: row["startTime"],
    "SORT_BY_WORKSPACE_ID": lambda row: row["workspaceId"],
}


def workspace_filter(request: Request, principal: Principal) -> int | None:
    """The ``workspaceId`` query parameter (None: absent or 0); 404 naming the workspace when it
    does not exist or the caller cannot see it, as upstream."""
    ws = int_param(request.query_params.get("workspaceId"), "workspaceId", 0) or 0
    if not ws:
        return None
    with master_of(request).db.read() as session:
        exists = session.get(Workspace, ws) is not None
    if not exists or not authz_of(request).can(principal, P.VIEW_WORKSPACE, ws):
        raise APIError(404, f"workspaceId: workspace {ws} not found")
    return ws


def in_workspaces(request: Request, views: list[TaskView], ws: int | None) -> list[TaskView]:
    """The views of tasks whose workspace still exists (of workspace ``ws`` when given)."""
    with master_of(request).db.read() as session:
        existing = set(session.scalars(select(Workspace.id)))
    return [v for v in views if v.workspace_id in existing and (ws is None or v.workspace_id == ws)]


def list_tasks(
    request: Request,
    principal: Principal,
    key: str,
    list_views: Callable[[list[int] | None], list[TaskView]],
    to_json: Callable[[TaskView], dict[str, Any]],
) -> dict[str, Any]:
    """``{key: [rows of one page], "pagination": ...}`` for the request's query parameters.

    ``list_views(owner_ids or None)`` lists the service's tasks; ``to_json`` makes a row of each.
    """
    q = request.query_params
    ws = workspace_filter(request, principal)
    owner_ids = [int(int_param(x, "userIds") or 0) for x in q.getlist("userIds")]
    names = q.getlist("users")
    if names:
        with master_of(request).db.read() as session:
            owner_ids += list(session.scalars(select(User.id).where(User.username.in_(names))))
        if not owner_ids:
            return {key: [], "pagination": pagination(0, 0, 0, 0)}
    sort_by = q.get("sortBy") or "SORT_BY_ID"
    if sort_by not in SORT_KEYS:
        raise APIError(400, f"sortBy: must be one of {', '.join(SORT_KEYS)}")
    order = q.get("orderBy") or "ORDER_BY_ASC"
    if order not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise APIError(400, "orderBy: must be ORDER_BY_ASC or ORDER_BY_DESC")
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    if limit < 0:
        raise APIError(400, "limit: must be >= 0")
    views = in_workspaces(request, list_views(owner_ids or None), ws)
    rows = [to_json(v) for v in visible_tasks(request, principal, views)]
    rows.sort(key=SORT_KEYS[sort_by], reverse=order == "ORDER_BY_DESC")
    total = len(rows)
    if offset < 0:
        offset = max(total + offset, 0)
    page = rows[offset : offset + limit] if limit else rows[offset:]
    return {key: page, "pagination": pagination(offset, limit, len(page), total)}
