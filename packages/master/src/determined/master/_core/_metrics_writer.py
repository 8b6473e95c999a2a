"""Group commit for metric reports: many requests, one transaction.

Request threads hand their reports to one writer thread and wait. The writer takes everything pending,
stores it in a single transaction (one run/experiment load and one summary update per trial), commits,
and only then wakes each request — so every report is committed before it is acknowledged, while a
hundred trials reporting at once cost one commit instead of a hundred turns at the master's lock.
A request whose reports are invalid fails alone with its own 4xx. On PostgreSQL several such writers
(lanes, each serving a share of the trials) overlap their transactions; see :class:`MetricsWriter`.

The writer knows nothing of the master around it: it gets reports parsed at the API edge, or the
API edge's parser of a request's body (:class:`Deferred`, run by the writer thread just before the
transaction), a callable that opens the lifecycle transaction, and a callback that hears each trial's
stored validation reports (the experiments service feeds them to the searcher in the same
transaction).

Large requests waiting behind the transaction in progress are prepared by a helper process
meanwhile (``Deferred.prepare``, ``_prepared``): decoded, checked, their rows in the database's
insert form and their summaries' and tiles' columns as arrays, so that the writer's thread, which
shares the master's interpreter lock with the HTTP thread, only folds and inserts them. A trial's
requests in one transaction are all prepared or all parsed (the order of its rows and summaries
is the order of its requests either way); anything a helper does not take is parsed as before.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from collections.abc import Callable

from sqlalchemy import bindparam, literal_column, select
from sqlalchemy.orm import Session

from determined.master._core import _metric_horizon, _metric_tiles, _metrics
from determined.master._core._lane_gate import Gate
from determined.master._core._metric_requests import (
    PREPARED_MIN_REPORTS,
    Deferred,
    Pending,
    Preparing,
    accepted_prepared,
    accepted_reports,
    internal_error,
)
from determined.master._core._metrics import MetricReport
from determined.master._core._prepared import Prepared
from determined.master._wire import APIError
from determined.master.db import Experiment, Metric, Run
from determined.master.db._metric_inserts import MetricRow, insert_metric_rows

Transaction = Callable[[], contextlib.AbstractContextManager[Session]]
"""Opens the lifecycle transaction the writer stores a batch in."""
ValidationCallback = Callable[[Session, Run, list[Metric]], None]
"""Hears, inside the transaction, a trial's validation rows stored by one batch, in order."""

logger = logging.getLogger("determined.master")

MAX_REPORTS_PER_COMMIT = 2000
"""Reports stored by one lane's transaction at most (requests beyond wait for the next one): the
bound on how long a request that just arrived waits for the commit in progress. On PostgreSQL each
of the lanes takes as many (until the lanes committed in id order, they shared 2,000: larger
transactions made the express lane's single reports wait for a home lane's insert, against the
100 ms target; benchmarks/RESULTS.md, "Lanes that commit in any order")."""
POSTGRES_WRITER_LANES = 2
"""Metric writer lanes on PostgreSQL (SQLite has one writer: its file lock admits no other). Two
measured 1.3 times the rows per second of one on 2 cores (benchmarks/RESULTS.md); three, in an early
trial, no more than two."""
SMALL_REQUEST = 16
"""A request of at most this many reports joins the next transaction whatever its size: a trial
reporting now and then is acknowledged within about one commit even while a hundred trials
stream batches of hundreds. On PostgreSQL it may take the express lane (:class:`MetricsWriter`)."""


class _Lane:
    """One writer thread and the requests waiting for it (those of the trials routed to it)."""

    def __init__(
        self,
        store: Callable[[list[Pending]], None],
        name: str,
        max_reports: int,
        on_done: Callable[[Pending], None],
        form: str | None = None,
    ) -> None:
        self._store = store
        self._max_reports = max_reports
        self._form = form
        """The insert form a helper prepares large requests in (None: the writer parses all)."""
        self._on_done = on_done
        self.load = 0
        """Reports queued or in the transaction in progress (read without the lock: a hint)."""
        self.queue: collections.deque[Pending] = collections.deque()
        self._wake = threading.Condition()
        self._closed = False
        self._small_round = False
        """Whether the last transaction took only small requests (the next one takes all kinds)."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, item: Pending) -> None:
        with self._wake:
            if self._closed:
                raise APIError(503, "the master is shutting down")
            self.queue.append(item)
            self.load += item.size
            self._wake.notify()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout=timeout)

    def _take(self) -> list[Pending]:
        """The requests of the next transaction.

        Everything pending when it fits in :data:`MAX_REPORTS_PER_COMMIT`. Otherwise, when small
        requests (:data:`SMALL_REQUEST`) wait among large ones, a transaction of only the small ones
        first (then one of all kinds, so large ones never starve): a trial reporting now and then
        is acknowledged within about one commit while a hundred trials stream batches. Then large
        ones in arrival order while they fit. A trial's requests are never reordered: once one of
        its requests waits, its later ones wait too.
        """
        with self._wake:
            while not self.queue and not self._closed:
                self._wake.wait()
            queue = self.queue
            if len(queue) <= 1 or sum(item.size for item in queue) <= self._max_reports:
                batch = list(queue)
                queue.clear()
                self._small_round = False
                return batch
            small_only = not self._small_round and _small_ahead(queue)
            batch = []
            count = 0
            waiting: collections.deque[Pending] = collections.deque()
            held: set[int] = set()
            for item in queue:
                size = item.size
                if item.trial_id not in held and (
                    size <= SMALL_REQUEST
                    if small_only
                    else (not batch or count + size <= self._max_reports)
                ):
                    batch.append(item)
                    count += size
                else:
                    waiting.append(item)
                    held.add(item.trial_id)
            self.queue = waiting
            self._small_round = small_only
            return batch

    def _prepare_ahead(self) -> None:
        """Have a helper prepare the large requests queued for the next transaction while this
        one is stored."""
        if self._form is None:
            return
        items: list[Pending] = []
        with self._wake:
            # at most a transaction's worth ahead: more would only keep more helpers busy
            count = sum(item.size for item in self.queue if item.taken_by_helper())
            for item in self.queue:
                if count >= self._max_reports:
                    break
                if item.prepare is None or item.parse is None or item.taken_by_helper():
                    continue
                if item.size < PREPARED_MIN_REPORTS:
                    continue
                items.append(item)
                count += item.size
            if not items:
                return
            preparing = Preparing(items)
            for item in items:
                item.preparing = preparing
        preparing.submit(self._form)  # outside the lock: requests keep arriving meanwhile

    def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return  # closed and drained
            ready = [item for item in batch if item.ready()]
            self._prepare_ahead()
            try:
                if ready:
                    self._store(ready)
            except Exception:
                # Something failed for the whole transaction: store each request alone so only the
                # culprit fails.
                for item in ready:
                    if item.error is None:
                        try:
                            self._store([item])
                        except Exception as exc:
                            item.error = exc if isinstance(exc, APIError) else internal_error(exc)
            with self._wake:
                self.load -= sum(item.size for item in batch)
            for item in batch:
                self._on_done(item)
                item.finish()


class MetricsWriter:
    """The writer of metric reports for one master: one lane, or several on PostgreSQL.

    With ``lanes > 1`` (and ``concurrent``, a transaction that takes no process-wide lock), each
    trial's requests go to one lane (by trial id, so a trial's reports keep their order), and the
    lanes' transactions of training-type reports overlap: one lane's statements run while another
    waits on the database server (a single writer left the server idle half the time). A
    transaction that stores validation reports (the searcher hears them), archives a rolled-back
    run's reports or finds a run locked by another transaction runs exclusively in ``transaction``,
    as with one lane. The lanes insert and commit independently, so a row committed late can hold
    an id below rows already visible: a reader following an experiment's reports by id
    (``_metric_series``) reads only up to the horizon (``_metric_horizon``) that every lane's
    transaction marks while it inserts, and never skips a row.

    With several lanes there is also an express lane, for small requests (:data:`SMALL_REQUEST`):
    while a hundred trials stream batches, a trial reporting now and then would otherwise wait for
    its home lane's transaction of a thousand reports to finish before its own begins. A request
    goes to the lane that holds its trial's requests still queued or in progress (so a trial's
    reports keep their order: one lane is first in, first out); when the trial has none, a small
    request goes to the least loaded lane (the express one while the home lanes stream batches;
    spread over all lanes when every trial reports one at a time), a large one to its home lane.
    """

    def __init__(
        self,
        transaction: Transaction,
        on_validation: ValidationCallback,
        *,
        concurrent: Transaction | None = None,
        lanes: int = 1,
        form: str | None = None,
    ) -> None:
        """``form``: the insert form of the database (``db._metric_inserts.prepared_form``) in
        which helper processes prepare large requests; None: the writer's thread parses them."""
        self._transaction = transaction
        self._on_validation = on_validation
        self._concurrent = concurrent if lanes > 1 else None
        self._groups_seen: dict[tuple[int, int], set[str]] = {}
        """Per (trial id, run id), the metric groups whose rollback check already ran."""
        self._gate = Gate()
        self._horizon: _metric_horizon.Horizon | None = None
        """Where followers of the reports by id stop while lanes' transactions are in flight:
        made before any lane starts, so that no follower reads without it."""
        if self._concurrent is not None:
            with self._concurrent() as session:  # no statement: only its engine
                self._horizon = _metric_horizon.track(_metric_horizon.engine_of(session))
        count = max(1, lanes) if self._concurrent is not None else 1
        self._routing = threading.Lock()
        self._outstanding: dict[int, tuple[_Lane, int]] = {}
        """Per trial with requests queued or in a transaction: their lane and how many."""
        names = ["det-metrics-writer" + (f"-{i}" if i else "") for i in range(count)]
        if count > 1:
            names.append("det-metrics-writer-express")
        made = [
            _Lane(self._store, name, MAX_REPORTS_PER_COMMIT, self._done, form) for name in names
        ]
        self._lanes = made[:count]
        self._express = made[count] if count > 1 else None

    def pending(self) -> int:
        """Requests waiting for a transaction (not those of the transactions in progress)."""
        return sum(len(lane.queue) for lane in self._all_lanes())

    def write(self, trial_id: int, reports: list[MetricReport] | Deferred) -> None:
        """Store ``reports`` of one trial; returns once committed."""
        item = Pending(trial_id, reports)
        self._put(item)
        item.done.wait()
        if item.error is not None:
            raise item.error

    async def write_async(self, trial_id: int, reports: list[MetricReport] | Deferred) -> None:
        """:meth:`write` for ``async`` routes: waits on the event loop instead of a thread."""
        item = Pending(trial_id, reports)
        item.loop = asyncio.get_running_loop()
        item.future = item.loop.create_future()
        self._put(item)
        await item.future

    def close(self) -> None:
        lanes = self._all_lanes()
        for lane in lanes:
            lane.close()
        for lane in lanes:
            lane.join(timeout=10)

    def _all_lanes(self) -> list[_Lane]:
        return self._lanes if self._express is None else [*self._lanes, self._express]

    def _put(self, item: Pending) -> None:
        """Queue ``item`` on its trial's lane (see the class docstring for which one)."""
        if self._express is None:
            self._lanes[0].put(item)
            return
        with self._routing:
            lane, count = self._outstanding.get(item.trial_id, (None, 0))
            if lane is None:
                if item.size > SMALL_REQUEST:
                    lane = self._lanes[item.trial_id % len(self._lanes)]
                else:
                    lane = min(self._all_lanes(), key=_load)
            lane.put(item)  # under the routing lock: the trial's next request queues after it
            self._outstanding[item.trial_id] = (lane, count + 1)

    def _done(self, item: Pending) -> None:
        """A lane finished ``item``: its trial's next request may take another lane."""
        if self._express is None:
            return
        with self._routing:
            lane, count = self._outstanding[item.trial_id]
            if count > 1:
                self._outstanding[item.trial_id] = (lane, count - 1)
            else:
                del self._outstanding[item.trial_id]

    def _store(self, batch: list[Pending]) -> None:
        """One lane's batch: concurrently when it can be, the rest (or all) exclusively."""
        if self._concurrent is None:
            self._commit(batch)
            return
        # A trial with validation reports is stored exclusively: the searcher hears them.
        validating = {i.trial_id for i in batch if any(r.group == _VALIDATION for r in i.reports)}
        rest = [item for item in batch if item.trial_id in validating]
        others = [item for item in batch if item.trial_id not in validating]
        if others:
            with self._gate.shared():
                rest.extend(self._commit_concurrently(others))
        if rest:
            with self._gate.exclusive():
                self._commit(rest)

    def _commit(self, batch: list[Pending]) -> None:
        by_trial = _by_trial(batch)
        with self._transaction() as session:
            runs, _ = _runs_and_searchers(session, by_trial)
            seen_updates, _ = self._store_runs(session, by_trial, runs)
        _mark_seen(seen_updates)

    def _commit_concurrently(self, batch: list[Pending]) -> list[Pending]:
        """Store in a concurrent transaction the trials that need nothing exclusive; returns the
        requests of the others (in order) for an exclusive transaction after this one.

        The runs are locked first, all in one statement that skips a run another transaction
        holds (then that trial waits for the exclusive one): this transaction never waits on a
        row lock while holding one, so it cannot deadlock with the lifecycle's transactions."""
        assert self._concurrent is not None
        by_trial = _by_trial(batch)
        rows: list[MetricRow | Prepared] = []
        with self._concurrent() as session:
            locked, floor = _runs_and_searchers(session, by_trial, locked=True)
            seen_updates, rest = self._store_runs(session, by_trial, locked, rows)
            if floor is not None:  # else no run was locked: nothing to insert
                assert self._horizon is not None
                with self._horizon.inserting(floor):
                    session.flush()
                    insert_metric_rows(session.connection(), rows)
                    session.commit()
        _mark_seen(seen_updates)
        return rest

    def _store_runs(
        self,
        session: Session,
        by_trial: dict[int, list[Pending]],
        runs: dict[int, tuple[Run, _Searcher]],
        rows_out: list[MetricRow | Prepared] | None = None,
    ) -> tuple[list[tuple[set[str], set[str]]], list[Pending]]:
        """Store each trial's requests in ``session`` (metric rows, summaries, chart tiles).

        ``rows_out`` is None in an exclusive transaction: rows are inserted as they come, and a
        trial whose run is missing fails its requests with a 404. In a concurrent one it collects
        the rows to insert in id order, and a trial that needs the exclusive path (run missing or
        locked, or a rollback to archive) is left out and its requests returned. Returns the
        rollback-check groups to mark seen once committed, and those requests.

        ``runs``: each found trial's run and its experiment's searcher metric
        (:func:`_runs_and_searchers`)."""
        seen_updates: list[tuple[set[str], set[str]]] = []
        rest: list[Pending] = []
        accepted: list[tuple[Run, _Searcher, list[MetricReport]]] = []
        prepared: list[tuple[Run, list[Prepared]]] = []
        for trial_id, items in by_trial.items():
            run, searcher = runs.get(trial_id, _MISSING)
            if rows_out is not None and (run is None or self._needs_rollback_check(run, items)):
                rest.extend(items)
                continue
            if run is None:
                for item in items:
                    item.error = APIError(404, f"trial {trial_id} not found")
                continue
            if all(item.prepared is not None for item in items):
                prepared.append((run, accepted_prepared(run, items)))
                continue
            for item in items:  # a trial's requests go one way: all prepared, or all parsed
                if item.prepared is not None:
                    item.parsed()
            accepted.append((run, searcher, accepted_reports(run, items)))

        def reports_of(trial_id: int) -> list[MetricReport]:
            """A prepared trial's accepted reports parsed, for tiles merged in place (rare). Its
            bodies were plain, with the run's id: they parse, and need no ``check_run``."""
            return [
                report
                for item in by_trial[trial_id]
                if item.error is None and item.parse is not None
                for report in item.parse()
            ]

        # chart tiles (P2): a large batch's are built by a helper while its rows are stored
        tiles = _metric_tiles.start_tiles(
            session,
            [(run, reports) for run, _, reports in accepted],
            prepared,
            reports_of,
        )
        try:
            for run, searcher, reports in accepted:
                seen_updates.extend(self._store_trial(session, run, searcher, reports, rows_out))
            for run, parts in prepared:
                seen_updates.extend(self._store_prepared(session, run, parts, rows_out))
        except BaseException:
            tiles.abandon()
            raise
        tiles.finish()
        return seen_updates, rest

    def _needs_rollback_check(self, run: Run, items: list[Pending]) -> bool:
        """Whether a restarted run reports a group whose rollback check has not run yet."""
        if run.run_id <= 1:
            return False
        seen = self._groups_seen.get((run.id, run.run_id))
        return seen is None or not set().union(*(item.groups() for item in items)) <= seen

    def _store_prepared(
        self,
        session: Session,
        run: Run,
        parts: list[Prepared],
        rows_out: list[MetricRow | Prepared] | None,
    ) -> list[tuple[set[str], set[str]]]:
        if not parts:
            return []
        seen = self._groups_seen.setdefault((run.id, run.run_id), set())
        _metrics.ingest_prepared(session, run, parts, groups_seen=seen, rows_out=rows_out)
        return [(seen, {part.group for part in parts})]

    def _store_trial(
        self,
        session: Session,
        run: Run,
        searcher: _Searcher,
        accepted: list[MetricReport],
        rows_out: list[MetricRow | Prepared] | None = None,
    ) -> list[tuple[set[str], set[str]]]:
        if not accepted:
            return []
        metric, smaller_is_better = searcher
        seen = self._groups_seen.setdefault((run.id, run.run_id), set())
        rows = _metrics.ingest_many(
            session,
            run,
            accepted,
            metric,
            True if smaller_is_better is None else smaller_is_better,
            groups_seen=seen,
            rows_out=rows_out,
        )
        validations = [row for row in rows if row is not None]
        if validations:
            self._on_validation(session, run, validations)
        return [(seen, {report.group for report in accepted})]


_VALIDATION = "validation"
_Searcher = tuple[str | None, bool | None]
"""An experiment's ``searcher.metric`` and ``searcher.smaller_is_better`` (None: not set)."""


def _by_trial(batch: list[Pending]) -> dict[int, list[Pending]]:
    by_trial: dict[int, list[Pending]] = collections.defaultdict(list)
    for item in batch:
        by_trial[item.trial_id].append(item)
    return by_trial


def _runs_and_searchers(
    session: Session, by_trial: dict[int, list[Pending]], *, locked: bool = False
) -> tuple[dict[int, tuple[Run, _Searcher]], int | None]:
    """The trials' runs with their experiments' ``searcher.metric`` and
    ``searcher.smaller_is_better``, in one statement: a round trip fewer than two, which a
    one-report transaction notices (its own statements are most of its time on PostgreSQL). The
    two values are read from the config in SQL: decoding every trial's copy of the whole config
    cost a transaction of 100 trials about 40 % more (benchmarks/RESULTS.md).

    ``locked`` (a concurrent transaction, :data:`_RUNS_LOCKED`): the runs locked, and the floor
    of the transaction's inserts (``_metric_horizon``) read with them; None when no run was locked
    (and always without ``locked``)."""
    found: dict[int, tuple[Run, _Searcher]] = {}
    floor = None
    statement = _RUNS_LOCKED if locked else _RUNS
    for run, metric, smaller, *taken in session.execute(statement, {"ids": list(by_trial)}):
        found[run.id] = (run, (metric, smaller))
        if taken:
            floor = int(taken[0])
    return found, floor


# Built once: a statement built per commit cost more than running it (its cache key, coercions).
_RUNS = (
    select(
        Run,
        Experiment.config["searcher"]["metric"].as_string(),
        Experiment.config["searcher"]["smaller_is_better"].as_boolean(),
    )
    .join(Experiment, Experiment.id == Run.experiment_id)
    .where(Run.id.in_(bindparam("ids", expanding=True)))
)
_RUNS_LOCKED = (
    _RUNS.add_columns(literal_column(f"({_metric_horizon.LAST_ID_SQL})"))
    .order_by(Run.id)
    .with_for_update(of=Run, skip_locked=True)
)
_MISSING: tuple[None, _Searcher] = (None, (None, None))


def _load(lane: _Lane) -> int:
    return lane.load


def _small_ahead(queue: collections.deque[Pending]) -> bool:
    """Whether a small request waits that no large request of its trial precedes."""
    large: set[int] = set()
    for item in queue:
        if item.size > SMALL_REQUEST:
            large.add(item.trial_id)
        elif item.trial_id not in large:
            return True
    return False


def _mark_seen(updates: list[tuple[set[str], set[str]]]) -> None:
    """After a commit: the rollback check of these groups need not run again for these runs."""
    for seen, groups in updates:
        seen.update(groups)
