"""The Slurm resource manager of det-master: trials as Slurm batch jobs on an HPC cluster.

Chosen with ``resource_manager: {type: slurm, ...}`` in the master config or ``det-master up
--slurm``. See docs/slurm.md for what the cluster needs and how the pieces fit.
"""

from __future__ import annotations

from determined.master.rm.slurm._commands import (
    JobStatus,
    Partition,
    SlurmError,
    gres_gpus,
    parse_sbatch,
    parse_sinfo,
    parse_squeue,
)
from determined.master.rm.slurm._config import PartitionOverride, SlurmConfig, parse_config
from determined.master.rm.slurm._job import expand_counts
from determined.master.rm.slurm._rm import SlurmResourceManager
from determined.master.rm.slurm._script import batch_script, gpu_layout, job_name, sbatch_options
from determined.master.rm.slurm._tail import FileTail

__all__ = [
    "FileTail",
    "JobStatus",
    "Partition",
    "PartitionOverride",
    "SlurmConfig",
    "SlurmError",
    "SlurmResourceManager",
    "batch_script",
    "expand_counts",
    "gpu_layout",
    "gres_gpus",
    "job_name",
    "parse_config",
    "parse_sbatch",
    "parse_sinfo",
    "parse_squeue",
    "sbatch_options",
]
