"""Removing an experiment's TensorBoard files from its checkpoint storage.

Trials upload them under upstream's ``<cluster id>/tensorboard/experiment/<id>/``; trials of det
before that layout used ``tensorboard/experiment/<id>/``. Both go.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from determined.core import plugins
from determined.master.db import ClusterMeta, Database, Experiment


def tensorboard_prefixes(cluster_id: str, experiment_id: int) -> list[str]:
    """The storage paths an experiment's TensorBoard files may be under (newest layout first)."""
    from determined.tensorboard import experiment_storage_path

    paths = [experiment_storage_path(experiment_id)]
    if cluster_id:
        paths.insert(0, experiment_storage_path(experiment_id, cluster_id))
    return paths


def delete_tensorboard_files(db: Database, experiment_id: int) -> bool:
    """Delete an experiment's TensorBoard files; False when it has no checkpoint storage.

    Raises:
        ValueError: the experiment's checkpoint storage config is unusable.
        LookupError: there is no such experiment.
    """
    with db.read() as session:
        exp = session.get(Experiment, experiment_id)
        if exp is None:
            raise LookupError(f"experiment {experiment_id} not found")
        storage: dict[str, Any] = dict(exp.config.get("checkpoint_storage") or {})
        cluster_id = session.scalar(select(ClusterMeta.cluster_id)) or ""
    if not storage:
        return False
    manager = plugins.checkpoint_storage(storage)
    for prefix in tensorboard_prefixes(cluster_id, experiment_id):
        manager.delete(prefix, ["**/*"])
    return True
