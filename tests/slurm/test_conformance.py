"""The Slurm resource manager passes the resource-manager conformance suite on a real Slurm.

Each test of the suite gets a fresh ``SlurmResourceManager`` on the session's cluster (one node of
4 CPUs, so 4 CPU slots in the ``debug`` partition); allocations are real ``sbatch`` jobs whose
processes start with ``srun``, and the ``slurm`` fixture cancels whatever a test leaves behind.
"""

from __future__ import annotations

import pathlib

import pytest
from slurm_cluster import SlurmCluster

from determined.master.rm.slurm import SlurmResourceManager, parse_config
from determined.master.testing.rm_suite import ResourceManagerSuite


class TestSlurmResourceManager(ResourceManagerSuite):
    wait_s = 60.0  # sbatch → RUNNING → srun on a loaded 2-core machine

    @pytest.fixture
    def resource_manager(self, slurm: SlurmCluster, tmp_path: pathlib.Path) -> SlurmResourceManager:
        jobs = slurm.shared_dir / f"jobs-{tmp_path.name}"
        return SlurmResourceManager(
            parse_config(
                {
                    "type": "slurm",
                    "slurm_conf": str(slurm.conf),
                    "job_storage_root": str(jobs),
                    "slot_type": "cpu",
                    "poll_interval": 0.2,
                    "capacity_interval": 5,
                }
            )
        )
