"""What comes after a trial's allocation ended (upstream's ``handleAllocationExit``).

A trial that was stopping reaches its terminal state; a crash is retried up to ``max_restarts``
(unless the experiment's ``log_policies`` say otherwise: no retry, or not on that node); a
trial that acknowledged a preemption pauses or runs again; one that simply finished completes. The
searcher hears every terminal exit (an early exit first, as upstream reports it).
"""

from __future__ import annotations

import signal

from sqlalchemy.orm import Session

from determined.master import _wire
from determined.master._core._allocations import AllocState
from determined.master._core._experiments import get_trial
from determined.master._core._lifecycle import Lifecycle, exited_reason
from determined.master._core._log_policies import failure_verdict, node_of_pool
from determined.master._core._searcher_state import SearcherStates
from determined.master._core._task_logs import master_log
from determined.master._wire import STOP_TO_TERMINAL, APIError
from determined.master.db import Experiment, Run


class TrialExits:
    """Decides a trial's next state when one of its allocations exits."""

    def __init__(self, lifecycle: Lifecycle, searchers: SearcherStates) -> None:
        self._lifecycle = lifecycle
        self._searchers = searchers

    def allocation_exited(
        self, session: Session, alloc: AllocState, exit_code: int | None, error: str | None
    ) -> None:
        """Log how an allocation of a trial ended (already recorded by ``mark_exited``) and move
        the trial on."""
        allocation_id = alloc.allocation_id
        try:
            run, exp = get_trial(session, alloc.trial_id)
        except APIError:
            return  # deleted with its experiment meanwhile
        if error:
            message = f"Trial {run.id} (run {run.run_id}) failed to run: {error}"
        else:
            message = _exit_message(run, exit_code)
            if exit_code == -signal.SIGKILL and not (
                alloc.kill_requested or alloc.preemption_timed_out
            ):
                message += f"; {UNSENT_SIGKILL}"
        failed = error is not None or exit_code != 0
        note = alloc.preempted_by_kill(failed)
        if note is not None:  # killed by us: a preemption, not a crash
            message += f" ({note})"
            failed = False
            alloc.acked = True
        master_log(
            session,
            run.task_id,
            message,
            "LOG_LEVEL_ERROR" if failed and not alloc.kill_requested else "LOG_LEVEL_INFO",
            allocation_id,
        )
        self.trial_exited(session, exp, run, alloc, failed)

    def trial_exited(
        self, session: Session, exp: Experiment, run: Run, alloc: AllocState | None, failed: bool
    ) -> None:
        """Move ``run`` on after an allocation of it ended (``alloc`` None: after a restart)."""
        lifecycle = self._lifecycle
        acked = alloc.acked if alloc else False
        if run.state in STOP_TO_TERMINAL:
            terminal = STOP_TO_TERMINAL[run.state]
            if failed and run.state == "STOPPING_COMPLETED" and not acked:
                terminal = "ERROR"
            lifecycle.set_trial_state(session, run, terminal)
            self._notify_exit(session, exp, run, terminal)
        elif failed:
            max_restarts = int(exp.config.get("max_restarts", 5))
            verdict = failure_verdict(
                session, run, self._node_of_pool, alloc.allocation_id if alloc else None
            )
            # ``restarts`` counts the restarts made, as upstream (2 after 3 failed runs with max 2)
            if not verdict.retry:
                self._fail(session, exp, run)
            elif run.restarts + 1 > max_restarts:
                master_log(
                    session,
                    run.task_id,
                    f"Trial {run.id} exceeded max restarts ({max_restarts})",
                    "LOG_LEVEL_ERROR",
                )
                lifecycle.set_trial_state(session, run, "ERROR")
                self._notify_exit(session, exp, run, "ERROR")
            elif exp.state == "ACTIVE" and run.state == "ACTIVE":
                run.restarts += 1
                pool = (exp.config.get("resources") or {}).get("resource_pool") or "default"
                if self._node_of_pool(pool) in verdict.excluded_nodes:
                    # upstream's launch_error: true (det's only behaviour): no node left, no wait
                    master_log(
                        session,
                        run.task_id,
                        f"task ID {run.task_id} slots requested exceeds {pool} resource pool"
                        " capacity: every node of it is excluded by a log policy",
                        "LOG_LEVEL_ERROR",
                    )
                    self._fail(session, exp, run)
                    lifecycle.maybe_finish(session, exp)
                    return
                master_log(
                    session,
                    run.task_id,
                    f"Restarting trial {run.id} ({run.restarts}/{max_restarts} restarts)",
                )
                lifecycle.restart_trial(session, exp, run)
            else:
                lifecycle.set_trial_state(session, run, "PAUSED")
        elif not acked:
            lifecycle.set_trial_state(session, run, "COMPLETED")
            self._notify_exit(session, exp, run, "COMPLETED")
        elif exp.state == "ACTIVE" and run.state == "ACTIVE":
            lifecycle.restart_trial(session, exp, run)
        else:
            lifecycle.set_trial_state(session, run, "PAUSED")
        lifecycle.maybe_finish(session, exp)

    def _fail(self, session: Session, exp: Experiment, run: Run) -> None:
        self._lifecycle.set_trial_state(session, run, "ERROR")
        self._notify_exit(session, exp, run, "ERROR")

    def _node_of_pool(self, pool: str) -> str:
        return node_of_pool(self._lifecycle.rm, pool)

    def _notify_exit(self, session: Session, exp: Experiment, run: Run, terminal: str) -> None:
        if exp.state in _wire.TERMINAL_STATES:
            return
        if self._searchers.is_continued(exp.id):
            runs = self._lifecycle.runs(session, exp.id)
            if exp.state == "ACTIVE" and all(r.state in _wire.TERMINAL_STATES for r in runs):
                failed = any(r.state == "ERROR" for r in runs)
                exp.state = "STOPPING_ERROR" if failed else "STOPPING_COMPLETED"
                self._searchers.set_continued(exp.id, False)
            return
        rid = run.request_id
        reason = None
        if run.early_exit_reason:
            reason = exited_reason(run.early_exit_reason)
        elif terminal == "ERROR":
            reason = exited_reason("ERRORED")
        elif terminal == "CANCELED" and not exp.state.startswith("STOPPING"):
            reason = exited_reason("USER_CANCELED")
        if reason is not None:
            # Upstream reports the early exit first, then closes the trial.
            self._lifecycle.searcher_event(
                session, exp, lambda s: s.trial_exited_early(rid, reason)
            )
        self._lifecycle.searcher_event(session, exp, lambda s: s.trial_exited(rid))


UNSENT_SIGKILL = (
    "det did not send this SIGKILL: it came from outside, most often from the kernel's"
    " out-of-memory killer (the node's `dmesg` names the process it killed)"
)
"""Added to the exit of a process killed by a SIGKILL the master never sent: upstream shows only
the exit code, and users are left to guess."""


def _exit_message(run: Run, exit_code: int | None) -> str:
    """How a trial's process ended; a non-zero exit also in upstream's words, which its tools and
    tests look for."""
    message = f"Trial {run.id} (run {run.run_id}) exited with code {exit_code}"
    if exit_code:
        message += (
            "; resources failed with non-zero exit code: container failed with"
            f" non-zero exit code: {exit_code} (exit code {exit_code})"
        )
    return message
