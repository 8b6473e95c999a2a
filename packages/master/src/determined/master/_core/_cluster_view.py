"""What the cluster is doing now: the job queue and the slots, as ``det job list`` and
``det slot list`` show them.

The resource manager's own queue (``ResourceManager.queue_state``) is the truth about what holds
slots and what waits in which order; the database adds who submitted each job and its name.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
from typing import Any

from sqlalchemy import select

from determined.master._wire import APIError
from determined.master.db import Allocation, Database, Experiment, Run, User

JOB_STATES = ("STATE_QUEUED", "STATE_SCHEDULED", "STATE_SCHEDULED_BACKFILLED")


@dataclasses.dataclass
class Job:
    """One job of the queue (upstream's ``jobv1.Job``)."""

    job_id: str
    resource_pool: str
    state: str
    jobs_ahead: int
    priority: int
    weight: float
    requested_slots: int = 0
    allocated_slots: int = 0
    type: str = "TYPE_UNSPECIFIED"
    entity_id: str = ""
    name: str = ""
    username: str = ""
    user_id: int | None = None
    submission_time: datetime.datetime | None = None
    progress: float | None = None


@dataclasses.dataclass(frozen=True)
class Slot:
    """One slot of an agent (upstream's ``agentv1.Slot``) and the allocation holding it."""

    slot_id: int
    device_type: str
    brand: str
    uuid: str
    allocation_id: str | None
    enabled: bool = True
    draining: bool = False


@dataclasses.dataclass(frozen=True)
class Agent:
    """A machine (local RM) or resource pool (Ray) with its slots (upstream's ``agentv1.Agent``)."""

    agent_id: str
    resource_pool: str
    slots: list[Slot]
    registered_time: datetime.datetime
    address: str
    enabled: bool = True
    draining: bool = False


@dataclasses.dataclass(frozen=True)
class TaskSummary:
    """An allocation holding slots (upstream's ``AllocationSummary``)."""

    allocation_id: str
    task_id: str
    name: str
    resource_pool: str
    slots: int
    slot_ids: list[int]
    priority: int
    registered_time: datetime.datetime | None


class ClusterView:
    """Reads of the resource manager's queue and slots, joined with the jobs' owners."""

    def __init__(self, db: Database, rm: Any, started: datetime.datetime) -> None:
        self._db = db
        self._rm = rm
        self._started = started

    def jobs(self, resource_pool: str | None = None) -> list[Job]:
        """Every job holding or waiting for slots: scheduled jobs first, then the queue in
        scheduling order; ``jobs_ahead`` is a job's position in that order within its pool."""
        jobs: list[Job] = []
        for pool, state in self._rm.queue_state().items():
            if resource_pool and pool != resource_pool:
                continue
            by_id: dict[str, Job] = {}
            for request in state["running"]:
                job = self._job(by_id, pool, request, "STATE_SCHEDULED")
                job.requested_slots += request["slots"]
                job.allocated_slots += request["slots"]
            for request in state["queued"]:
                job = self._job(by_id, pool, request, "STATE_QUEUED")
                job.requested_slots += request["slots"]
            for position, job in enumerate(by_id.values()):
                job.jobs_ahead = position
            jobs.extend(by_id.values())
        self._describe(jobs)
        return jobs

    @staticmethod
    def _job(by_id: dict[str, Job], pool: str, request: dict[str, Any], state: str) -> Job:
        job = by_id.get(request["job_id"])
        if job is None:
            job = by_id[request["job_id"]] = Job(
                job_id=request["job_id"],
                resource_pool=pool,
                state=state,
                jobs_ahead=0,
                priority=int(request["priority"]),
                weight=float(request["weight"]),
            )
        return job

    def _describe(self, jobs: list[Job]) -> None:
        ids = {job.job_id for job in jobs}
        if not ids:
            return
        with self._db.read() as session:
            rows = session.execute(
                select(Experiment, User.username)
                .join(User, User.id == Experiment.owner_id, isouter=True)
                .where(Experiment.job_id.in_(ids))
            ).all()
        found = {exp.job_id: (exp, username) for exp, username in rows}
        self._describe_tasks([job for job in jobs if job.job_id.startswith("task-")])
        for job in jobs:
            if job.job_id not in found:
                continue
            exp, username = found[job.job_id]
            job.type = "TYPE_EXPERIMENT"
            job.entity_id = str(exp.id)
            job.name = str((exp.config or {}).get("name") or f"Experiment {exp.id}")
            job.username = username or ""
            job.user_id = exp.owner_id
            job.submission_time = exp.start_time
            job.progress = exp.progress

    def _describe_tasks(self, jobs: list[Job]) -> None:
        """Commands, notebooks, TensorBoards and shells: job ``task-<task id>``."""
        if not jobs:
            return
        from determined.master.db import NtscTask

        ids = [job.job_id[len("task-") :] for job in jobs]
        with self._db.read() as session:
            rows = session.execute(
                select(NtscTask, User.username)
                .join(User, User.id == NtscTask.owner_id, isouter=True)
                .where(NtscTask.task_id.in_(ids))
            ).all()
        found = {f"task-{task.task_id}": (task, username) for task, username in rows}
        for job in jobs:
            if job.job_id in found:
                task, username = found[job.job_id]
                job.type = f"TYPE_{task.kind}"
                job.entity_id = task.task_id
                job.name = task.description
                job.username = username or ""
                job.user_id = task.owner_id
                job.submission_time = task.start_time

    def experiment_of_job(self, job_id: str) -> int:
        """The experiment whose job ``job_id`` is (404 when no experiment has it)."""
        with self._db.read() as session:
            exp_id = session.scalar(select(Experiment.id).where(Experiment.job_id == job_id))
        if exp_id is None or not job_id:
            raise APIError(404, f"job {job_id!r} not found")
        return int(exp_id)

    def tasks(self) -> list[TaskSummary]:
        """The allocations holding slots now, with their trial's name."""
        running = [
            (pool, request)
            for pool, state in self._rm.queue_state().items()
            for request in state["running"]
        ]
        ids = [request["allocation_id"] for _, request in running]
        names: dict[str, str] = {}
        starts: dict[str, datetime.datetime | None] = {}
        if ids:
            with self._db.read() as session:
                rows = session.execute(
                    select(Allocation, Run.experiment_id)
                    .join(Run, Run.id == Allocation.trial_id, isouter=True)
                    .where(Allocation.allocation_id.in_(ids))
                ).all()
            for alloc, experiment_id in rows:
                starts[alloc.allocation_id] = alloc.start_time
                if alloc.trial_id is not None:
                    names[alloc.allocation_id] = (
                        f"Trial {alloc.trial_id} (Experiment {experiment_id})"
                    )
        return [
            TaskSummary(
                allocation_id=request["allocation_id"],
                task_id=str(request.get("task_id") or ""),
                name=names.get(request["allocation_id"], request["allocation_id"]),
                resource_pool=pool,
                slots=int(request["slots"]),
                slot_ids=list(request.get("slot_ids") or []),
                priority=int(request["priority"]),
                registered_time=starts.get(request["allocation_id"]),
            )
            for pool, request in running
        ]

    def agents(self) -> list[Agent]:
        """One agent per resource pool of the resource manager, its slots and their holders."""
        describe = self._rm.describe()
        gpus = describe.get("gpus") or []
        host = socket.gethostname()
        agents = []
        for pool, state in self._rm.queue_state().items():
            slot_type = str(state.get("slot_type") or describe.get("slot_type") or "cpu")
            slots = []
            for index, holder in enumerate(state["slots"]):
                gpu = gpus[index] if slot_type == "cuda" and index < len(gpus) else {}
                slots.append(
                    Slot(
                        slot_id=index,
                        device_type=slot_type,
                        brand=str(gpu.get("name") or ("CPU" if slot_type == "cpu" else "")),
                        uuid=str(gpu.get("uuid") or ""),
                        allocation_id=holder,
                    )
                )
            agent_id = _agent_id(describe, pool, host)
            address = str(describe.get("address") or host)
            agents.append(Agent(agent_id, pool, slots, self._started, address))
        return agents

    def pool_of_agent(self, agent_id: str) -> str | None:
        """The resource pool whose agent is ``agent_id`` (also one that has no slots yet, after
        a restart), or None when the id cannot be one of this resource manager's agents."""
        for agent in self.agents():
            if agent.agent_id == agent_id:
                return agent.resource_pool
        kind = str(self._rm.describe().get("type"))
        prefix = f"{kind}-"
        if kind != "local" and agent_id.startswith(prefix) and len(agent_id) > len(prefix):
            return agent_id[len(prefix) :]
        return None


def _agent_id(describe: dict[str, Any], pool: str, host: str) -> str:
    """This machine's host name for the local RM's one pool; ``<rm type>-<pool>`` else."""
    return host if describe.get("type") == "local" else f"{describe.get('type')}-{pool}"
