"""``Experiment``: lifecycle actions, trials, checkpoints and waiting for the end."""

from __future__ import annotations

import base64
import enum
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

from determined.client import Client, Session
from determined.experimental._checkpoint import Checkpoint, CheckpointSortBy
from determined.experimental._project_moves import ProjectMember
from determined.experimental._trial import (
    Trial,
    TrialSortBy,
    _top,
    list_checkpoints,
)
from determined.experimental._util import OrderBy, Poller, deprecated, member, read_paginated


class ExperimentState(enum.Enum):
    """The state of an experiment."""

    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    COMPLETED = "STATE_COMPLETED"
    CANCELED = "STATE_CANCELED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    DELETING = "STATE_DELETING"
    DELETE_FAILED = "STATE_DELETE_FAILED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


TERMINAL_STATES = {
    ExperimentState.COMPLETED,
    ExperimentState.CANCELED,
    ExperimentState.DELETED,
    ExperimentState.ERROR,
}


class ExperimentSortBy(enum.Enum):
    """Fields a list of experiments can be sorted by."""

    ID = "SORT_BY_ID"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    NUM_TRIALS = "SORT_BY_NUM_TRIALS"
    PROGRESS = "SORT_BY_PROGRESS"
    USER = "SORT_BY_USER"
    NAME = "SORT_BY_NAME"
    FORKED_FROM = "SORT_BY_FORKED_FROM"
    RESOURCE_POOL = "SORT_BY_RESOURCE_POOL"
    PROJECT_ID = "SORT_BY_PROJECT_ID"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    CHECKPOINT_COUNT = "SORT_BY_CHECKPOINT_COUNT"
    SEARCHER_METRIC_VAL = "SORT_BY_SEARCHER_METRIC_VAL"


ExperimentOrderBy = OrderBy
"""Deprecated name of :class:`OrderBy`."""


class Experiment(ProjectMember):
    """An experiment: obtained from ``client.create_experiment()`` or ``client.get_experiment()``.

    Attributes (cached; :meth:`reload` refreshes them): ``config``, ``state``
    (:class:`ExperimentState`), ``labels`` (a set), ``archived``, ``name``, ``progress`` (0-1),
    ``description``, ``notes``, ``project_id``, ``workspace_id``.
    """

    def __init__(self, experiment_id: int, session: Session) -> None:
        self._id = experiment_id
        self._session = session
        self._api = Client(session)
        self.config: dict[str, Any] | None = None
        self.state: ExperimentState | None = None
        self.labels: set[str] | None = None
        self.archived: bool | None = None
        self.name: str | None = None
        self.progress: float | None = None
        self.description: str | None = None
        self.notes: str | None = None
        self.project_id: int | None = None
        self.workspace_id: int | None = None

    @property
    def id(self) -> int:
        return self._id

    def __repr__(self) -> str:
        return f"Experiment(id={self.id})"

    def _hydrate(self, data: dict[str, Any]) -> None:
        self.config = data.get("config")
        self.state = member(ExperimentState, data.get("state"))
        self.archived = data.get("archived")
        self.name = data.get("name")
        self.progress = data.get("progress")
        self.description = data.get("description")
        self.notes = data.get("notes")
        self.labels = set(data["labels"]) if data.get("labels") else None
        self.project_id = data.get("projectId")
        self.workspace_id = data.get("workspaceId")

    @classmethod
    def _from_json(cls, data: dict[str, Any], session: Session) -> Experiment:
        exp = cls(int(data["id"]), session)
        exp._hydrate(data)
        return exp

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._api.experiments.get(self._id)["experiment"])

    # ---------------------------------------------------------------------------- attributes

    def _patch(self, **fields: Any) -> dict[str, Any]:
        body = {"id": self._id, **fields}
        answer = self._api.experiments.patch(self._id, body)
        experiment: dict[str, Any] = answer["experiment"]
        return experiment

    def set_name(self, name: str) -> None:
        """Rename the experiment."""
        self.name = self._patch(name=name).get("name")

    def set_description(self, description: str) -> None:
        """Replace the experiment's description."""
        self.description = self._patch(description=description).get("description")

    def set_notes(self, notes: str) -> None:
        """Replace the experiment's notes."""
        self.notes = self._patch(notes=notes).get("notes")

    def set_labels(self, labels: set[str] | list[str]) -> None:
        """Replace the experiment's labels."""
        if isinstance(labels, str) or not all(isinstance(x, str) for x in labels):
            raise ValueError(f"labels: must be a set of strings, got {labels!r}")
        answer = self._patch(labels=sorted(set(labels)))
        self.labels = set(answer["labels"]) if answer.get("labels") else None

    def add_label(self, label: str) -> None:
        """Add one label (a no-op when present); ``labels`` becomes the master's full set."""
        answer = self._api.experiments.add_label(self._id, label)
        self.labels = set(answer.get("labels") or [])

    def remove_label(self, label: str) -> None:
        """Remove one label (a no-op when absent); ``labels`` becomes the master's full set."""
        answer = self._api.experiments.remove_label(self._id, label)
        self.labels = set(answer.get("labels") or [])

    # ----------------------------------------------------------------------------- lifecycle

    def _action(self, action: str) -> None:
        self._api.experiments.act(self._id, action)

    def activate(self) -> None:
        """Activate a paused experiment (its trials resume from their latest checkpoints)."""
        self._action("activate")

    def pause(self) -> None:
        """Pause: running trials are asked to checkpoint and stop."""
        self._action("pause")

    def cancel(self) -> None:
        """Stop gracefully: trials get the preemption signal."""
        self._action("cancel")

    def kill(self) -> None:
        """Kill every trial process now."""
        self._action("kill")

    def archive(self) -> None:
        """Archive a terminal experiment."""
        self._action("archive")
        self.archived = True

    def unarchive(self) -> None:
        """Unarchive an archived experiment."""
        self._action("unarchive")
        self.archived = False

    def delete(self) -> None:
        """Delete a terminal experiment with its checkpoints (owner or admin).

        Raises:
            APIError: the experiment is not terminal, or its checkpoints are model versions.
        """
        self._api.experiments.delete(self._id)

    def delete_tensorboard_files(self) -> None:
        """Delete this experiment's TensorBoard files (``<storage>/tensorboard/experiment/<id>/``)
        from its checkpoint storage (owner or admin); checkpoints stay."""
        self._api.experiments.delete_tensorboard_files(self._id)

    def wait(
        self, interval: float = 5.0, *, timeout: float | None = None, progress: bool = False
    ) -> ExperimentState:
        """Poll until the experiment is terminal and return its final state.

        Args:
            interval: seconds between polls.
            timeout: give up (TimeoutError) after this many seconds; None waits forever.
            progress: print each state and progress change to stderr.

        Raises:
            ValueError: the experiment is PAUSED (it would never finish by itself).
        """
        poller = Poller(interval, timeout, f"experiment {self._id} to finish")
        shown: tuple[Any, Any] | None = None
        while True:
            self.reload()
            if progress and (self.state, self.progress) != shown:
                shown = (self.state, self.progress)
                state = self.state.name if self.state else "unknown"
                done = f"{100 * self.progress:.0f}%" if self.progress is not None else "-"
                print(
                    f"experiment {self._id}: {state}, {done} after {poller.elapsed:.0f}s",
                    file=sys.stderr,
                )
            if self.state in TERMINAL_STATES:
                assert self.state is not None
                return self.state
            if self.state == ExperimentState.PAUSED:
                raise ValueError(
                    f"experiment {self._id} is paused; activate it before waiting for it"
                )
            poller.sleep()

    def download_code(self, output_dir: str | None = None) -> str:
        """Save the experiment's context directory as ``exp-<id>_model_def.tar.gz`` in
        ``output_dir`` (default: the working directory); return the file's path."""
        answer = self._api.experiments.model_def(self._id)
        directory = pathlib.Path(output_dir).expanduser() if output_dir else pathlib.Path()
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"exp-{self._id}_model_def.tar.gz"
        target.write_bytes(base64.b64decode(answer.get("b64Tgz") or ""))
        return str(target)

    def get_pachyderm_config(self) -> dict[str, Any]:
        """The ``integrations.pachyderm`` section of the config."""
        if not self.config:
            self.reload()
        try:
            return dict((self.config or {})["integrations"]["pachyderm"])
        except (KeyError, TypeError):
            raise ValueError(f"experiment {self._id}: no Pachyderm configuration") from None

    # -------------------------------------------------------------------------------- trials

    def iter_trials(
        self,
        sort_by: TrialSortBy = TrialSortBy.ID,
        order_by: OrderBy = OrderBy.ASCENDING,
        limit: int | None = None,
    ) -> Iterator[Trial]:
        """Yield the experiment's trials sorted by ``sort_by`` (``limit``: page size)."""
        if not isinstance(sort_by, TrialSortBy):
            raise ValueError(f"sort_by: must be a TrialSortBy, got {sort_by!r}")
        if not isinstance(order_by, OrderBy):
            raise ValueError(f"order_by: must be an OrderBy, got {order_by!r}")

        def fetch(offset: int) -> dict[str, Any]:
            params = {
                "offset": offset,
                "limit": limit,
                "sortBy": sort_by.value,
                "orderBy": order_by.value,
            }
            return self._api.experiments.trials(self._id, params)

        # the master sorts before it pages
        for raw in read_paginated(fetch, "trials"):
            yield Trial._from_json(raw, self._session)

    def list_trials(
        self, sort_by: TrialSortBy = TrialSortBy.ID, order_by: OrderBy = OrderBy.ASCENDING
    ) -> list[Trial]:
        """The experiment's trials, sorted."""
        return list(self.iter_trials(sort_by, order_by))

    def get_trials(
        self, sort_by: TrialSortBy = TrialSortBy.ID, order_by: OrderBy = OrderBy.ASCENDING
    ) -> list[Trial]:
        """Deprecated name of :meth:`list_trials`."""
        deprecated("Experiment.get_trials()", "Experiment.list_trials()")
        return self.list_trials(sort_by, order_by)

    def await_first_trial(self, interval: float = 0.1) -> Trial:
        """Wait until the experiment has a trial and return the first one.

        Raises:
            RuntimeError: the experiment ended before it created a trial.
        """
        poller = Poller(interval, None, f"the first trial of experiment {self._id}")
        while True:
            self.reload()
            trials = self.list_trials(TrialSortBy.START_TIME, OrderBy.ASC)
            if trials:
                return trials[0]
            if self.state in TERMINAL_STATES:
                raise RuntimeError(
                    f"experiment {self._id} ended ({self.state}) before a trial started"
                )
            poller.sleep()

    # --------------------------------------------------------------------------- checkpoints

    def list_checkpoints(
        self,
        sort_by: str | CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[Checkpoint]:
        """The experiment's COMPLETED checkpoints, sorted.

        Args:
            sort_by: a :class:`CheckpointSortBy` or a validation metric name; with neither
                ``sort_by`` nor ``order_by``, best searcher metric first.
            order_by: an :class:`OrderBy` (set both or neither).
            max_results: at most this many.
        """
        return list_checkpoints(
            self._session,
            lambda params: self._api.experiments.checkpoints(self._id, params),
            sort_by,
            order_by,
            max_results,
        )

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> Checkpoint:
        """The best checkpoint by ``sort_by`` (default: the searcher metric and its order)."""
        deprecated("Experiment.top_checkpoint()", "Experiment.list_checkpoints(max_results=1)")
        return _top(self.list_checkpoints, sort_by, smaller_is_better, self._config)

    def _config(self) -> dict[str, Any]:
        if self.config is None:
            self.reload()
        return self.config or {}

    def top_n_checkpoints(
        self, limit: int, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> list[Checkpoint]:
        """The best checkpoint of each of the ``limit`` best trials."""
        deprecated("Experiment.top_n_checkpoints()", "Experiment.list_checkpoints()")
        order = None
        if sort_by:
            if smaller_is_better is None:
                searcher = self._config().get("searcher") or {}
                smaller_is_better = bool(searcher.get("smaller_is_better", True))
            order = OrderBy.ASC if smaller_is_better else OrderBy.DESC
        best: list[Checkpoint] = []
        seen: set[int] = set()
        for ckpt in self.list_checkpoints(sort_by=sort_by or None, order_by=order):
            trial_id = ckpt.training.trial_id if ckpt.training else -1
            if trial_id not in seen:
                seen.add(trial_id)
                best.append(ckpt)
        return best[:limit]
