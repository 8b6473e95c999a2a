"""TensorBoards: generic tasks running ``python -m determined.tensorboard`` behind the proxy.

A launch names experiments, trials or experiment filters (upstream's ``BulkExperimentFilters``).
Each experiment contributes its ``checkpoint_storage`` and either every trial (experiments named
directly or by filter: trials that appear later show up too) or the named trials. The task gets
them as ``DET_TENSORBOARD_SPEC`` (JSON, what ``determined.tensorboard``'s ``Source.from_json``
reads); the task service gives it a port and the ``/proxy/<task_id>/`` prefix. Deleting an
experiment's TensorBoard files removes them from its storage (``_tensorboard_files``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select

from determined.master._core._task_records import parse_duration
from determined.master._core._tasks import Tasks, TaskSpec, TaskView
from determined.master._core._tensorboard_files import delete_tensorboard_files
from determined.master._wire import EXPERIMENT_STATES, APIError, get
from determined.master.db import Database, Experiment, Run, User

logger = logging.getLogger("determined.master")

KIND = "TENSORBOARD"
SPEC_ENV = "DET_TENSORBOARD_SPEC"
"""The environment variable carrying the sources of a TensorBoard task (JSON)."""
MAX_TRIALS = 100
"""Upstream's limit on the trials named in one launch."""
SYNC_INTERVAL = 2.0
"""Seconds between the task's syncs of new event files (and TensorBoard's reloads)."""
IDLE_TIMEOUT = 300.0
"""Seconds without proxied traffic before a TensorBoard stops, unless its config says
``idle_timeout`` (upstream's master default ``tensorboard_timeout``)."""

_STATE_NAMES = set(EXPERIMENT_STATES) - {"DELETED"}


@dataclasses.dataclass(frozen=True)
class TensorboardLaunch:
    """A parsed ``POST /api/v1/tensorboards``."""

    experiment_ids: tuple[int, ...] = ()
    trial_ids: tuple[int, ...] = ()
    filters: Mapping[str, Any] | None = None
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    context: bytes | None = None
    workspace_id: int = 1
    visible_workspaces: frozenset[int] | None = None
    """Workspaces whose experiments ``filters`` may match (None: all; RBAC's listing filter)."""


def tensorboard_extra(view: TaskView) -> dict[str, Any]:
    """The TensorBoard-only fields of a record: ``experimentIds``, ``trialIds``."""
    extra = dict(view.extra or {})
    return {
        "experimentIds": list(extra.get("experimentIds") or []),
        "trialIds": list(extra.get("trialIds") or []),
    }


class Tensorboards:
    """Launch, list and kill TensorBoard tasks; delete experiments' TensorBoard files."""

    def __init__(self, db: Database, tasks: Tasks, rm: Any, bind_host: str = "127.0.0.1") -> None:
        self._db = db
        self._tasks = tasks
        self._rm = rm
        self._bind_host = bind_host

    # ------------------------------------------------------------------------------- launch

    def launch(self, owner: User, launch: TensorboardLaunch) -> TaskView:
        """Start a TensorBoard over the sources ``launch`` names (400/404 naming the bad field)."""
        if not (launch.experiment_ids or launch.trial_ids or launch.filters is not None):
            raise APIError(400, "experimentIds, trialIds or filters: name what TensorBoard shows")
        if len(launch.trial_ids) > MAX_TRIALS:
            raise APIError(400, f"trialIds: at most {MAX_TRIALS} trials per TensorBoard")
        sources, experiment_ids = self._sources(launch)
        if not sources:
            raise APIError(400, "filters: no experiments match")
        config = dict(launch.config)
        extra_args = config.get("tensorboard_args") or []
        if not isinstance(extra_args, list) or not all(isinstance(a, str) for a in extra_args):
            raise APIError(400, "config.tensorboard_args: must be a list of strings")
        argv = [
            "python3",
            "-m",
            "determined.tensorboard",
            "--port",
            "{port}",
            "--path-prefix",
            "{base_path}",
            "--host",
            self._bind_host,
            "--interval",
            f"{SYNC_INTERVAL:g}",
            *extra_args,
        ]
        description = config.get("description") or _description(
            sorted(experiment_ids), sorted(launch.trial_ids)
        )
        spec = TaskSpec(
            kind=KIND,
            owner_id=owner.id,
            argv=argv,
            config=config,
            description=str(description),
            context=launch.context,
            env={SPEC_ENV: json.dumps({"sources": sources})},
            slots=self._slots(config),
            idle_timeout=parse_duration(config.get("idle_timeout"), "idle_timeout") or IDLE_TIMEOUT,
            proxied=True,
            extra={
                "experimentIds": sorted(experiment_ids),
                "trialIds": sorted(launch.trial_ids),
            },
            workspace_id=launch.workspace_id,
        )
        return self._tasks.start(spec)

    def _slots(self, config: Mapping[str, Any]) -> int | None:
        """None when the config names ``resources.slots``; else none (upstream's TensorBoards hold
        no slot), or one where the resource manager refuses 0-slot requests (Ray)."""
        resources = config.get("resources") or {}
        if not isinstance(resources, dict):
            raise APIError(400, "config.resources: must be an object")
        if resources.get("slots") is not None:
            return None
        pool = str(resources.get("resource_pool") or "default")
        return 0 if self._rm.validate(0, resource_pool=pool) is None else 1

    def _sources(self, launch: TensorboardLaunch) -> tuple[list[dict[str, Any]], set[int]]:
        """Each experiment's storage and trials (``None``: all), and the experiments named whole."""
        with self._db.read() as session:
            whole: set[int] = set(launch.experiment_ids)
            if launch.filters is not None:
                matched = _filter_experiments(session, launch.filters)
                if launch.visible_workspaces is not None:
                    from determined.master.db._visibility import experiments_visible

                    shown = experiments_visible(launch.visible_workspaces)
                    matched = list(
                        session.scalars(
                            select(Experiment.id).where(Experiment.id.in_(matched), shown)
                        )
                    )
                whole |= set(matched)
            by_experiment: dict[int, set[int] | None] = {exp_id: None for exp_id in whole}
            for trial_id in launch.trial_ids:
                run = session.get(Run, trial_id)
                if run is None:
                    raise APIError(404, f"trialIds: trial {trial_id} not found")
                chosen = by_experiment.setdefault(run.experiment_id, set())
                if chosen is not None:
                    chosen.add(trial_id)
            sources = []
            for exp_id in sorted(by_experiment):
                exp = session.get(Experiment, exp_id)
                if exp is None:
                    raise APIError(404, f"experimentIds: experiment {exp_id} not found")
                storage = dict(exp.config.get("checkpoint_storage") or {})
                if not storage:
                    raise APIError(400, f"experiment {exp_id} has no checkpoint_storage")
                source: dict[str, Any] = {"experimentId": exp_id, "checkpointStorage": storage}
                trials = by_experiment[exp_id]
                if trials is not None:
                    source["trialIds"] = sorted(trials)
                sources.append(source)
            return sources, whole

    # ------------------------------------------------------------------------- read / kill

    def get(self, tensorboard_id: str) -> TaskView:
        """The TensorBoard task, or a 404 naming it."""
        view = self._tasks.get(tensorboard_id)
        if view is None or view.kind != KIND:
            raise APIError(404, f"tensorboard {tensorboard_id} not found")
        return view

    def list(self, owner_ids: Sequence[int] | None = None) -> list[TaskView]:
        """Every TensorBoard task (of ``owner_ids`` when given), newest first."""
        return self._tasks.list(kind=KIND, owner_ids=list(owner_ids) if owner_ids else None)

    def kill(self, tensorboard_id: str, user: User) -> TaskView:
        """Stop a TensorBoard (its owner or an admin)."""
        self.get(tensorboard_id)
        return self._tasks.kill(tensorboard_id, user)

    def set_priority(self, tensorboard_id: str, priority: Any, user: User) -> TaskView:
        """Change a TensorBoard's priority (1..99; owner or admin)."""
        self.get(tensorboard_id)
        return self._tasks.set_priority(tensorboard_id, priority, user)

    # ---------------------------------------------------------------------------- files

    def delete_files(self, experiment_id: int) -> None:
        """Remove the experiment's TensorBoard files (``<cluster id>/tensorboard/experiment/<id>/``
        and the older ``tensorboard/experiment/<id>/``) from its checkpoint storage."""
        try:
            delete_tensorboard_files(self._db, experiment_id)
        except LookupError:
            raise APIError(404, f"experiment {experiment_id} not found") from None
        except ValueError as exc:
            raise APIError(400, f"experiment {experiment_id}: {exc}") from None


def _description(experiment_ids: list[int], trial_ids: list[int]) -> str:
    parts = []
    if experiment_ids and not trial_ids:
        parts.append("Experiments: " + ", ".join(str(i) for i in experiment_ids))
    if trial_ids:
        parts.append("Trials: " + ", ".join(str(i) for i in trial_ids))
    return f"TensorBoard ({'; '.join(parts)})"


def _filter_experiments(session: Any, filters: Mapping[str, Any]) -> list[int]:
    """Upstream's ``BulkExperimentFilters``: the ids of the experiments matching all given fields."""
    if not isinstance(filters, Mapping):
        raise APIError(400, "filters: must be an object")
    stmt = select(Experiment)
    user_ids = get(dict(filters), "user_ids")
    if user_ids:
        if not isinstance(user_ids, list) or not all(isinstance(u, int) for u in user_ids):
            raise APIError(400, "filters.userIds: must be a list of integers")
        stmt = stmt.where(Experiment.owner_id.in_(user_ids))
    project_id = get(dict(filters), "project_id")
    if project_id:
        if not isinstance(project_id, int):
            raise APIError(400, "filters.projectId: must be an integer")
        stmt = stmt.where(Experiment.project_id == project_id)
    archived = filters.get("archived")
    if archived is not None:
        if not isinstance(archived, bool):
            raise APIError(400, "filters.archived: must be a boolean")
        stmt = stmt.where(Experiment.archived == archived)
    states = filters.get("states")
    if states:
        if not isinstance(states, list) or not all(isinstance(s, str) for s in states):
            raise APIError(400, "filters.states: must be a list of states")
        wanted = {s.removeprefix("STATE_") for s in states}
        unknown = sorted(wanted - _STATE_NAMES)
        if unknown:
            raise APIError(400, f"filters.states: unknown states {unknown}")
        stmt = stmt.where(Experiment.state.in_(sorted(wanted)))
    excluded = get(dict(filters), "excluded_experiment_ids") or []
    if not isinstance(excluded, list) or not all(isinstance(e, int) for e in excluded):
        raise APIError(400, "filters.excludedExperimentIds: must be a list of integers")
    name = filters.get("name")
    description = filters.get("description")
    labels = filters.get("labels")
    if labels is not None and (
        not isinstance(labels, list) or not all(isinstance(x, str) for x in labels)
    ):
        raise APIError(400, "filters.labels: must be a list of strings")
    ids = []
    for exp in session.scalars(stmt.order_by(Experiment.id)):
        if exp.id in excluded:
            continue
        if name and str(name).lower() not in str(exp.config.get("name") or "").lower():
            continue
        text = str(exp.config.get("description") or "")
        if description and str(description).lower() not in text.lower():
            continue
        if labels and not set(labels) <= set(exp.labels or []):
            continue
        ids.append(exp.id)
    return ids
