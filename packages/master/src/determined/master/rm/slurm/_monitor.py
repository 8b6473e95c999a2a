"""The Slurm resource manager's one monitor thread.

Every :data:`TICK_S` it looks at the job directories (cheap reads of a few files): a started job's
``nodes.json`` becomes its assignment, a launched job's new output becomes ``allocation_log``
batches, its ``exit.json`` its exit. Every ``poll_interval`` (sooner after a submit or a kill) it
runs ONE ``squeue`` for all jobs, which tells it what Slurm did on its own: a job cancelled from
outside, a failed node, a time limit. Every ``capacity_interval`` it re-reads ``sinfo``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from determined.master.rm.slurm._commands import FINAL_STATES, SlurmError, parse_squeue, squeue_argv
from determined.master.rm.slurm._jobs import (
    SlurmJob,
    drain,
    exit_file_due,
    outcome,
    read_assignment,
    read_exit,
)

if TYPE_CHECKING:
    from determined.master.rm.slurm._rm import SlurmResourceManager

logger = logging.getLogger("determined.master.rm")

TICK_S = 0.05
"""How often the job directories are looked at."""
VANISH_S = 30.0
"""A job id squeue has never shown this long after sbatch answered is taken as gone."""


class Monitor:
    """Follows the jobs of ``rm`` on a daemon thread (see the module docstring)."""

    def __init__(self, rm: SlurmResourceManager) -> None:
        self._rm = rm
        self._stop = threading.Event()
        self._poke = threading.Event()
        self._thread: threading.Thread | None = None
        self._squeue_at = 0.0
        self._sinfo_at = 0.0

    def start(self) -> None:
        self._sinfo_at = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="det-rm-slurm-monitor", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Ask for an ``squeue`` on the next tick (a job was submitted, killed or launched)."""
        self._poke.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)

    def _loop(self) -> None:
        config = self._rm.config
        while not self._stop.wait(TICK_S):
            now = time.monotonic()
            jobs = self._rm.jobs_snapshot()
            try:
                if now - self._sinfo_at >= config.capacity_interval:
                    self._sinfo_at = now
                    self._rm.refresh_capacity()
                active = [j for j in jobs if j.job_id and not j.exited]
                if active and (
                    self._poke.is_set() or now - self._squeue_at >= config.poll_interval
                ):
                    self._poke.clear()
                    self._squeue_at = now
                    self._squeue(active)
            except SlurmError as exc:
                logger.warning("slurm: %s", exc)
            for job in jobs:
                try:
                    self._look(job, now)
                except Exception:
                    logger.exception("slurm: following allocation %s failed", job.allocation_id)

    def _squeue(self, jobs: list[SlurmJob]) -> None:
        statuses = parse_squeue(self._rm.run(*squeue_argv()))
        now = time.monotonic()
        with self._rm._cond:
            for job in jobs:
                status = statuses.get(str(job.job_id))
                if status is not None:
                    job.seen = True
                    job.state, job.reason = status.state, status.reason
                elif job.seen or now - job.submitted_at > VANISH_S:
                    job.state = "GONE" if job.state not in FINAL_STATES else job.state
                if (job.state in FINAL_STATES or job.state == "GONE") and job.ended_at is None:
                    job.ended_at = now

    def _look(self, job: SlurmJob, now: float) -> None:
        rm = self._rm
        if job.exited or (job.released and not job.launched):
            return
        if job.job_id is None:
            if not job.submitting and job.submit_error and now >= job.retry_at:
                with rm._cond:
                    job.submitting = True
                rm.submit_job(job)
            return
        ended = job.ended_at is not None
        if job.assignment is None:
            if ended:
                # Ended before it ever ran (cancelled while pending): submit it again.
                logger.warning(
                    "slurm: job %s of allocation %s ended before it started (%s); resubmitting",
                    job.job_id,
                    job.allocation_id,
                    job.state,
                )
                with rm._cond:
                    job.job_id, job.submitting = None, True
                rm.submit_job(job)
                return
            assignment = read_assignment(job)
            if assignment is not None:
                with rm._cond:
                    job.assignment = assignment
                rm.assigned(job)
            return
        if not job.launched:
            if ended:
                with rm._cond:
                    _, job.lost = outcome(job, None)
            return
        if not job.running:
            return
        exit_info = read_exit(job)
        if exit_info is None and not (ended and (job.kill_requested or exit_file_due(job, now))):
            lines = [line for tail in job.tails for line in tail.read()]
            if lines:
                rm._notify("allocation_log", job.allocation_id, lines)
            return
        if exit_info is None:
            exit_info = read_exit(job)  # written just before Slurm's end was seen
        lines = drain(job, exit_info.get("sizes") if exit_info else None)
        exit_code, error = outcome(job, exit_info)
        rm.finish(job, lines, exit_code, error)
