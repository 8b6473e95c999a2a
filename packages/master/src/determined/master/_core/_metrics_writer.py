"""Group commit for metric reports: many requests, one transaction.

Request threads hand their reports to one writer thread and wait. The writer takes everything pending,
stores it in a single transaction (one run/experiment load and one summary update per trial), commits,
and only then wakes each request — so every report is committed before it is acknowledged, while a
hundred trials reporting at once cost one commit instead of a hundred turns at the master's lock.
A request whose reports are invalid fails alone with its own 4xx.

The writer knows nothing of the master around it: it gets reports already parsed at the API edge,
a callable that opens the lifecycle transaction, and a callback that hears each trial's stored
validation reports (the experiments service feeds them to the searcher in the same transaction).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._core import _metric_tiles, _metrics
from determined.master._core._metrics import MetricReport
from determined.master._wire import APIError
from determined.master.db import Experiment, Metric, Run

Transaction = Callable[[], contextlib.AbstractContextManager[Session]]
"""Opens the lifecycle transaction the writer stores a batch in."""
ValidationCallback = Callable[[Session, Run, list[Metric]], None]
"""Hears, inside the transaction, a trial's validation rows stored by one batch, in order."""

logger = logging.getLogger("determined.master")

MAX_REPORTS_PER_COMMIT = 2000
"""Reports stored by one transaction at most (requests beyond wait for the next one): the bound on
how long a request that just arrived waits for the commit in progress."""
SMALL_REQUEST = 16
"""A request of at most this many reports joins the next transaction whatever its size: a trial
reporting now and then is acknowledged within about one commit even while a hundred trials
stream batches of hundreds."""


class _Pending:
    __slots__ = ("done", "error", "future", "loop", "reports", "trial_id")

    def __init__(self, trial_id: int, reports: list[MetricReport]) -> None:
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

    def __init__(self, transaction: Transaction, on_validation: ValidationCallback) -> None:
        self._transaction = transaction
        self._on_validation = on_validation
        self._groups_seen: dict[tuple[int, int], set[str]] = {}
        """Per (trial id, run id), the metric groups whose rollback check already ran."""
        self._queue: collections.deque[_Pending] = collections.deque()
        self._wake = threading.Condition()
        self._closed = False
        self._small_round = False
        """Whether the last transaction took only small requests (the next one takes all kinds)."""
        self._thread = threading.Thread(target=self._run, name="det-metrics-writer", daemon=True)
        self._thread.start()

    def write(self, trial_id: int, reports: list[MetricReport]) -> None:
        """Store ``reports`` of one trial; returns once committed."""
        item = _Pending(trial_id, reports)
        with self._wake:
            if self._closed:
                raise APIError(503, "the master is shutting down")
            self._queue.append(item)
            self._wake.notify()
        item.done.wait()
        if item.error is not None:
            raise item.error

    async def write_async(self, trial_id: int, reports: list[MetricReport]) -> None:
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
        """The requests of the next transaction.

        Everything pending when it fits in :data:`MAX_REPORTS_PER_COMMIT`. Otherwise, when small
        requests (:data:`SMALL_REQUEST`) wait among large ones, a transaction of only the small ones
        first (then one of all kinds, so large ones never starve): a trial reporting now and then
        is acknowledged within about one commit while a hundred trials stream batches. Then large
        ones in arrival order while they fit. A trial's requests are never reordered: once one of
        its requests waits, its later ones wait too.
        """
        with self._wake:
            while not self._queue and not self._closed:
                self._wake.wait()
            queue = self._queue
            if len(queue) <= 1 or sum(len(item.reports) for item in queue) <= (
                MAX_REPORTS_PER_COMMIT
            ):
                batch = list(queue)
                queue.clear()
                self._small_round = False
                return batch
            small_only = not self._small_round and _small_ahead(queue)
            batch = []
            count = 0
            waiting: collections.deque[_Pending] = collections.deque()
            held: set[int] = set()
            for item in queue:
                size = len(item.reports)
                if item.trial_id not in held and (
                    size <= SMALL_REQUEST
                    if small_only
                    else (not batch or count + size <= MAX_REPORTS_PER_COMMIT)
                ):
                    batch.append(item)
                    count += size
                else:
                    waiting.append(item)
                    held.add(item.trial_id)
            self._queue = waiting
            self._small_round = small_only
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
        by_trial: dict[int, list[_Pending]] = collections.defaultdict(list)
        for item in batch:
            by_trial[item.trial_id].append(item)
        seen_updates: list[tuple[set[str], set[str]]] = []
        with self._transaction() as session:
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
                seen_updates.extend(self._store_trial(session, run, config, items))
            _metric_tiles.update_tiles(session, _stored(runs, by_trial))  # chart tiles (P2)
        # Committed: the rollback check of these groups need not run again for these runs.
        for seen, groups in seen_updates:
            seen.update(groups)

    def _store_trial(
        self, session: Session, run: Run, config: dict[str, Any], items: list[_Pending]
    ) -> list[tuple[set[str], set[str]]]:
        accepted: list[MetricReport] = []
        for item in items:
            try:
                _metrics.check_run(run, item.reports)
            except APIError as exc:
                item.error = exc
                continue
            accepted.extend(item.reports)
        if not accepted:
            return []
        searcher_cfg = config.get("searcher") or {}
        seen = self._groups_seen.setdefault((run.id, run.run_id), set())
        rows = _metrics.ingest_many(
            session,
            run,
            accepted,
            searcher_cfg.get("metric"),
            bool(searcher_cfg.get("smaller_is_better", True)),
            groups_seen=seen,
        )
        validations = [row for row in rows if row is not None]
        if validations:
            self._on_validation(session, run, validations)
        return [(seen, {report.group for report in accepted})]


def _small_ahead(queue: collections.deque[_Pending]) -> bool:
    """Whether a small request waits that no large request of its trial precedes."""
    large: set[int] = set()
    for item in queue:
        if len(item.reports) > SMALL_REQUEST:
            large.add(item.trial_id)
        elif item.trial_id not in large:
            return True
    return False


def _stored(
    runs: dict[int, Run], by_trial: dict[int, list[_Pending]]
) -> list[tuple[Run, list[MetricReport]]]:
    """Each trial's run and the reports of the batch stored for it (requests without an error)."""
    return [
        (runs[t], [r for item in items if item.error is None for r in item.reports])
        for t, items in by_trial.items()
        if t in runs
    ]


def _internal(exc: BaseException) -> APIError:
    from determined.master._core._db_errors import unavailable

    outage = unavailable(exc)  # a locked/restarting database: 503, the trial retries
    if outage is not None:
        logger.warning("storing metrics failed: %s", outage.message)
        return outage
    logger.error("storing metrics failed: %s", exc, exc_info=exc)
    return APIError(500, f"storing metrics failed: {exc}")
