"""Launching assigned trials (the events thread's ``allocation_assigned``).

Assignments queued together (a busy master finds several at once, as slots free up) are claimed in
one lifecycle transaction: their rows read by one SELECT, their allocations marked ASSIGNED and
their launch lines logged. Then each trial's work directory, ClusterInfo and environment are
prepared outside the lifecycle lock and the resource manager launches its process. What a claim
tells the RM (slots released, an exit queued) waits for the transaction's commit; a failed batch
is claimed again one assignment at a time (:meth:`Transactions.batch`).
"""

from __future__ import annotations

import functools
import logging
import pathlib
import queue
import secrets
import socket
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import bindparam, update
from sqlalchemy.orm import Session

from determined.master._core import _launch
from determined.master._core._allocations import Allocations, AllocState
from determined.master._core._held_rows import write_at_commit
from determined.master._core._launch_rows import (
    LaunchedRun,
    LaunchRows,
    launch_rows,
    launch_rows_of,
)
from determined.master._core._port_waits import PortWaits
from determined.master._core._proxy_ports import ProxyPorts, services_of
from determined.master._core._task_logs import master_log
from determined.master._core._transactions import Transactions
from determined.master._core._work_dirs import WorkDirs
from determined.master.db import Allocation

logger = logging.getLogger("determined.master")

Assignment = tuple[Any, Any]
"""What the RM assigned: (its ``AllocationRequest``, its ``Assignment``)."""


class _Claimed(NamedTuple):
    """An assignment claimed for launch: its allocation, rows and entrypoint."""

    alloc: AllocState
    rows: LaunchRows
    assignment: Any
    argv: list[str]


class TrialLaunches:
    """Claims assigned trials' allocations and launches their processes."""

    def __init__(
        self,
        transactions: Transactions,
        allocations: Allocations,
        rm: Any,
        events: queue.Queue[Any],
        work_dirs: WorkDirs,
        cluster_id: str,
        master_url: Callable[[], str],
    ) -> None:
        self._transactions = transactions
        self._allocations = allocations
        self._rm = rm
        self._events = events
        self._work_dirs = work_dirs
        self._cluster_id = cluster_id
        self._master_url = master_url
        self.proxy_ports = ProxyPorts()
        """The ``environment.proxy_ports`` services of launched trials (``/proxy/<task>:<port>/``)."""
        self.port_waits = PortWaits(self.proxy_ports, rm, events, transactions)

    def assigned(self, assignments: Sequence[Assignment]) -> None:
        """Claim the assigned trials in one transaction, then launch each."""
        claimed: list[_Claimed] = []
        found: dict[int, LaunchRows | None] = {}

        def load(session: Session, batch: Sequence[Assignment]) -> None:
            trial_ids = [alloc.trial_id for alloc in self._allocs(batch)]
            found.update(launch_rows_of(session, trial_ids))

        self._transactions.batch(
            assignments,
            lambda session, item: self._claim(session, item, found, claimed),
            load,
        )
        for claim in claimed:
            try:
                self._launch(claim)
            except Exception:  # one launch's failure is its own: the batch's others go on
                logger.error(
                    "master: launching %s failed:\n%s",
                    claim.alloc.allocation_id,
                    traceback.format_exc(),
                )

    def _allocs(self, batch: Sequence[Assignment]) -> list[AllocState]:
        allocs = (self._allocations.get(request.allocation_id) for request, _ in batch)
        return [alloc for alloc in allocs if alloc is not None]

    def _claim(
        self,
        session: Session,
        item: Assignment,
        found: dict[int, LaunchRows | None],
        claimed: list[_Claimed],
    ) -> None:
        """Claim one assignment in the open transaction: its launch logged, or, when it cannot
        launch, its slots released (and its exit queued) once the transaction commits."""
        request, assignment = item
        aid = request.allocation_id
        effect = self._transactions.effect
        alloc = self._allocations.get(aid)
        if alloc is None or alloc.cancelled or alloc.exited:
            effect(lambda: self._rm.release(aid))
            return
        alloc.assigned = True
        trial_id = alloc.trial_id
        rows = found.pop(trial_id) if trial_id in found else launch_rows(session, trial_id)
        if rows is None:
            effect(lambda: self._rm.release(aid))
            return
        if alloc.kill_requested:
            effect(lambda: self._rm.release(aid))
            effect(lambda: self._events.put(("_exited", (aid, None, "killed before launch"))))
            return
        address = (list(assignment.container_addrs) or ["127.0.0.1"])[0]
        services = services_of(rows.exp.config, rows.run.task_id, aid, address)
        if self.port_waits.busy(session, alloc, rows.run, services, request, assignment):
            return
        try:
            argv = _launch.entrypoint_argv(rows.exp.config.get("entrypoint") or "")
        except ValueError as e:
            self._not_launched(session, rows.run, aid, e)
            return
        _log_launch(session, rows, aid, assignment, argv)
        # Its proxy ports are taken now, before the next trial of the batch looks at them.
        self.proxy_ports.register(services)
        self._transactions.undo(lambda: self.proxy_ports.unregister(aid))
        claim = _Claimed(alloc, rows, assignment, argv)
        effect(lambda: claimed.append(claim))

    def _launch(self, claim: _Claimed) -> None:
        """Prepare a claimed trial's work directory outside the lifecycle lock, then launch it."""
        from determined.master.rm import LaunchSpec

        alloc, rows, assignment, argv = claim
        aid = alloc.allocation_id
        work_dir = self._work_dirs.of(aid)
        try:
            env, hook = self._prepare(alloc, rows, assignment, work_dir)
        except Exception as e:
            with self._transactions.txn() as session:
                self._not_launched(session, rows.run, aid, e)
            return
        with self._transactions.lock:
            alloc.launched = True
            self._rm.launch(
                LaunchSpec(
                    allocation_id=aid, argv=argv, cwd=str(work_dir), env=env, startup_hook=hook
                )
            )
            if alloc.kill_requested:
                self._rm.kill(aid)

    def _not_launched(self, session: Session, run: LaunchedRun, aid: str, error: Exception) -> None:
        """A trial that could not be prepared: its log says why, and once the transaction commits
        its slots go back and its exit is handled as a failure to run."""
        message = f"failed to prepare the trial: {error}"
        master_log(session, run.task_id, message, "LOG_LEVEL_ERROR", aid)
        self._transactions.effect(lambda: self._rm.release(aid))
        self._transactions.effect(lambda: self._events.put(("_exited", (aid, None, message))))

    def _prepare(
        self, alloc: AllocState, rows: LaunchRows, assignment: Any, work_dir: pathlib.Path
    ) -> tuple[dict[str, str], str | None]:
        """The trial's work directory, environment and startup hook."""
        run, exp = rows.run, rows.exp
        latest_uuid, steps = rows.resume if rows.resume else (None, 0)
        return _launch.prepare_trial(
            work_dir=work_dir,
            info_dir=self._work_dirs.info_of(alloc.allocation_id),
            model_definition=exp.model_definition,
            master_url=self._master_url(),
            cluster_id=self._cluster_id,
            task_id=run.task_id,
            allocation_id=alloc.allocation_id,
            token=alloc.token,
            experiment_id=exp.id,
            trial_id=run.id,
            trial_seed=int(run.seed),
            hparams=run.hparams,
            config=exp.config,
            config_json=exp.config_json,
            run_id=run.run_id,
            steps_completed=steps,
            latest_checkpoint=latest_uuid,
            slot_ids=list(assignment.slot_ids),
            container_addrs=list(assignment.container_addrs),
            container_slot_counts=list(assignment.container_slot_counts),
            gpu_uuids=list(assignment.gpu_uuids),
            slot_type=self._slot_type(),
            collective_key=secrets.token_hex(16),
            user=rows.username or "determined",
            user_token=alloc.user_token,
        )

    def _slot_type(self) -> str:
        """The RM's slot type: its ``slot_type`` where it has one (the threaded RMs), else from
        ``describe()``, which sorts the RM's whole queue to count it (per launch, that grew with
        a search whose trials are all created up front)."""
        slot_type = getattr(self._rm, "slot_type", None)
        if isinstance(slot_type, str):
            return slot_type
        return str((self._rm.describe() or {}).get("slot_type", "cpu"))


_SET_ALLOCATION_STATE = (
    update(Allocation)
    .where(Allocation.allocation_id == bindparam("aid"))
    .values(state=bindparam("new_state"))
)
"""Core, built once, and the row is not loaded: the state is not a column the authentication
cache watches (see ``_deps.AuthCache``)."""


def _log_launch(
    session: Session, rows: LaunchRows, aid: str, assignment: Any, argv: list[str]
) -> None:
    """Record a trial's launch: its allocation ASSIGNED and the lines its log shows for it."""
    run, exp = rows.run, rows.exp
    # with the other claims of the batch, at the commit
    write_at_commit(session, _SET_ALLOCATION_STATE, {"aid": aid, "new_state": "ASSIGNED"})
    image = explicit_image(exp.original_config)
    if image:
        master_log(
            session,
            run.task_id,
            f"environment.image {image!r} is ignored by the local resource manager",
            "LOG_LEVEL_WARNING",
            aid,
        )
    resuming = f" resuming from checkpoint {rows.resume[0]}" if rows.resume else ""
    master_log(
        session,
        run.task_id,
        f"Trial {run.id} (run {run.run_id}) assigned slots {list(assignment.slot_ids)};"
        f" launching {argv}{resuming}",
        allocation_id=aid,
    )
    # Upstream's launcher logs this line at every start of a trial's process; tools count it.
    master_log(
        session,
        run.task_id,
        f"New trial runner in (container {aid}) on agent {socket.gethostname()}: "
        + exp.config_json,
        allocation_id=aid,
    )


@functools.lru_cache(maxsize=64)
def explicit_image(original: str) -> str | None:
    """The ``environment.image`` the user wrote (the defaults always fill one in); cached by the
    config text, which every trial of an experiment shares (parsing it was ~7% of a launch)."""
    import yaml

    try:
        raw = yaml.safe_load(original or "") or {}
    except yaml.YAMLError:
        return None
    env = raw.get("environment") if isinstance(raw, dict) else None
    image = env.get("image") if isinstance(env, dict) else None
    return str(image) if image else None
