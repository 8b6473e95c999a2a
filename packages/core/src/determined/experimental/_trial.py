"""``Trial``: one trial of an experiment, its logs, metrics and checkpoints."""

from __future__ import annotations

import datetime
import enum
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from determined.client import Client, Session
from determined.experimental import _metrics
from determined.experimental._checkpoint import Checkpoint, CheckpointSortBy
from determined.experimental._util import OrderBy, deprecated, member, read_paginated

if TYPE_CHECKING:
    from determined.experimental._experiment import Experiment


class TrialState(enum.Enum):
    """The state of a trial (QUEUED/PULLING/STARTING/RUNNING detail an ACTIVE one)."""

    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    CANCELED = "STATE_CANCELED"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


class LogLevel(enum.Enum):
    """Log levels, lowest first (``min_level`` keeps this level and those above it)."""

    TRACE = "LOG_LEVEL_TRACE"
    DEBUG = "LOG_LEVEL_DEBUG"
    INFO = "LOG_LEVEL_INFO"
    WARNING = "LOG_LEVEL_WARNING"
    ERROR = "LOG_LEVEL_ERROR"
    CRITICAL = "LOG_LEVEL_CRITICAL"


class TrialSortBy(enum.Enum):
    """Fields a list of trials can be sorted by."""

    ID = "SORT_BY_ID"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    BEST_VALIDATION_METRIC = "SORT_BY_BEST_VALIDATION_METRIC"
    LATEST_VALIDATION_METRIC = "SORT_BY_LATEST_VALIDATION_METRIC"
    BATCHES_PROCESSED = "SORT_BY_BATCHES_PROCESSED"
    DURATION = "SORT_BY_DURATION"
    RESTARTS = "SORT_BY_RESTARTS"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    LOG_RETENTION_DAYS = "SORT_BY_LOG_RETENTION_DAYS"


TrialOrderBy = OrderBy
"""Deprecated name of :class:`OrderBy`."""

TERMINAL = {TrialState.COMPLETED, TrialState.CANCELED, TrialState.ERROR}


class Trial:
    """A trial: obtained from ``client.get_trial(id)`` or ``Experiment.list_trials()``.

    Attributes:
        id: the trial id.
        experiment_id: its experiment.
        hparams: the hyperparameter values it runs with.
        summary_metrics: per group and metric name, ``{min, max, last, count, mean, type}``.
        state: a :class:`TrialState`.
    """

    def __init__(self, trial_id: int, session: Session) -> None:
        self.id = trial_id
        self._session = session
        self._api = Client(session)
        self.experiment_id: int | None = None
        self.hparams: dict[str, Any] | None = None
        self.summary_metrics: dict[str, Any] | None = None
        self.state: TrialState | None = None
        self._raw: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Trial(id={self.id})"

    def _hydrate(self, data: dict[str, Any]) -> None:
        self._raw = data
        self.experiment_id = data.get("experimentId")
        self.hparams = data.get("hparams")
        self.state = member(TrialState, data.get("state"))
        self.summary_metrics = data.get("summaryMetrics")

    @classmethod
    def _from_json(cls, data: dict[str, Any], session: Session) -> Trial:
        trial = cls(int(data["id"]), session)
        trial._hydrate(data)
        return trial

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._api.trials.get(self.id)["trial"])

    def get_experiment(self) -> Experiment:
        """The experiment this trial belongs to."""
        from determined.experimental._experiment import Experiment

        if not self.experiment_id:
            self.reload()
        assert self.experiment_id is not None
        data = self._api.experiments.get(self.experiment_id)
        return Experiment._from_json(data["experiment"], self._session)

    def kill(self) -> None:
        """Kill the trial."""
        self._api.trials.kill(self.id)

    # ---------------------------------------------------------------------------------- logs

    def iter_logs(
        self,
        follow: bool = False,
        *,
        head: int | None = None,
        tail: int | None = None,
        container_ids: list[str] | None = None,
        rank_ids: list[int] | None = None,
        stdtypes: list[str] | None = None,
        min_level: LogLevel | None = None,
        timestamp_before: str | int | None = None,
        timestamp_after: str | int | None = None,
        sources: list[str] | None = None,
        search_text: str | None = None,
    ) -> Iterable[str]:
        """Yield the trial's log lines.

        Args:
            follow: keep waiting for new lines until the trial ends (``Ctrl-C`` stops it).
            head, tail: only the first / last N lines (exclusive with each other and ``follow``).
            container_ids, rank_ids, stdtypes, sources: keep only lines from these.
            min_level: keep lines at this :class:`LogLevel` or above.
            timestamp_before, timestamp_after: RFC 3339 strings or epoch seconds.
            search_text: keep lines containing this text.
        """
        if head is not None and head < 0:
            raise ValueError(f"head: must be non-negative, got {head}")
        if tail is not None and tail < 0:
            raise ValueError(f"tail: must be non-negative, got {tail}")
        if sum((head is not None, tail is not None, bool(follow))) > 1:
            raise ValueError("follow, head and tail: at most one of them may be set")
        params: dict[str, Any] = {
            "follow": "true" if follow else None,
            "limit": head if head is not None else tail,
            "orderBy": "ORDER_BY_DESC" if tail is not None else None,
            "containerIds": container_ids,
            "rankIds": rank_ids,
            "stdtypes": stdtypes,
            "sources": sources,
            "searchText": search_text,
            "timestampBefore": _timestamp(timestamp_before, "timestamp_before"),
            "timestampAfter": _timestamp(timestamp_after, "timestamp_after"),
        }
        if min_level is not None:
            levels = list(LogLevel)
            params["levels"] = [lv.value for lv in levels[levels.index(LogLevel(min_level)) :]]
        if head == 0 or tail == 0:
            return iter(())
        return self._log_lines(params, reverse=tail is not None)

    def _log_lines(self, params: dict[str, Any], reverse: bool) -> Iterator[str]:
        entries: Iterable[dict[str, Any]] = self._api.trials.logs(self.id, params)
        if reverse:
            entries = reversed(list(entries))
        for entry in entries:
            yield str(entry.get("message", entry.get("log", "")))

    def logs(self, *args: Any, **kwargs: Any) -> Iterable[str]:
        """Deprecated name of :meth:`iter_logs` (same arguments)."""
        deprecated("Trial.logs()", "Trial.iter_logs()")
        return self.iter_logs(*args, **kwargs)

    logs.__signature__ = inspect.signature(iter_logs)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------------------- metrics

    def iter_metrics(self, group: str) -> Iterable[_metrics.TrialMetrics]:
        """Yield the trial's metric reports of ``group`` ("training", "validation", ...)."""
        return _metrics.iter_trials_metrics(self._session, [self.id], group)

    def stream_metrics(self, group: str) -> Iterable[_metrics.TrialMetrics]:
        """Deprecated name of :meth:`iter_metrics`."""
        deprecated("Trial.stream_metrics()", "Trial.iter_metrics()")
        return self.iter_metrics(group)

    def stream_training_metrics(self) -> Iterable[_metrics.TrainingMetrics]:
        """Deprecated: ``iter_metrics("training")``."""
        deprecated("Trial.stream_training_metrics()", 'Trial.iter_metrics("training")')
        return _metrics.iter_trials_metrics(  # type: ignore[return-value]
            self._session, [self.id], _metrics.TRAINING, _metrics.TrainingMetrics
        )

    def stream_validation_metrics(self) -> Iterable[_metrics.ValidationMetrics]:
        """Deprecated: ``iter_metrics("validation")``."""
        deprecated("Trial.stream_validation_metrics()", 'Trial.iter_metrics("validation")')
        return _metrics.iter_trials_metrics(  # type: ignore[return-value]
            self._session, [self.id], _metrics.VALIDATION, _metrics.ValidationMetrics
        )

    # --------------------------------------------------------------------------- checkpoints

    def list_checkpoints(
        self,
        sort_by: str | CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[Checkpoint]:
        """The trial's checkpoints, sorted.

        Args:
            sort_by: a :class:`CheckpointSortBy` or a validation metric name; with neither
                ``sort_by`` nor ``order_by``, best searcher metric first.
            order_by: an :class:`OrderBy` (set both or neither).
            max_results: at most this many.
        """
        return list_checkpoints(
            self._session,
            lambda params: self._api.trials.checkpoints(self.id, params),
            sort_by,
            order_by,
            max_results,
        )

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> Checkpoint:
        """The best checkpoint by ``sort_by`` (default: the searcher metric)."""
        deprecated("Trial.top_checkpoint()", "Trial.list_checkpoints(..., max_results=1)")
        return _top(
            self.list_checkpoints,
            sort_by,
            smaller_is_better,
            lambda: self.get_experiment().config or {},
        )

    def select_checkpoint(
        self,
        latest: bool = False,
        best: bool = False,
        uuid: str | None = None,
        sort_by: str | None = None,
        smaller_is_better: bool | None = None,
    ) -> Checkpoint:
        """The latest, the best, or the named checkpoint of this trial (exactly one of
        ``latest``, ``best``, ``uuid``)."""
        deprecated("Trial.select_checkpoint()", "Trial.list_checkpoints()")
        if sum((bool(latest), bool(best), uuid is not None)) != 1:
            raise ValueError("latest, best, uuid: exactly one of them must be set")
        if (sort_by is None) != (smaller_is_better is None):
            raise ValueError("sort_by and smaller_is_better: set both or neither")
        if sort_by is not None and not best:
            raise ValueError("sort_by and smaller_is_better: only valid with best=True")
        if uuid is not None:
            data = self._api.checkpoints.get(uuid)["checkpoint"]
            return Checkpoint._from_json(data, self._session)
        if latest:
            found = self.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.DESC, 1)
        else:
            order = (
                None if sort_by is None else (OrderBy.ASC if smaller_is_better else OrderBy.DESC)
            )
            found = self.list_checkpoints(sort_by, order, 1)
        if not found:
            raise ValueError(f"trial {self.id} has no checkpoint matching the criteria")
        return found[0]

    def get_checkpoints(
        self,
        sort_by: str | CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
    ) -> list[Checkpoint]:
        """Deprecated form of :meth:`list_checkpoints`."""
        deprecated("Trial.get_checkpoints()", "Trial.list_checkpoints()")
        return self.list_checkpoints(sort_by, order_by)


def _timestamp(value: str | int | None, argument: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{argument}: must be an RFC 3339 string or epoch seconds")
    if isinstance(value, int):
        moment = datetime.datetime.fromtimestamp(value, datetime.timezone.utc)
        return moment.isoformat().replace("+00:00", "Z")
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{argument}: {value!r} is not an RFC 3339 timestamp") from None
    return value


def list_checkpoints(
    session: Session,
    fetch_page: Callable[[dict[str, Any]], dict[str, Any]],
    sort_by: str | CheckpointSortBy | None,
    order_by: OrderBy | None,
    max_results: int | None,
) -> list[Checkpoint]:
    """The COMPLETED checkpoints ``fetch_page`` lists (an experiment's or a trial's, one page per
    call with the query ``params``), sorted by the master."""
    if (sort_by is None) != (order_by is None):
        raise ValueError("sort_by and order_by: set both or neither")
    if sort_by is not None and not isinstance(sort_by, (CheckpointSortBy, str)):
        raise ValueError("sort_by: must be a CheckpointSortBy or a metric name")
    if order_by is not None and not isinstance(order_by, OrderBy):
        raise ValueError(f"order_by: must be an OrderBy, got {order_by!r}")
    if max_results is not None and max_results < 1:
        raise ValueError(f"max_results: must be >= 1, got {max_results}")
    if sort_by is None:
        sort_by = CheckpointSortBy.SEARCHER_METRIC

    def fetch(offset: int) -> dict[str, Any]:
        params = {
            "offset": offset,
            "limit": max_results,
            "orderBy": order_by.value if order_by is not None else None,
            "sortByAttr": sort_by.value if isinstance(sort_by, CheckpointSortBy) else None,
            "sortByMetric": sort_by if isinstance(sort_by, str) else None,
            "states": ["STATE_COMPLETED"],
        }
        return fetch_page(params)

    items = read_paginated(fetch, "checkpoints", single=max_results is not None)
    return [Checkpoint._from_json(c, session) for c in items]


def _top(
    lister: Any,
    sort_by: str | None,
    smaller_is_better: bool | None,
    config: Callable[[], dict[str, Any]],
) -> Checkpoint:
    """The first of ``lister``'s checkpoints; with a ``sort_by`` metric and no
    ``smaller_is_better``, the experiment config's ``searcher.smaller_is_better`` orders them
    (upstream took a missing value as "larger is better")."""
    order = None
    if sort_by:
        if smaller_is_better is None:
            searcher = config().get("searcher") or {}
            smaller_is_better = bool(searcher.get("smaller_is_better", True))
        order = OrderBy.ASC if smaller_is_better else OrderBy.DESC
    found: list[Checkpoint] = lister(sort_by=sort_by or None, order_by=order, max_results=1)
    if not found:
        raise ValueError("no checkpoints found for the criteria")
    return found[0]
