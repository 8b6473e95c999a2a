"""A metric request waiting for the metrics writer (``_metrics_writer``): its reports as parsed at
the API edge, or its body with the parser (:class:`Deferred`), and a helper's preparation of it
(:class:`Preparing`, ``_prepared``); which of a trial's requests a run accepts; the error a failed
store answers with.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

from determined.master._core import _metrics
from determined.master._core._metrics import MetricReport
from determined.master._core._prepared import Prepared, call
from determined.master._core._writer_helpers import HELPERS, Job
from determined.master._wire import APIError
from determined.master.db import Run

logger = logging.getLogger("determined.master")

PREPARED_MIN_REPORTS = 64
"""A deferred request of at least this many reports is prepared by a helper process when it waits
behind a transaction (smaller ones cost less to parse than to send)."""


class Deferred(NamedTuple):
    """A request's reports, parsed by the writer thread right before their transaction.

    A hundred trials streaming batches keep about a hundred requests waiting for the writer. Parsed
    on arrival, each held its reports' objects for the half second it waited, spread through
    memory: the request thread's parsing cost 1.5 times as much as when each batch's objects were
    freed at once (benchmarks/RESULTS.md). Waiting as the request's body (one ``bytes``), and
    parsed where they are stored, the objects are made, used and freed while they are in the
    CPU's caches. ``parse`` raises :class:`APIError` for a bad body: that request alone fails."""

    size: int
    """The number of reports (an estimate is fine: it sizes transactions, nothing else)."""
    parse: Callable[[], list[MetricReport]]
    prepare: Callable[[int, str], Prepared | None] | None = None
    """The request made ready to store by a helper process, ``prepare(trial_id, form)``
    (``_prepared``; it must pickle by reference: a ``functools.partial`` of a module-level
    function of a module that imports nothing heavy), or None for a shape left to ``parse``."""


class Pending:
    __slots__ = (
        "done",
        "error",
        "future",
        "loop",
        "parse",
        "prepare",
        "prepared",
        "preparing",
        "reports",
        "size",
        "trial_id",
    )

    def __init__(self, trial_id: int, reports: list[MetricReport] | Deferred) -> None:
        self.trial_id = trial_id
        self.prepare: Callable[[int, str], Prepared | None] | None = None
        if isinstance(reports, Deferred):
            self.size = max(1, reports.size)
            self.parse: Callable[[], list[MetricReport]] | None = reports.parse
            self.prepare = reports.prepare
            self.reports: list[MetricReport] = []
        else:
            self.size = len(reports)
            self.parse = None
            self.reports = reports
        self.prepared: Prepared | None = None
        """The request as a helper prepared it (then ``reports`` stays empty)."""
        self.preparing: Preparing | None = None
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.future: asyncio.Future[None] | None = None

    def ready(self) -> bool:
        """Take a helper's preparation, else parse a deferred request's reports; False (its error
        set) when they are refused."""
        preparing, self.preparing = self.preparing, None
        if preparing is not None:
            preparing.wait()  # hands this request, and the others of its job, their preparation
        if self.prepared is not None:
            return True
        return self.parsed()

    def parsed(self) -> bool:
        """Parse the reports (dropping a preparation: a trial whose requests are not all
        prepared, or a rollback's tiles, wants them parsed); False when they are refused."""
        self.prepared = None
        parse, self.parse = self.parse, None
        if parse is not None:
            try:
                self.reports = parse()
            except Exception as exc:
                self.error = exc if isinstance(exc, APIError) else internal_error(exc)
                return False
        return True

    def taken_by_helper(self) -> bool:
        """Whether a helper prepares, or prepared, this request."""
        return self.preparing is not None or self.prepared is not None

    def groups(self) -> set[str]:
        if self.prepared is not None:
            return {self.prepared.group}
        return {report.group for report in self.reports}

    def finish(self) -> None:
        if self.loop is not None and self.future is not None:
            self.loop.call_soon_threadsafe(_resolve, self.future, self.error)
        else:
            self.done.set()


class Preparing:
    """Queued requests being prepared by a helper process, as one job (``_writer_helpers``)."""

    def __init__(self, items: list[Pending]) -> None:
        self._items = items
        self._job: Job | None = None

    def submit(self, form: str) -> None:
        items = self._items
        calls = [(item.prepare, item.trial_id, form) for item in items]
        self._job = HELPERS.submit(call, calls, lambda: [None] * len(items))

    def wait(self) -> None:
        """Hand each request its preparation (None: not prepared, it is parsed instead)."""
        job, self._job = self._job, None
        if job is None:
            return
        answers = job.result()
        if len(answers) != len(self._items):  # not the answer to this job: prepare nothing
            answers = [None] * len(self._items)
        for item, prepared in zip(self._items, answers, strict=True):
            item.prepared = prepared
            item.preparing = None


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(None)


def accepted_reports(run: Run, items: list[Pending]) -> list[MetricReport]:
    """The reports of ``items`` that ``run`` accepts; a refused request gets its error."""
    accepted: list[MetricReport] = []
    for item in items:
        try:
            _metrics.check_run(run, item.reports)
        except APIError as exc:
            item.error = exc
            continue
        accepted.extend(item.reports)
    return accepted


def accepted_prepared(run: Run, items: list[Pending]) -> list[Prepared]:
    """The prepared requests of ``items`` that ``run`` accepts (``_metrics.check_run``'s rule;
    they always name their run, which must be the current one); a refused one gets its 400."""
    accepted: list[Prepared] = []
    for item in items:
        prepared = item.prepared
        assert prepared is not None
        if prepared.run_id != run.run_id:
            item.error = _metrics.wrong_run(prepared.run_id, run.run_id)
            continue
        accepted.append(prepared)
    return accepted


def internal_error(exc: BaseException) -> APIError:
    from determined.master._core._db_errors import unavailable

    outage = unavailable(exc)  # a locked/restarting database: 503, the trial retries
    if outage is not None:
        logger.warning("storing metrics failed: %s", outage.message)
        return outage
    logger.error("storing metrics failed: %s", exc, exc_info=exc)
    return APIError(500, f"storing metrics failed: {exc}")
