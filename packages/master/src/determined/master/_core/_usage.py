"""Historical resource use, as ``det resources`` reports it: slot time of each allocation in a
time range, and the same summed per day or month by user, experiment label and resource pool.

An allocation counts from its start to its end (now, while it runs), clipped to the range, times
its slots; an allocation that never started counts nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import aliased

from determined.master._wire import APIError, as_utc
from determined.master.db import (
    Allocation,
    Database,
    Experiment,
    NtscTask,
    Project,
    Run,
    Task,
    User,
    Workspace,
    utcnow,
)


@dataclasses.dataclass(frozen=True)
class Usage:
    """One allocation's use of slots inside the asked range."""

    allocation_id: str
    task_type: str
    username: str
    user_id: int | None
    experiment_id: int | None
    labels: list[str]
    slots: int
    resource_pool: str
    start_time: datetime.datetime | None
    end_time: datetime.datetime | None
    seconds: float
    """Wall-clock seconds inside the range (not multiplied by slots)."""
    workspace_name: str = ""
    """The workspace of the allocation's experiment or command (its current one: det does not
    record where it was when the allocation ran)."""

    @property
    def slot_seconds(self) -> float:
        return self.seconds * self.slots


@dataclasses.dataclass(frozen=True)
class Period:
    """Slot-seconds used in one day or month, in total and split three ways."""

    start: datetime.date
    monthly: bool
    seconds: float
    by_username: dict[str, float]
    by_experiment_label: dict[str, float]
    by_resource_pool: dict[str, float]


def parse_day(text: str, name: str, *, monthly: bool = False) -> datetime.date:
    """``YYYY-MM-DD`` (or ``YYYY-MM`` when ``monthly``); 400 otherwise."""
    pattern = "%Y-%m" if monthly else "%Y-%m-%d"
    try:
        return datetime.datetime.strptime(str(text), pattern).date()
    except ValueError:
        form = "YYYY-MM" if monthly else "YYYY-MM-DD"
        raise APIError(400, f"{name}: must be a date like {form}, got {text!r}") from None


def _next_month(day: datetime.date) -> datetime.date:
    return datetime.date(day.year + day.month // 12, day.month % 12 + 1, 1)


class ResourceUsage:
    """Reads of the allocations table for usage reports."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def allocations(self, start: datetime.datetime, end: datetime.datetime) -> list[Usage]:
        """Every allocation that held slots at some time in ``[start, end]``, by start time."""
        start, end = _utc(start), _utc(end)
        if start > end:
            raise APIError(400, "start time cannot be after end time")
        now = utcnow()
        task_workspace = aliased(Workspace)
        with self._db.read() as session:
            rows = session.execute(
                select(
                    Allocation,
                    Task.task_type,
                    Experiment,
                    User,
                    Workspace.name,
                    task_workspace.name,
                )
                .join(Task, Task.task_id == Allocation.task_id, isouter=True)
                .join(Run, Run.id == Allocation.trial_id, isouter=True)
                .join(Experiment, Experiment.id == Run.experiment_id, isouter=True)
                .join(User, User.id == Experiment.owner_id, isouter=True)
                .join(Project, Project.id == Experiment.project_id, isouter=True)
                .join(Workspace, Workspace.id == Project.workspace_id, isouter=True)
                .join(NtscTask, NtscTask.task_id == Allocation.task_id, isouter=True)
                .join(task_workspace, task_workspace.id == NtscTask.workspace_id, isouter=True)
                .where(
                    Allocation.start_time.is_not(None),
                    Allocation.start_time <= end,
                    or_(Allocation.end_time.is_(None), and_(Allocation.end_time >= start)),
                )
                .order_by(Allocation.start_time, Allocation.allocation_id)
            ).all()
        usages = []
        for alloc, task_type, exp, user, exp_workspace, ntsc_workspace in rows:
            began = as_utc(alloc.start_time)
            ended = as_utc(alloc.end_time)
            assert began is not None
            inside = (min(ended or now, end) - max(began, start)).total_seconds()
            usages.append(
                Usage(
                    allocation_id=alloc.allocation_id,
                    task_type=str(task_type or "TRIAL"),
                    username=user.username if user is not None else "",
                    user_id=user.id if user is not None else None,
                    experiment_id=exp.id if exp is not None else None,
                    labels=[str(x) for x in (exp.labels or [])] if exp is not None else [],
                    slots=alloc.slots,
                    resource_pool=alloc.resource_pool,
                    start_time=began,
                    end_time=ended,
                    seconds=max(inside, 0.0),
                    workspace_name=exp_workspace or ntsc_workspace or "",
                )
            )
        return usages

    def aggregated(
        self, first: datetime.date, last: datetime.date, *, monthly: bool
    ) -> list[Period]:
        """Slot-seconds per day (or month) from ``first`` to ``last``, both included."""
        if first > last:
            raise APIError(400, "start date cannot be after end date")
        days = []
        day = first.replace(day=1) if monthly else first
        while day <= last:
            following = _next_month(day) if monthly else day + datetime.timedelta(days=1)
            days.append((day, _midnight(day), _midnight(following)))
            day = following
        usages = self.allocations(days[0][1], days[-1][2])
        now = utcnow()
        periods = []
        for day, begin, finish in days:
            totals: dict[str, defaultdict[str, float]] = {
                k: defaultdict(float) for k in ("user", "label", "pool")
            }
            seconds = 0.0
            for usage in usages:
                assert usage.start_time is not None
                inside = min(usage.end_time or now, finish) - max(usage.start_time, begin)
                used = max(inside.total_seconds(), 0.0) * usage.slots
                if used <= 0.0:
                    continue
                seconds += used
                totals["user"][usage.username] += used
                totals["pool"][usage.resource_pool] += used
                for label in usage.labels:
                    totals["label"][label] += used
            periods.append(
                Period(
                    day,
                    monthly,
                    seconds,
                    dict(totals["user"]),
                    dict(totals["label"]),
                    dict(totals["pool"]),
                )
            )
        return periods


def _utc(value: datetime.datetime) -> datetime.datetime:
    """``value`` in UTC; a naive one is taken as UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def _midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(), datetime.timezone.utc)
