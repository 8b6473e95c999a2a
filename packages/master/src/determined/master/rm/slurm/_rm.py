"""The Slurm resource manager: det's queue decides, Slurm's jobs run the allocations.

Partitions are resource pools (``default`` is ``default_compute_resource_pool``, else Slurm's
default partition). One :class:`PriorityScheduler` per partition, sized from ``sinfo`` (usable
nodes only, re-read every ``capacity_interval``), decides which request may start, so priorities,
``max_slots`` and gang allocation work as under the other resource managers and det never floods
slurmctld with jobs that cannot run. A request it starts is submitted at once with ``sbatch``
(``_script``); if other users hold the partition, Slurm queues the job — det shows the request as
starting until Slurm runs it. The allocation is *assigned* once the job runs and its batch helper
has described the nodes it got; ``launch`` stages the trial's files into the job's directory on
the shared filesystem and the job starts the ranks with ``srun``.

A single monitor thread (``_monitor``) follows every job: one ``squeue`` per ``poll_interval``
for all of them, the job directories' files (assignment, output, exit) in between.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import signal
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from determined.master.rm._scheduler import PriorityScheduler, Start
from determined.master.rm._threaded import ThreadedResourceManager, _pool_state
from determined.master.rm._types import AllocationRequest, LaunchSpec
from determined.master.rm.slurm import _script
from determined.master.rm.slurm._commands import (
    FINAL_STATES,
    Background,
    SlurmError,
    is_transient,
    parse_sbatch,
    parse_sinfo,
    run_command,
    sinfo_argv,
)
from determined.master.rm.slurm._config import SlurmConfig
from determined.master.rm.slurm._jobs import SlurmJob, failed_start, reap_job, remove_directory
from determined.master.rm.slurm._monitor import Monitor
from determined.master.rm.slurm._pools import Pools

logger = logging.getLogger("determined.master.rm")

SUBMIT_RETRY_S = 10.0
"""How long after a failed ``sbatch`` it is tried again."""
REFUSAL_REFRESH_S = 5.0
"""``validate`` re-reads ``sinfo`` when its last view is older than this."""


class SlurmResourceManager(ThreadedResourceManager):
    """Runs allocations as Slurm batch jobs (see the module docstring).

    Args:
        config: the parsed ``resource_manager`` section.
    """

    waits_for_capacity = True  # drained nodes come back

    def __init__(self, config: SlurmConfig) -> None:
        super().__init__("slurm")
        self.config = config
        self._env = config.command_env()
        self.pools = Pools(config)
        self._capacity_at = 0.0
        self._jobs: dict[str, SlurmJob] = {}
        self._background = Background(self._env)
        self._monitor = Monitor(self)

    def run(self, *argv: str) -> str:
        """Run one Slurm command with the configured environment; its stdout."""
        return run_command(list(argv), self._env)

    # -------------------------------------------------------------------------------------------
    # start-up and capacity

    def _connect(self) -> None:
        """Read the partitions (an unreachable slurmctld fails the master's start-up)."""
        try:
            self.refresh_capacity()
        except SlurmError as exc:
            raise RuntimeError(f"resource_manager: cannot reach Slurm: {exc}") from exc
        wanted = self.config.default_compute_resource_pool
        if wanted and wanted not in self.pools.partitions:
            raise RuntimeError(
                f"resource_manager.default_compute_resource_pool: no partition {wanted!r}"
                f" (partitions: {', '.join(sorted(self.pools.partitions))})"
            )
        pathlib.Path(self.config.job_storage_root).mkdir(parents=True, exist_ok=True)
        self._background.start()
        self._monitor.start()

    def refresh_capacity(self) -> None:
        """One ``sinfo``: resize every partition's scheduler to its usable slots."""
        partitions = parse_sinfo(self.run(*sinfo_argv()))
        with self._cond:
            pools = self.pools
            pools.update(partitions)
            self._capacity_at = time.monotonic()
            for name, partition in partitions.items():
                total = pools.slots(partition)
                scheduler = self._schedulers.get(name)
                if scheduler is None:
                    self._schedulers[name] = PriorityScheduler(
                        total, max_bypass=self.config.max_bypass
                    )
                elif scheduler.total_slots != total:
                    logger.info("slurm: partition %r now has %d slots", name, total)
                    scheduler.total_slots = total
                    self._wake()
            if pools.default in partitions:
                self._slot_type = pools.slot_type(partitions[pools.default])

    # -------------------------------------------------------------------------------------------
    # pools and requests

    def submit(self, request: AllocationRequest) -> None:
        """Queue ``request`` in its partition (``default`` means the default partition)."""
        pool = self.pools.name(request.resource_pool)
        if pool != request.resource_pool:
            request = dataclasses.replace(request, resource_pool=pool)
        super().submit(request)

    def _check_request(self, request: AllocationRequest) -> None:
        if request.resource_pool not in self._schedulers:
            raise ValueError(self.pools.unknown(request.resource_pool))

    def _refusal(self, slots: int, resource_pool: str) -> str | None:
        """Reads ``sinfo`` afresh when the last view is old, so the numbers are current."""
        if time.monotonic() - self._capacity_at > REFUSAL_REFRESH_S:
            try:
                self.refresh_capacity()
            except SlurmError as exc:
                logger.warning("slurm: %s", exc)
        with self._cond:
            return self.pools.refusal(slots, resource_pool)

    def slot_count(self) -> int:
        """Slots of the default partition (as last seen)."""
        with self._cond:
            scheduler = self._schedulers.get(self.pools.default)
            return scheduler.total_slots if scheduler is not None else 0

    # -------------------------------------------------------------------------------------------
    # jobs

    def _on_start_locked(self, pool: str, start: Start) -> Callable[[], None]:
        """Submit the started request as a batch job (outside the lock)."""
        partition = self.pools.partitions[pool]
        job = SlurmJob(
            request=start.request,
            partition=pool,
            slot_type=self.pools.slot_type(partition),
            cpus_per_slot=self.pools.cpus_per_slot(partition),
            directory=pathlib.Path(self.config.job_storage_root) / start.request.allocation_id,
            submitting=True,
        )
        self._jobs[job.allocation_id] = job
        return partial(self.submit_job, job)

    def submit_job(self, job: SlurmJob) -> None:
        """``sbatch`` the job (its directory made afresh); a failure is retried later."""
        try:
            with self._cond:
                partition = self.pools.partitions[job.partition]
            script = _script.prepare_job_dir(job.directory, cuda=job.cuda)
            options = _script.sbatch_options(
                allocation_id=job.allocation_id,
                slots=job.request.slots,
                partition=partition,
                slot_type=job.slot_type,
                cpus_per_slot=job.cpus_per_slot,
                gres_supported=self.config.gres_supported,
                job_dir=job.directory,
                extra=self.config.sbatch_args,
                experiment=job.request.options.get("slurm"),
            )
            job_id = parse_sbatch(self.run("sbatch", *options, str(script)))
        except (SlurmError, OSError, ValueError, KeyError) as exc:
            logger.error("slurm: submitting allocation %s failed: %s", job.allocation_id, exc)
            with self._cond:
                job.submitting = False
                job.submit_error = str(exc)
                job.retry_at = time.monotonic() + SUBMIT_RETRY_S
                if not is_transient(exc):  # the launch reports it: the trial fails, no retry loop
                    failed_start(job, f"sbatch refused the job: {exc}")
            if job.assignment is not None:
                self.assigned(job)
            return
        logger.info("slurm: allocation %s is job %s", job.allocation_id, job_id)
        with self._cond:
            job.submitting = False
            job.submit_error = None
            job.job_id = job_id
            job.submitted_at = time.monotonic()
            job.state, job.seen, job.ended_at = "PENDING", False, None
            if job.released:
                self._background.command("scancel", job_id)
        self._monitor.poke()

    def _is_launched_locked(self, allocation_id: str) -> bool:
        job = self._jobs.get(allocation_id)
        return job is not None and job.launched

    def _launch_locked(self, spec: LaunchSpec, assignment: Any) -> threading.Event:
        """Stage the trial's files for the running job (on a thread: copying takes time)."""
        job = self._jobs[spec.allocation_id]
        job.launched = True
        threading.Thread(
            target=self._stage,
            args=(job, spec),
            name=f"det-rm-slurm-stage-{job.job_id}",
            daemon=True,
        ).start()
        return job.done

    def _stage(self, job: SlurmJob, spec: LaunchSpec) -> None:
        error = job.lost
        if error is None:
            try:
                _script.stage_launch(job.directory, spec, cuda=job.cuda, slots=job.request.slots)
            except (OSError, ValueError) as exc:
                error = f"staging the trial into {job.directory} failed: {exc}"
        if error is not None:
            with self._cond:
                if job.job_id:
                    self._background.command("scancel", job.job_id)
            self.finish(job, [], None, error)
            return
        assert job.job_id is not None
        self._notify("allocation_started", job.allocation_id, int(job.job_id))
        with self._cond:
            job.running = True
            job.look_at, job.look_delay = 0.0, 0.0
            pending = job.pending_signal
            if pending is not None and not job.kill_requested:
                self._signal_locked(job.allocation_id, pending)
        self._monitor.poke()

    def finish(
        self, job: SlurmJob, lines: list[Any], exit_code: int | None, error: str | None
    ) -> None:
        """Deliver the last lines and the exit of a launched job (exactly once)."""
        with self._cond:
            if job.exited:
                return
            job.exited = True
        if lines:
            self._notify("allocation_log", job.allocation_id, lines)
        self._notify("allocation_exited", job.allocation_id, exit_code, error)
        job.done.set()
        with self._cond:
            if job.released and self._jobs.get(job.allocation_id) is job:
                del self._jobs[job.allocation_id]  # released while it ran: nobody releases again
                self._background.call(partial(remove_directory, job.directory))

    def _signal_locked(self, allocation_id: str, signum: int) -> None:
        """SIGKILL: cancel the job; another signal: to every step of the running job."""
        job = self._jobs.get(allocation_id)
        if job is None or job.exited:
            return
        if signum == signal.SIGKILL:
            job.kill_requested = True
            job.look_at = 0.0
            if job.job_id:
                self._background.command("scancel", "--signal=KILL", "--full", job.job_id)
                self._background.command("scancel", job.job_id)
            self._monitor.poke()
        elif not job.running or job.job_id is None:
            job.pending_signal = signum
        else:
            self._background.command(
                "scancel", f"--signal={signal.Signals(signum).name[3:]}", job.job_id
            )

    def _free_locked(self, allocation_id: str) -> None:
        job = self._jobs.get(allocation_id)
        if job is None:
            return
        job.released = True
        if job.launched and not job.exited:
            self._signal_locked(allocation_id, signal.SIGKILL)
            return
        del self._jobs[allocation_id]
        if job.job_id and not job.exited and job.state not in FINAL_STATES:
            self._background.command("scancel", job.job_id)  # an exited job ends by itself
        self._background.call(partial(remove_directory, job.directory))

    def jobs_snapshot(self) -> list[SlurmJob]:
        """The jobs being followed (for the monitor)."""
        with self._cond:
            return list(self._jobs.values())

    def assigned(self, job: SlurmJob) -> None:
        """The job runs and described its nodes: report the allocation assigned."""
        with self._cond:
            if job.released or job.assignment is None:
                return
            self._assigned_locked(job.assignment)
        self._notify("allocation_assigned", job.request, job.assignment)

    # -------------------------------------------------------------------------------------------
    # recovery, description, shutdown

    def reap_orphan(self, pid: int, *, allocation_id: str | None = None) -> bool:
        """Cancel Slurm job ``pid`` (the id ``allocation_started`` reported) if it is a det job
        (of ``allocation_id``) that still runs; True when it was cancelled."""
        return reap_job(self.run, pid, allocation_id)

    def queue_state(self) -> dict[str, dict[str, Any]]:
        """Each partition's slots and queue, with the partition's own slot type."""
        with self._cond:
            return {
                name: _pool_state(scheduler, self.pools.slot_type(self.pools.partitions[name]))
                for name, scheduler in sorted(self._schedulers.items())
                if name in self.pools.partitions
            }

    def describe(self) -> dict[str, Any]:
        """``{"type": "slurm", "slots", "slot_type", "used", "queued", "running",
        "default_pool", "pools", "jobs"}`` from the last ``sinfo``/``squeue`` (no Slurm call)."""
        with self._cond:
            pools = self.pools.describe(self._schedulers)
            default = pools.get(self.pools.default, {"slots": 0, "used": 0})
            return {
                "type": "slurm",
                "slots": default["slots"],
                "slot_type": self._slot_type,
                "used": default["used"],
                "queued": sum(p["queued"] for p in pools.values()),
                "running": sum(1 for j in self._jobs.values() if j.running and not j.exited),
                "default_pool": self.pools.default,
                "pools": pools,
                "jobs": [j.summary() for j in self._jobs.values()],
            }

    def close(self, timeout: float = 10.0) -> None:
        """Cancel the jobs not launched, kill the launched ones (waiting for their exits), then
        stop the monitor and the command thread."""
        with self._cond:
            waiting = [j for j in self._jobs.values() if not j.launched]
            for job in waiting:
                job.released = True
                if job.job_id and job.state not in FINAL_STATES:
                    self._background.command("scancel", job.job_id)
        super().close(timeout)
        self._monitor.stop()
        self._background.stop(timeout)
