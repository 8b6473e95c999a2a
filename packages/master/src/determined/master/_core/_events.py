"""Handlers of resource-manager events, run on the manager's dispatcher thread.

``assigned`` prepares the work directory, ClusterInfo and environment and launches the process;
``started`` records its pid; ``exited`` decides what comes next for the trial.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from determined.master._core import _launch
from determined.master.db import Allocation, Experiment, Run, User, utcnow

if TYPE_CHECKING:
    from determined.master._core._manager import Manager


def assigned(manager: Manager, request: Any, assignment: Any) -> None:
    aid = request.allocation_id
    with manager.lock:
        alloc = manager.allocs.get(aid)
        if alloc is None or alloc.cancelled or alloc.exited:
            manager.rm.release(aid)
            return
        alloc.assigned = True
        with manager.db.read() as session:
            run = session.get(Run, alloc.trial_id)
            exp = session.get(Experiment, alloc.experiment_id)
            user = session.get(User, exp.owner_id) if exp else None
            latest = manager.latest_checkpoint(session, run) if run else None
        if run is None or exp is None:
            manager.rm.release(aid)
            return
        if alloc.kill_requested:
            manager.rm.release(aid)
            manager.queue_event("exited", (aid, None, "killed before launch"))
            return
    work_dir = manager.data_dir / "work" / aid
    try:
        latest_uuid, steps = latest if latest else (None, 0)
        env, hook, warnings = _launch.prepare_trial(
            work_dir=work_dir,
            model_definition=exp.model_definition,
            master_url=manager.master_url,
            cluster_id=manager.cluster_id,
            task_id=run.task_id,
            allocation_id=aid,
            token=alloc.token,
            experiment_id=exp.id,
            trial_id=run.id,
            trial_seed=int(run.seed),
            hparams=run.hparams,
            config=exp.config,
            run_id=run.run_id,
            steps_completed=steps,
            latest_checkpoint=latest_uuid,
            slot_ids=list(assignment.slot_ids),
            container_addrs=list(assignment.container_addrs),
            container_slot_counts=list(assignment.container_slot_counts),
            gpu_uuids=list(assignment.gpu_uuids),
            slot_type=str((manager.rm.describe() or {}).get("slot_type", "cpu")),
            collective_key=secrets.token_hex(16),
            user=user.username if user else "determined",
            user_token=alloc.token,
        )
        image = explicit_image(exp.original_config)
        if image:
            warnings.append(f"environment.image {image!r} is ignored by the local resource manager")
        argv = _launch.entrypoint_argv(exp.config.get("entrypoint") or "")
    except Exception as e:
        with manager.db.write() as session:
            manager.master_log(
                session,
                run.task_id,
                f"failed to prepare the trial: {e}",
                "LOG_LEVEL_ERROR",
                aid,
            )
        manager.rm.release(aid)
        manager.queue_event("exited", (aid, None, f"failed to prepare the trial: {e}"))
        return
    from determined.master.rm import LaunchSpec

    with manager.db.write() as session:
        row = session.get(Allocation, aid)
        if row is not None:
            row.state = "ASSIGNED"
        for warning in warnings:
            manager.master_log(session, run.task_id, warning, "LOG_LEVEL_WARNING", aid)
        manager.master_log(
            session,
            run.task_id,
            f"Trial {run.id} (run {run.run_id}) assigned slots {list(assignment.slot_ids)};"
            f" launching {argv}"
            + (f" resuming from checkpoint {latest_uuid}" if latest_uuid else ""),
            allocation_id=aid,
        )
    with manager.lock:
        alloc.launched = True
        manager.rm.launch(
            LaunchSpec(allocation_id=aid, argv=argv, cwd=str(work_dir), env=env, startup_hook=hook)
        )
        if alloc.kill_requested:
            manager.rm.kill(aid)


def started(manager: Manager, allocation_id: str, pid: int) -> None:
    with manager.db.write() as session:
        row = session.get(Allocation, allocation_id)
        if row is not None:
            row.pid = pid
            row.state = "RUNNING"
            row.start_time = utcnow()


def exited(manager: Manager, allocation_id: str, exit_code: int | None, error: str | None) -> None:
    with manager.txn() as session:
        alloc = manager.allocs.get(allocation_id)
        if alloc is None or alloc.exited:
            manager.effect(lambda: manager.rm.release(allocation_id))
            return
        alloc.exited = True
        if alloc.timer is not None:
            alloc.timer.cancel()
        manager.effect(lambda: manager.rm.release(allocation_id))
        manager.effect(lambda: manager.wake(allocation_id))
        row = session.get(Allocation, allocation_id)
        if row is not None:
            row.state = "TERMINATED"
            row.end_time = utcnow()
            row.exit_code = exit_code
            row.exit_error = error
        run = session.get(Run, alloc.trial_id)
        exp = session.get(Experiment, alloc.experiment_id)
        if run is None or exp is None:
            return
        if error:
            message = f"Trial {run.id} (run {run.run_id}) failed to run: {error}"
        else:
            message = f"Trial {run.id} (run {run.run_id}) exited with code {exit_code}"
        failed = error is not None or exit_code != 0
        if alloc.preemption_timed_out:
            # Killed by us after ignoring the preemption signal: a preemption, not a crash.
            message += " (killed after the preemption timeout)"
            failed = False
            alloc.acked = True
        manager.master_log(
            session,
            run.task_id,
            message,
            "LOG_LEVEL_ERROR" if failed and not alloc.kill_requested else "LOG_LEVEL_INFO",
            allocation_id,
        )
        manager.allocs.pop(allocation_id, None)
        manager.trial_exited(session, exp, run, alloc, failed)


def explicit_image(original: str) -> str | None:
    """The ``environment.image`` the user wrote (the defaults always fill one in)."""
    import yaml

    try:
        raw = yaml.safe_load(original or "") or {}
    except yaml.YAMLError:
        return None
    env = raw.get("environment") if isinstance(raw, dict) else None
    image = env.get("image") if isinstance(env, dict) else None
    return str(image) if image else None
