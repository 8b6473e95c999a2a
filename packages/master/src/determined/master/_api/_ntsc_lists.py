"""The list routes notebooks and TensorBoards share: upstream's ``users``/``userIds`` filters,
``sortBy``/``orderBy`` over the JSON rows, ``offset``/``limit`` paging, visible tasks only."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Request
from sqlalchemy import select

from determined.master._api._access import visible_tasks
from determined.master._api._deps import Principal, int_param, master_of
from determined.master._wire import APIError, pagination
from determined.master.db import User

if TYPE_CHECKING:
    from determined.master._core._tasks import TaskView

SORT_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "SORT_BY_UNSPECIFIED": lambda row: row["id"],
    "SORT_BY_ID": lambda row: row["id"],
    "SORT_BY_DESCRIPTION": lambda row: row["description"],
    "SORT_BY_START_TIME": lambda row: row["startTime"],
    "SORT_BY_WORKSPACE_ID": lambda row: row["workspaceId"],
}


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
    rows = [to_json(v) for v in visible_tasks(request, principal, list_views(owner_ids or None))]
    rows.sort(key=SORT_KEYS[sort_by], reverse=order == "ORDER_BY_DESC")
    total = len(rows)
    if offset < 0:
        offset = max(total + offset, 0)
    page = rows[offset : offset + limit] if limit else rows[offset:]
    return {key: page, "pagination": pagination(offset, limit, len(page), total)}
