"""Group commit for metric reports: many requests, one transaction.

Request threads hand their reports to one writer thread and wait. The writer takes everything pending,
stores it in a single transaction (one run/experiment load and one summary update per trial), commits,
and only then wakes each request — so every report is committed before it is acknowledged, while a
hundred trials reporting at once cost one commit instead of a hundred turns at the master's lock.
A request whose reports are invalid fails alone with its own 4xx.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import threading
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from determined.master._core import _metrics
from determined.master._wire import APIError
from determined.master.db import Experiment, Run

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from determined.master._core._manager import Manager

logger = logging.getLogger("determined.master")

MAX_REPORTS_PER_COMMIT = 5000


class _Pending:
    __slots__ = ("done", "error", "future", "loop", "reports", "trial_id")

    def __init__(self, trial_id: int, reports: list[tuple[str, dict[str, Any]]]) -> None:
        self.trial_id = trial_id
        self.reports = reports
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.future: asyncio.Future[None] | None = None

    def finish(self) -> None:
        if self.loop is not None and self.future is not None:
            self.loop.call_soon_threadsafe(_resolve, self.future, self.error)
        else:
            self.done.set()


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(None)


class MetricsWriter:
    """The single writer of metric reports for one master."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager
        self._queue: collections.deque[_Pending] = collections.deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="det-metrics-writer", daemon=True)
        self._thread.start()

    def write(self, trial_id: int, reports: list[tuple[str, dict[str, Any]]]) -> None:
        """Store ``reports`` (``(group, body)`` pairs) of one trial; returns once committed."""
        item = _Pending(trial_id, reports)
        with self._wake:
            if self._closed:
                raise APIError(503, "the master is shutting down")
            self._queue.append(item)
            self._wake.notify()
        item.done.wait()
        if item.error is not None:
            raise item.error

    async def write_async(self, trial_id: int, reports: list[tuple[str, dict[str, Any]]]) -> None:
        """:meth:`write` for ``async`` routes: waits on the event loop instead of a thread."""
        item = _Pending(trial_id, reports)
        item.loop = asyncio.get_running_loop()
        item.future = item.loop.create_future()
        with self._wake:
            if self._closed:
                raise APIError(503, "the master is shutting down")
            self._queue.append(item)
            self._wake.notify()
        await item.future

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout=10)

    def _take(self) -> list[_Pending]:
        with self._wake:
            while not self._queue and not self._closed:
                self._wake.wait()
            batch: list[_Pending] = []
            count = 0
            while self._queue and (
                not batch or count + len(self._queue[0].reports) <= MAX_REPORTS_PER_COMMIT
            ):
                item = self._queue.popleft()
                batch.append(item)
                count += len(item.reports)
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return  # closed and drained
            try:
                self._commit(batch)
            except Exception:
                # Something failed for the whole transaction: store each request alone so only the
                # culprit fails.
                for item in batch:
                    if item.error is None:
                        try:
                            self._commit([item])
                        except Exception as exc:
                            item.error = exc if isinstance(exc, APIError) else _internal(exc)
            for item in batch:
                item.finish()

    def _commit(self, batch: list[_Pending]) -> None:
        manager = self._manager
        by_trial: dict[int, list[_Pending]] = collections.defaultdict(list)
        for item in batch:
            by_trial[item.trial_id].append(item)
        with manager.txn() as session:
            # Two queries for the whole batch: every run, and only the config of their experiments
            # (not the experiment rows with their model definitions).
            runs = {
                run.id: run
                for run in session.scalars(select(Run).where(Run.id.in_(list(by_trial))))
            }
            configs: dict[int, dict[str, Any]] = dict(
                session.execute(
                    select(Experiment.id, Experiment.config).where(
                        Experiment.id.in_(sorted({run.experiment_id for run in runs.values()}))
                    )
                ).all()
            )
            for trial_id, items in by_trial.items():
                run = runs.get(trial_id)
                config = configs.get(run.experiment_id) if run is not None else None
                if run is None or config is None:
                    for item in items:
                        item.error = APIError(404, f"trial {trial_id} not found")
                    continue
                self._store_trial(session, run, config, items)

    def _store_trial(
        self, session: Session, run: Run, config: dict[str, Any], items: list[_Pending]
    ) -> None:
        manager = self._manager
        parsed: list[_metrics.ParsedReport] = []
        for item in items:
            where = "metrics" if len(item.reports) == 1 else "reports[{}].metrics"
            try:
                mine = [
                    _metrics.parse(run, group, body, where.format(index))
                    for index, (group, body) in enumerate(item.reports)
                ]
            except APIError as exc:
                item.error = exc
                continue
            parsed.extend(mine)
        if not parsed:
            return
        searcher_cfg = config.get("searcher") or {}
        seen = manager.metrics_groups_seen.setdefault((run.id, run.run_id), set())
        rows = _metrics.ingest_many(
            session,
            run,
            parsed,
            searcher_cfg.get("metric"),
            bool(searcher_cfg.get("smaller_is_better", True)),
            groups_seen=seen,
        )
        groups = {report.group for report in parsed}
        manager.effect(lambda: seen.update(groups))
        if run.experiment_id in manager.continued or all(row is None for row in rows):
            return
        exp = session.get(Experiment, run.experiment_id)
        if exp is None:
            return
        for row in rows:
            if row is not None:  # a validation report, in order
                avg = row.metrics.get("avg_metrics") or {}
                manager.searcher_event(
                    session, exp, functools.partial(_validation_completed, run.request_id, avg)
                )


def _validation_completed(request_id: str, metrics: dict[str, Any], searcher: Any) -> Any:
    return searcher.validation_completed(request_id, metrics)


def _internal(exc: BaseException) -> APIError:
    logger.error("storing metrics failed: %s", exc, exc_info=exc)
    return APIError(500, f"storing metrics failed: {exc}")
