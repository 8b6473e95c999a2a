"""Fixtures of the slurm tests: a real single-host Slurm cluster (tests/slurm_cluster.py).

- ``slurm_cluster`` (session scope, so one per pytest-xdist worker, each on its own ports and names):
  a started ``SlurmCluster``; skipped with the reason when the Slurm/munge packages are not installed.
- ``slurm`` (function scope): the same cluster, checked idle before the test and with every job the
  test left behind cancelled afterwards, so tests do not see each other's jobs.
- ``slurm_master`` (function scope): ``slurm_master(**settings)`` starts a det master (the root
  conftest's ``make_master``) on the ``slurm`` resource manager of that cluster, its job directories
  and checkpoints on the cluster's shared directory; ``settings`` go into ``resource_manager``.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from slurm_cluster import SlurmCluster, missing_reason, start_cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running single-node Slurm cluster for the whole session (per xdist worker)."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The session's cluster, idle at the start of the test; the test's leftover jobs cancelled."""
    slurm_cluster.wait_idle()
    yield slurm_cluster
    slurm_cluster.cancel_all()


@pytest.fixture
def slurm_master(
    slurm: SlurmCluster, make_master: Any, tmp_path: pathlib.Path
) -> Callable[..., Any]:
    """``slurm_master(**resource_manager_settings)``: a started master on the cluster's slurm RM."""

    def make(**settings: Any) -> Any:
        shared = slurm.shared_dir / tmp_path.name  # per test: jobs and checkpoints
        section = {
            "type": "slurm",
            "slurm_conf": str(slurm.conf),
            "job_storage_root": str(shared / "jobs"),
            "slot_type": "cpu",
            "poll_interval": 0.5,
            **settings,
        }
        return make_master(
            resource_manager=section,
            slots=None,
            checkpoint_storage=str(shared / "checkpoints"),
        )

    return make
