"""Fixtures of the slurm tests: a real single-host Slurm cluster (tests/slurm_cluster.py).

- ``slurm_cluster`` (session scope, so one per pytest-xdist worker, each on its own ports and names):
  a started ``SlurmCluster``; skipped with the reason when the Slurm/munge packages are not installed.
- ``slurm`` (function scope): the same cluster, checked idle before the test and with every job the
  test left behind cancelled afterwards, so tests do not see each other's jobs.
"""

from __future__ import annotations

from collections.abc import Iterator

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
