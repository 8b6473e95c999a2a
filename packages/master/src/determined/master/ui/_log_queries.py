"""The UI's reads of trial logs: the ranks that logged, and lines after an id or the last N."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from determined.master._core._trial_tasks import trial_task_ids
from determined.master._wire import APIError, as_utc
from determined.master.db import Run, TaskLog

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_ranks(session: Session, task_id: str) -> list[int]:
    """The ranks that logged (for the rank filter)."""
    ranks = session.scalars(select(TaskLog.rank_id).where(TaskLog.task_id == task_id).distinct())
    return sorted(r for r in ranks if r is not None)


def trial_logs(
    session: Session,
    run: Run,
    *,
    after: int = 0,
    tail: int = 1000,
    rank: int | None = None,
    level: str = "",
    text: str = "",
) -> list[dict[str, Any]]:
    """Log lines of a trial: those after id ``after``, or the last ``tail`` lines when ``after`` is 0.

    ``level`` keeps that level and the more severe ones (lines without a level count as INFO).
    """
    task_ids = trial_task_ids(session, run.id) or [run.task_id]  # a continued trial has several
    stmt = select(TaskLog).where(TaskLog.task_id.in_(task_ids))
    if rank is not None:
        stmt = stmt.where(TaskLog.rank_id == rank)
    if level:
        name = level.upper().removeprefix("LOG_LEVEL_")
        if name not in LOG_LEVELS:
            raise APIError(400, f"level: must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        keep = [f"LOG_LEVEL_{lv}" for lv in LOG_LEVELS[LOG_LEVELS.index(name) :]]
        cond: ColumnElement[bool] = TaskLog.level.in_(keep)
        if "LOG_LEVEL_INFO" in keep:
            cond = or_(cond, TaskLog.level.is_(None))
        stmt = stmt.where(cond)
    if text:
        stmt = stmt.where(func.lower(TaskLog.log).contains(text.lower(), autoescape=True))
    if after:
        rows = list(
            session.scalars(stmt.where(TaskLog.id > after).order_by(TaskLog.id).limit(5000))
        )
    else:
        rows = list(session.scalars(stmt.order_by(TaskLog.id.desc()).limit(tail)))
        rows.reverse()
    return [
        {
            "id": row.id,
            "time": as_utc(row.timestamp).isoformat() if row.timestamp else "",  # type: ignore[union-attr]
            "rank": row.rank_id,
            "level": (row.level or "LOG_LEVEL_INFO").removeprefix("LOG_LEVEL_"),
            "text": row.log.rstrip("\n"),
            "stdtype": row.stdtype or "",
        }
        for row in rows
    ]
