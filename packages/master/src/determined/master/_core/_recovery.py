"""Start-up recovery: resume every experiment a previous master left unfinished."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import delete, select

from determined.master import _wire
from determined.master._core._lifecycle import Lifecycle
from determined.master._core._owner_sessions import revoke_earlier_owner_sessions
from determined.master._core._searcher_state import SearcherStates
from determined.master._core._task_logs import master_log
from determined.master._core._transactions import Transactions
from determined.master._core._trial_exits import TrialExits
from determined.master.db import Allocation, Experiment, ExperimentSnapshot, utcnow

logger = logging.getLogger("determined.master")


def recover(
    transactions: Transactions,
    rm: Any,
    searchers: SearcherStates,
    lifecycle: Lifecycle,
    trial_exits: TrialExits,
) -> None:
    """Resume every non-terminal experiment after a (re)start of the master.

    Allocations a previous master left open are closed (their orphaned process groups reaped);
    each unfinished experiment gets its searcher back and its live trials scheduled again.
    """
    with transactions.txn() as session:
        terminal_ids = select(Experiment.id).where(Experiment.state.in_(_wire.TERMINAL_STATES))
        session.execute(
            delete(ExperimentSnapshot).where(ExperimentSnapshot.experiment_id.in_(terminal_ids))
        )
        open_allocs = list(session.scalars(select(Allocation).where(Allocation.end_time.is_(None))))
        for row in open_allocs:
            if row.pid:
                pid = row.pid
                try:
                    try:
                        rm.reap_orphan(pid, allocation_id=row.allocation_id)
                    except TypeError:
                        rm.reap_orphan(pid)
                except Exception:
                    logger.exception("master: reaping process group %s failed", pid)
            row.state = "TERMINATED"
            row.end_time = utcnow()
            row.exit_error = "the master restarted"
        revoke_earlier_owner_sessions(session)
        exps = list(
            session.scalars(
                select(Experiment).where(
                    Experiment.state.not_in(_wire.TERMINAL_STATES),
                    Experiment.unmanaged.is_(False),  # never scheduled: nothing to resume
                )
            )
        )
        for exp in exps:
            try:
                searchers.of(exp)
            except Exception as e:
                logger.exception("master: restoring experiment %s failed", exp.id)
                exp.state = "ERROR"
                exp.error = f"could not restore the searcher: {e}"
                exp.end_time = utcnow()
                continue
            for run in lifecycle.runs(session, exp.id):
                if run.state in _wire.TERMINAL_STATES:
                    continue
                master_log(session, run.task_id, "the master restarted; resuming trial")
                if run.state in _wire.STOP_TO_TERMINAL:
                    trial_exits.trial_exited(session, exp, run, None, False)
                elif run.state == "ACTIVE" and exp.state == "ACTIVE":
                    lifecycle.restart_trial(session, exp, run)
                elif run.state == "ACTIVE":
                    lifecycle.set_trial_state(session, run, "PAUSED")
            lifecycle.maybe_finish(session, exp)
