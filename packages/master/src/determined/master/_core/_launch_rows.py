"""What a trial's launch reads from the database, in one SELECT of plain columns.

A launch needs a few columns of the trial, of its experiment and of the experiment's owner, and the
checkpoint it resumes from. Loading them as ORM instances (Run, Experiment with its config decoded,
User) was a third of a launch's work on the events thread; here they are plain rows, and the
experiment's config, the same text for every trial of a search, is decoded and encoded once per
distinct text (:func:`config_of`). The launch only reads the decoded config: it is shared between
launches and must not be changed.
"""

from __future__ import annotations

import functools
import json
from typing import Any, NamedTuple

from sqlalchemy import Text, bindparam, cast, select
from sqlalchemy.orm import Session

from determined.master.db import Checkpoint, Experiment, Run, User, latest_completed_query


class LaunchedRun(NamedTuple):
    """The trial's columns a launch reads."""

    id: int
    task_id: str
    run_id: int
    seed: int
    hparams: dict[str, Any]


class LaunchedExperiment(NamedTuple):
    """The experiment's columns a launch reads (``config`` shared: read only)."""

    id: int
    config: dict[str, Any]
    config_json: str
    """``config`` as ``json.dumps`` writes it (the environment and the runner's log line)."""
    original_config: str
    model_definition: bytes | None


class LaunchRows(NamedTuple):
    run: LaunchedRun
    exp: LaunchedExperiment
    username: str | None
    """The experiment owner's name (None: the owner is gone)."""
    resume: tuple[str, int] | None
    """The uuid and steps_completed of the checkpoint the launch resumes from, if any."""


def _latest_completed(column: Any) -> Any:
    """``column`` of the trial's latest COMPLETED checkpoint, as a scalar subquery."""
    return latest_completed_query(Run.id, column).correlate(Run).scalar_subquery()


_COLUMNS = (
    select(
        Run.id,
        Run.task_id,
        Run.run_id,
        Run.seed,
        Run.hparams,
        Run.warm_start_checkpoint_uuid,
        Experiment.id,
        cast(Experiment.config, Text),  # decoded by config_of, once per distinct text
        Experiment.original_config,
        Experiment.model_definition,
        User.username,
        _latest_completed(Checkpoint.uuid),
        _latest_completed(Checkpoint.steps_completed),
    )
    .join(Experiment, Experiment.id == Run.experiment_id)
    .outerjoin(User, User.id == Experiment.owner_id)
)
_ONE = _COLUMNS.where(Run.id == bindparam("trial_id"))
_MANY = _COLUMNS.where(Run.id.in_(bindparam("trial_ids", expanding=True)))


@functools.lru_cache(maxsize=32)
def config_of(text: str) -> tuple[dict[str, Any], str]:
    """An experiment config's stored JSON text decoded, and encoded again as ``json.dumps``
    writes it; cached by the text, which every trial of an experiment shares."""
    config = json.loads(text)
    return config, json.dumps(config)


def launch_rows(session: Session, trial_id: int) -> LaunchRows | None:
    """What a trial's launch reads (None when the trial is gone): its columns, its experiment's,
    the owner's name and the checkpoint it resumes from (its latest completed checkpoint, else its
    warm-start checkpoint at step 0)."""
    row = session.connection().execute(_ONE, {"trial_id": trial_id}).first()
    return None if row is None else _launch_rows(row)


def launch_rows_of(session: Session, trial_ids: list[int]) -> dict[int, LaunchRows]:
    """:func:`launch_rows` of several trials in one SELECT, by trial id (gone trials left out)."""
    if not trial_ids:
        return {}
    rows = session.connection().execute(_MANY, {"trial_ids": trial_ids})
    return {row[0]: _launch_rows(row) for row in rows}


def _launch_rows(row: Any) -> LaunchRows:
    (rid, task_id, run_id, seed, hparams, warm_start, exp_id, config_text, original, model_def) = (
        row[:10]
    )
    username, uuid, steps = row[10:]
    if uuid is not None:
        resume: tuple[str, int] | None = (uuid, int(steps or 0))
    elif warm_start:
        resume = (warm_start, 0)
    else:
        resume = None
    config, config_json = config_of(config_text or "{}")
    return LaunchRows(
        LaunchedRun(rid, task_id, run_id, int(seed), hparams or {}),
        LaunchedExperiment(exp_id, config, config_json, original or "", model_def),
        username,
        resume,
    )
