"""One allocation's Slurm job as the resource manager tracks it, and how its end is read.

A job goes: submitted (``sbatch`` answered a job id) → started (Slurm runs it; the batch helper
wrote ``nodes.json``: the allocation is assigned) → launched (the master's ``launch.json`` is
staged; the ranks run, the output files are followed) → ended (``exit.json`` written, or Slurm
reports a final state). :func:`outcome` turns the end into ``allocation_exited``'s arguments.
"""

from __future__ import annotations

import json
import pathlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from determined.master.rm._types import AllocationRequest, Assignment, LogLine
from determined.master.rm.slurm import _job
from determined.master.rm.slurm._commands import (
    FINAL_STATES,
    LOST_STATES,
    SQUEUE_FORMAT,
    parse_squeue,
)
from determined.master.rm.slurm._script import JOB_NAME_PREFIX, job_name
from determined.master.rm.slurm._tail import FileTail

EXIT_GRACE_S = 10.0
"""How long the output files may lag behind ``exit.json`` (a shared filesystem's caches), and
how long a job Slurm reports ended may take to show its ``exit.json``."""


@dataclass
class SlurmJob:
    """The resource manager's record of one allocation's Slurm job (changed under its lock)."""

    request: AllocationRequest
    partition: str
    slot_type: str
    cpus_per_slot: int | None
    directory: pathlib.Path
    job_id: str | None = None
    submitting: bool = False
    submit_error: str | None = None
    retry_at: float = 0.0
    submitted_at: float = 0.0
    state: str = "SUBMITTING"
    reason: str = ""
    seen: bool = False
    ended_at: float | None = None
    assignment: Assignment | None = None
    launched: bool = False
    running: bool = False
    pending_signal: int | None = None
    kill_requested: bool = False
    released: bool = False
    lost: str | None = None
    exited: bool = False
    look_at: float = 0.0
    look_delay: float = 0.05
    tails: list[FileTail] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.tails = [
            FileTail(str(self.directory / _job.STDOUT_FILE), "stdout"),
            FileTail(str(self.directory / _job.STDERR_FILE), "stderr"),
        ]

    @property
    def allocation_id(self) -> str:
        return self.request.allocation_id

    @property
    def cuda(self) -> bool:
        return self.slot_type == "cuda"

    def summary(self) -> dict[str, Any]:
        """What ``describe`` shows of the job."""
        return {
            "allocation_id": self.allocation_id,
            "job_id": self.job_id,
            "partition": self.partition,
            "state": self.state,
            "reason": self.reason,
            "slots": self.request.slots,
        }


def read_assignment(job: SlurmJob) -> Assignment | None:
    """The allocation's assignment once the job started (its ``nodes.json``), else None."""
    path = job.directory / _job.NODES_FILE
    try:
        nodes = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    slots = [int(c) for c in nodes["slots"]]
    if job.request.slots == 0:
        return Assignment(job.allocation_id, [], [str(a) for a in nodes["addrs"]], [0])
    return Assignment(
        allocation_id=job.allocation_id,
        slot_ids=[int(i) for i in nodes["slot_ids"]],
        container_addrs=[str(a) for a in nodes["addrs"]],
        container_slot_counts=slots,
    )


def failed_start(job: SlurmJob, error: str) -> None:
    """Mark ``job`` as unable to ever run the trial (call with the RM's lock held): it is
    assigned with ``error``, so the master's launch reports the error as the trial's failure
    (``max_restarts`` applies) instead of the RM retrying forever."""
    slots = job.request.slots
    job.lost = error
    job.assignment = Assignment(job.allocation_id, list(range(slots)), [""], [slots])


def read_exit(job: SlurmJob) -> dict[str, Any] | None:
    """The batch helper's ``exit.json`` (exit code, output sizes) once written, else None."""
    try:
        return dict(json.loads((job.directory / _job.EXIT_FILE).read_text()))
    except (OSError, ValueError):
        return None


def drain(job: SlurmJob, sizes: dict[str, int] | None) -> list[LogLine]:
    """Every line left in the output files; with ``sizes`` (from ``exit.json``), wait up to
    :data:`EXIT_GRACE_S` for the files to reach them."""
    if sizes:
        deadline = time.monotonic() + EXIT_GRACE_S
        names = (_job.STDOUT_FILE, _job.STDERR_FILE)
        while time.monotonic() < deadline and any(
            tail.size() < int(sizes.get(name, 0))
            for tail, name in zip(job.tails, names, strict=True)
        ):
            time.sleep(0.05)
    lines: list[LogLine] = []
    for tail in job.tails:
        lines += tail.finish()
    return lines


def outcome(job: SlurmJob, exit_info: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """``(exit_code, error)`` for ``allocation_exited``.

    A kill the master asked for is ``-SIGKILL``; the exit code the ranks left otherwise. A job
    that Slurm ended (cancelled from outside, node failure, time limit, preemption) or that
    vanished is a lost allocation: an error, so the master restarts the trial from its checkpoint.
    """
    if exit_info is not None:
        code = int(exit_info.get("exit_code", 1))
        if job.kill_requested and code != 0:
            return -signal.SIGKILL, None
        return code, None
    if job.kill_requested:
        return -signal.SIGKILL, None
    where = f"Slurm job {job.job_id}"
    if job.state in LOST_STATES:
        reason = f", {job.reason}" if job.reason and job.reason != "None" else ""
        return None, f"{where} was ended by Slurm ({job.state}{reason})"
    if job.state == "FAILED":
        return None, f"{where} failed before its ranks finished (see its stderr above)"
    return None, f"{where} is gone from Slurm's queue ({job.state})"


def stderr_tail(job: SlurmJob, lines: int = 3) -> str:
    """The last lines the job wrote on stderr (for an error message)."""
    try:
        with open(job.directory / _job.STDERR_FILE, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def exit_file_due(job: SlurmJob, now: float) -> bool:
    """Whether a job Slurm reports ended has had time enough to show its ``exit.json``."""
    return job.ended_at is not None and now - job.ended_at >= EXIT_GRACE_S


def remove_directory(path: pathlib.Path) -> None:
    """Remove a finished job's directory (best effort)."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def reap_job(run: Callable[..., str], job_id: int, allocation_id: str | None) -> bool:
    """Cancel Slurm job ``job_id`` left by a previous master if it is an active det job (of
    ``allocation_id``); True when it was cancelled. Another user's or program's job is left alone."""
    import logging

    from determined.master.rm.slurm._commands import SlurmError

    logger = logging.getLogger("determined.master.rm")
    try:
        out = run("squeue", "--noheader", f"--jobs={int(job_id)}", f"--format={SQUEUE_FORMAT}")
    except SlurmError:
        return False
    status = parse_squeue(out).get(str(job_id))
    if status is None or status.state in FINAL_STATES:
        return False
    wanted = job_name(allocation_id) if allocation_id else None
    if not status.name.startswith(JOB_NAME_PREFIX) or (
        wanted is not None and status.name != wanted
    ):
        logger.warning("reap_orphan: Slurm job %s is not a det allocation; left alone", job_id)
        return False
    try:
        run("scancel", str(job_id))
    except SlurmError as exc:
        logger.warning("reap_orphan: %s", exc)
        return False
    return True
