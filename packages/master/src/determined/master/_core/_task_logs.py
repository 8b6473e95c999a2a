"""Task log rows: lines the master writes itself, and batches a resource manager forwards."""

from __future__ import annotations

import logging
from typing import Any, cast

from sqlalchemy import Table, insert
from sqlalchemy.orm import Session

from determined.master import _wire
from determined.master._core._held_rows import write_at_commit
from determined.master._core._log_policies import monitor as monitor_log_policies
from determined.master.db import Database, TaskLog, utcnow

logger = logging.getLogger("determined.master")


def master_log(
    session: Session,
    task_id: str,
    message: str,
    level: str = "LOG_LEVEL_INFO",
    allocation_id: str | None = None,
) -> None:
    """Add one line written by the master (not the task) to ``task_id``'s logs.

    The line is written when ``session`` commits, with every other master line of that transaction
    in one multi-row INSERT (a trial's launch and exit write several)."""
    write_at_commit(
        session,
        _INSERT_LINE,
        {
            "task_id": task_id,
            "allocation_id": allocation_id,
            "agent_id": "master",
            "timestamp": utcnow(),
            "level": level,
            "log": message.rstrip("\n") + "\n",
            "source": "master",
            "stdtype": "stdout",
        },
    )


_INSERT_LINE = insert(cast("Table", TaskLog.__table__))
"""Core, built once: the ORM's bulk insert of these dicts cost several times the INSERT. Run
after the transaction's flush (``write_at_commit``): a line may belong to a task added in it."""


def store_task_lines(db: Database, task_id: str, allocation_id: str, lines: list[Any]) -> None:
    """Store a batch of an allocation's output lines (``rm.LogLine``) in their own transaction.

    A failure is logged, not raised: the resource manager's log thread must keep going.
    """
    rows = [
        TaskLog(
            task_id=task_id,
            allocation_id=allocation_id,
            agent_id="local",
            container_id=allocation_id,
            rank_id=line.rank_id,
            timestamp=_wire.parse_ts(line.timestamp) or utcnow(),
            level=line.level,
            log=line.message if line.message.endswith("\n") else line.message + "\n",
            source="task",
            stdtype=line.stdtype,
        )
        for line in lines
    ]
    try:
        with db.write() as session:
            session.add_all(rows)
            monitor_log_policies(session, rows)
    except Exception:
        logger.exception("master: storing %d log lines failed", len(rows))
