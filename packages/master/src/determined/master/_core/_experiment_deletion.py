"""Deleting a finished experiment: its checkpoints and TensorBoard files (from storage too), then
every row it owns.

Refused while the experiment runs, for anyone but its owner or an admin, and while one of its
checkpoints is a model version (deleting the experiment would delete the version's files).
"""

from __future__ import annotations

import logging

from sqlalchemy import delete, select

from determined.master._core._experiments import get_experiment
from determined.master._core._gc import delete_checkpoints
from determined.master._core._tensorboard_files import delete_tensorboard_files
from determined.master._wire import TERMINAL_STATES, APIError
from determined.master.db import (
    Allocation,
    Checkpoint,
    Database,
    Experiment,
    ExperimentSnapshot,
    Metric,
    MetricTile,
    MetricTileSeries,
    Run,
    Task,
    TaskLog,
    User,
    registered_versions,
)

logger = logging.getLogger("determined.master")


def delete_experiment(db: Database, experiment_id: int, requester: User) -> None:
    """Delete a terminal experiment, its checkpoints and its rows (marked DELETING meanwhile)."""
    with db.write() as session:
        exp = get_experiment(session, experiment_id)
        if exp.state not in TERMINAL_STATES:
            raise APIError(400, "Experiment is not in terminal state.")
        if not requester.admin and requester.id != exp.owner_id:
            raise APIError(403, "only the owner or an admin may delete an experiment")
        uuids = session.scalars(
            select(Checkpoint.uuid).where(Checkpoint.experiment_id == experiment_id)
        )
        in_registry = registered_versions(session, list(uuids))
        if in_registry:
            versions = sorted({v for found in in_registry.values() for v in found})
            raise APIError(
                400,
                f"experiment {experiment_id} has checkpoints registered in the model registry "
                f"({', '.join(versions)}); delete those model versions first",
            )
        exp.state = "DELETING"
    with db.read() as session:
        stored = list(
            session.scalars(
                select(Checkpoint.uuid).where(
                    Checkpoint.experiment_id == experiment_id,
                    Checkpoint.state.in_(("COMPLETED", "PARTIALLY_DELETED")),
                )
            )
        )
    delete_checkpoints(db, stored)
    try:
        delete_tensorboard_files(db, experiment_id)
    except Exception:  # the rows go regardless, as upstream; the files can be removed by hand
        logger.exception("master: deleting experiment %s's TensorBoard files failed", experiment_id)
    with db.write() as session:
        run_ids = select(Run.id).where(Run.experiment_id == experiment_id)
        # The runs' rows before anything else: a metrics lane storing a late report (PostgreSQL)
        # holds its run's row and then writes its tiles; taking the runs first orders this
        # transaction after it instead of a deadlock between the tiles and the run.
        session.execute(run_ids.order_by(Run.id).with_for_update())
        task_ids = select(Task.task_id).where(Task.trial_id.in_(run_ids))  # continues add tasks
        session.execute(delete(TaskLog).where(TaskLog.task_id.in_(task_ids)))
        session.execute(delete(Allocation).where(Allocation.task_id.in_(task_ids)))
        session.execute(delete(Task).where(Task.task_id.in_(task_ids)))
        session.execute(delete(Checkpoint).where(Checkpoint.experiment_id == experiment_id))
        session.execute(delete(Metric).where(Metric.trial_id.in_(run_ids)))
        session.execute(delete(MetricTile).where(MetricTile.trial_id.in_(run_ids)))
        session.execute(delete(MetricTileSeries).where(MetricTileSeries.trial_id.in_(run_ids)))
        session.execute(delete(Run).where(Run.experiment_id == experiment_id))
        session.execute(
            delete(ExperimentSnapshot).where(ExperimentSnapshot.experiment_id == experiment_id)
        )
        session.execute(delete(Experiment).where(Experiment.id == experiment_id))
