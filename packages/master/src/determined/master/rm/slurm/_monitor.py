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
    failed_start,
    outcome,
    read_assignment,
    read_exit,
    stderr_tail,
)

if TYPE_CHECKING:
    from determined.master.rm.slurm._rm import SlurmResourceManager

logger = logging.getLogger("determined.master.rm")

TICK_S = 0.05
"""How often the job directories are looked at."""
QUIET_LOOK_S = 1.0
"""Longest time between two looks at the output of a running job that writes nothing."""
WAITING_LOOK_S = 0.2
"""Longest time between two looks for the start of a job (a stat of one file)."""
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
            except Exception:  # never let the one thread that follows every job die
                logger.exception("slurm: polling Slurm failed")
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
                    if status.state != job.state:
                        job.look_at = 0.0  # Slurm moved it: look at its files now
                    job.state, job.reason = status.state, status.reason
                elif job.seen or now - job.submitted_at > VANISH_S:
                    job.state = "GONE" if job.state not in FINAL_STATES else job.state
                if (job.state in FINAL_STATES or job.state == "GONE") and job.ended_at is None:
                    job.ended_at = now

    def _look(self, job: SlurmJob, now: float) -> None:
        """One look at a job; quiet jobs are looked at less and less often (a shared fs)."""
        if job.exited or (job.released and not job.launched) or now < job.look_at:
            return
        if self._step(job, now):
            job.look_delay = TICK_S
        else:
            longest = QUIET_LOOK_S if job.assignment is not None else WAITING_LOOK_S
            job.look_delay = min(max(job.look_delay, TICK_S) * 2, longest)
        job.look_at = now + job.look_delay

    def _step(self, job: SlurmJob, now: float) -> bool:
        """Move the job on as far as its files and Slurm's view say; whether anything changed."""
        rm = self._rm
        if job.job_id is None:
            if job.lost is None and not job.submitting and job.submit_error and now >= job.retry_at:
                with rm._cond:
                    job.submitting = True
                rm.submit_job(job)
            return False
        ended = job.ended_at is not None
        if job.assignment is None:
            if ended:
                self._ended_unassigned(job)
                return True
            assignment = read_assignment(job)
            if assignment is None:
                return False
            with rm._cond:
                job.assignment = assignment
            rm.assigned(job)
            return True
        if not job.launched:
            if ended and job.lost is None:
                with rm._cond:
                    _, job.lost = outcome(job, None)
            return False
        if not job.running:
            return True  # being staged: look again soon
        exit_info = read_exit(job)
        if exit_info is None and not (ended and (job.kill_requested or exit_file_due(job, now))):
            lines = [line for tail in job.tails for line in tail.read()]
            if lines:
                rm._notify("allocation_log", job.allocation_id, lines)
            return bool(lines) or ended
        if exit_info is None:
            exit_info = read_exit(job)  # written just before Slurm's end was seen
        lines = drain(job, exit_info.get("sizes") if exit_info else None)
        exit_code, error = outcome(job, exit_info)
        rm.finish(job, lines, exit_code, error)
        return True

    def _ended_unassigned(self, job: SlurmJob) -> None:
        """A job that ended before its helper described the nodes.

        Cancelled, preempted or lost while pending: it never ran, so it is submitted again. Ran
        and ended on its own (FAILED/COMPLETED): the helper could not start on the node (no
        Python at the master's path, a broken shared fs); the allocation is assigned with the
        error, so the master's launch reports it as the trial's failure instead of retrying
        forever.
        """
        rm = self._rm
        if job.state in ("FAILED", "COMPLETED"):
            error = (
                f"Slurm job {job.job_id} ended ({job.state}) before it could start the trial:"
                f" {stderr_tail(job) or 'no output'}"
            )
            logger.error("slurm: allocation %s: %s", job.allocation_id, error)
            with rm._cond:
                failed_start(job, error)
            rm.assigned(job)
            return
        logger.warning(
            "slurm: job %s of allocation %s ended before it started (%s); resubmitting",
            job.job_id,
            job.allocation_id,
            job.state,
        )
        with rm._cond:
            job.job_id, job.submitting = None, True
        rm.submit_job(job)
