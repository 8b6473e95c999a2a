"""Per-user quotas of a shared master: how many experiments and tasks one user may have active.

The limits come from the master config's ``limits`` section (:class:`~determined.master._limits.
Limits`); 0 means no quota. Admins are exempt unless ``limits.admins_exempt`` is false.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master._limits import Limits, quota_error
from determined.master._wire import TERMINAL_STATES
from determined.master.db import Database, Experiment, NtscTask, User


def _applies(user: User, limit: int, limits: Limits) -> bool:
    return limit > 0 and not (user.admin and limits.admins_exempt)


def active_experiments(session: Session, user_id: int) -> int:
    """The user's managed experiments that are not in a terminal state."""
    stmt = (
        select(func.count())
        .select_from(Experiment)
        .where(
            Experiment.owner_id == user_id,
            Experiment.state.not_in(TERMINAL_STATES),
            Experiment.unmanaged.is_(False),
        )
    )
    return int(session.scalar(stmt) or 0)


def check_experiment_quota(db: Database, user: User, limits: Limits) -> None:
    """Refuse (429) a new experiment of a user at ``limits.max_active_experiments_per_user``."""
    limit = limits.max_active_experiments_per_user
    if not _applies(user, limit, limits):
        return
    with db.read() as session:
        active = active_experiments(session, user.id)
    if active >= limit:
        raise quota_error("experiments", active, limit, "max_active_experiments_per_user")


def check_task_quota(session: Session, user: User, limits: Limits) -> None:
    """Refuse (429) a new command, notebook, shell or TensorBoard of a user at
    ``limits.max_active_tasks_per_user`` (counted in the caller's write session)."""
    limit = limits.max_active_tasks_per_user
    if not _applies(user, limit, limits):
        return
    stmt = (
        select(func.count())
        .select_from(NtscTask)
        .where(
            NtscTask.owner_id == user.id,
            NtscTask.state != "TERMINATED",
            NtscTask.kind != "CHECKPOINT_GC",  # the master's GC runs as the owner; not theirs
        )
    )
    active = int(session.scalar(stmt) or 0)
    if active >= limit:
        raise quota_error("tasks", active, limit, "max_active_tasks_per_user")
