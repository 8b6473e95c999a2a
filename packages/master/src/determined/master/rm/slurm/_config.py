"""The ``resource_manager: {type: slurm, ...}`` section of the master config, checked field by field.

The names follow upstream Determined's Slurm resource manager where det has the same setting
(``job_storage_root``, ``default_compute_resource_pool``, ``partition_overrides``, ``slot_type``,
``path``, ``gres_supported``); det adds what its own design needs (the polling intervals, the
``slurm_conf`` to use, extra ``sbatch_args``). Upstream's container and launcher settings
(``container_run_type``, ``singularity_image_root``, ``auth_file``, ``master_host``, ...) have no
meaning here: trials run in the master's Python environment, reached through the shared filesystem.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

SLURM_KEYS = {
    "type",
    "job_storage_root",
    "default_compute_resource_pool",
    "partition_overrides",
    "slot_type",
    "cpus_per_slot",
    "path",
    "slurm_conf",
    "gres_supported",
    "sbatch_args",
    "poll_interval",
    "capacity_interval",
    "max_bypass",
    "cluster_name",
}
"""Keys of a ``resource_manager`` section the Slurm resource manager understands."""

PARTITION_KEYS = {"slot_type", "cpus_per_slot", "description"}
SLOT_TYPES = ("auto", "cpu", "cuda")
DEFAULT_JOB_STORAGE_ROOT = "~/.det-slurm-jobs"


@dataclass(frozen=True)
class PartitionOverride:
    """Settings of one partition (one resource pool) that differ from the section's."""

    slot_type: str | None = None
    cpus_per_slot: int | None = None
    description: str = ""


@dataclass(frozen=True)
class SlurmConfig:
    """The Slurm resource manager's settings.

    Attributes:
        job_storage_root: a directory on the filesystem the master and every compute node share;
            each allocation gets ``<root>/<allocation id>`` (context, launch files, output).
            Default ``~/.det-slurm-jobs`` (home directories are shared on most clusters).
        default_compute_resource_pool: the partition that the ``default`` pool means
            (default: Slurm's default partition).
        partition_overrides: partition name → :class:`PartitionOverride`.
        slot_type: ``"cuda"`` (a slot is a GPU, asked with ``--gres=gpu:N``), ``"cpu"`` (a slot is
            ``cpus_per_slot`` CPUs), or ``"auto"`` (per partition: GPUs when its nodes have any).
        cpus_per_slot: CPUs per slot (``--cpus-per-task``); default 1 on CPU slots, unset on GPUs.
        path: directories put before ``PATH`` to find ``sbatch``/``squeue``/... (and in the jobs).
        slurm_conf: the ``slurm.conf`` the Slurm commands use (``SLURM_CONF``); default Slurm's.
        gres_supported: whether the cluster has GPU GRES; False asks for whole nodes instead.
        sbatch_args: extra ``sbatch`` options for every job (``["--account=ml", "--qos=low"]``).
        poll_interval: seconds between the ``squeue`` calls (one for all jobs).
        capacity_interval: seconds between the ``sinfo`` calls that size the pools.
        max_bypass: the priority scheduler's backfilling bound.
    """

    job_storage_root: str = os.path.expanduser(DEFAULT_JOB_STORAGE_ROOT)
    default_compute_resource_pool: str | None = None
    partition_overrides: dict[str, PartitionOverride] = field(default_factory=dict)
    slot_type: str = "auto"
    cpus_per_slot: int | None = None
    path: str | None = None
    slurm_conf: str | None = None
    gres_supported: bool = True
    sbatch_args: tuple[str, ...] = ()
    poll_interval: float = 2.0
    capacity_interval: float = 30.0
    max_bypass: int = 4

    def override(self, partition: str) -> PartitionOverride:
        """The partition's overrides (empty when none)."""
        return self.partition_overrides.get(partition, PartitionOverride())

    def command_env(self) -> dict[str, str]:
        """The environment the Slurm commands (and so the jobs, ``--export=ALL``) get."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
        if self.path:
            env["PATH"] = self.path + os.pathsep + env.get("PATH", "")
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env


def _fail(key: str, message: str) -> ValueError:
    return ValueError(f"resource_manager.{key}: {message}")


def _positive_int(key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(key, f"must be an integer >= 1, got {value!r}")
    return value


def _slot_type(key: str, value: Any) -> str:
    if value == "gpu":
        value = "cuda"
    if value not in SLOT_TYPES:
        raise _fail(key, f"must be 'auto', 'cpu' or 'cuda', got {value!r}")
    return str(value)


def _interval(key: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _fail(key, f"must be a number of seconds > 0, got {value!r}")
    return float(value)


def _overrides(raw: Any) -> dict[str, PartitionOverride]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail("partition_overrides", f"must map partition names to settings, got {raw!r}")
    out: dict[str, PartitionOverride] = {}
    for name, section in raw.items():
        key = f"partition_overrides.{name}"
        section = section or {}
        if not isinstance(section, dict):
            raise _fail(key, f"must be a mapping, got {section!r}")
        unknown = sorted(set(section) - PARTITION_KEYS)
        if unknown:
            raise _fail(
                f"{key}.{unknown[0]}", f"unknown (known: {', '.join(sorted(PARTITION_KEYS))})"
            )
        slot_type = section.get("slot_type")
        description = section.get("description", "")
        if not isinstance(description, str):
            raise _fail(f"{key}.description", f"must be a string, got {description!r}")
        out[str(name)] = PartitionOverride(
            slot_type=_slot_type(f"{key}.slot_type", slot_type) if slot_type else None,
            cpus_per_slot=_positive_int(f"{key}.cpus_per_slot", section.get("cpus_per_slot")),
            description=description,
        )
    return out


def parse_config(section: dict[str, Any]) -> SlurmConfig:
    """A :class:`SlurmConfig` from the ``resource_manager`` section; ValueError naming the field."""
    unknown = sorted(set(section) - SLURM_KEYS)
    if unknown:
        raise _fail(
            unknown[0],
            f"not a setting of the Slurm resource manager (known: {', '.join(sorted(SLURM_KEYS))})",
        )
    root = section.get("job_storage_root")
    if root is not None and (not isinstance(root, str) or not root):
        raise _fail("job_storage_root", f"must be a directory path, got {root!r}")
    root = root or DEFAULT_JOB_STORAGE_ROOT
    default_pool = section.get("default_compute_resource_pool")
    if default_pool is not None and (not isinstance(default_pool, str) or not default_pool):
        raise _fail(
            "default_compute_resource_pool", f"must be a partition name, got {default_pool!r}"
        )
    for key in ("path", "slurm_conf"):
        value = section.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise _fail(key, f"must be a non-empty string, got {value!r}")
    gres = section.get("gres_supported", True)
    if not isinstance(gres, bool):
        raise _fail("gres_supported", f"must be true or false, got {gres!r}")
    sbatch_args = section.get("sbatch_args") or []
    if not isinstance(sbatch_args, list) or not all(
        isinstance(a, str) and a.startswith("-") for a in sbatch_args
    ):
        raise _fail(
            "sbatch_args",
            f"must be a list of sbatch options such as '--qos=low', got {sbatch_args!r}",
        )
    max_bypass = section.get("max_bypass", 4)
    if not isinstance(max_bypass, int) or isinstance(max_bypass, bool) or max_bypass < 0:
        raise _fail("max_bypass", f"must be an integer >= 0, got {max_bypass!r}")
    return SlurmConfig(
        job_storage_root=os.path.abspath(os.path.expanduser(root)),
        default_compute_resource_pool=default_pool,
        partition_overrides=_overrides(section.get("partition_overrides")),
        slot_type=_slot_type("slot_type", section.get("slot_type", "auto")),
        cpus_per_slot=_positive_int("cpus_per_slot", section.get("cpus_per_slot")),
        path=section.get("path"),
        slurm_conf=section.get("slurm_conf"),
        gres_supported=gres,
        sbatch_args=tuple(sbatch_args),
        poll_interval=_interval("poll_interval", section.get("poll_interval"), 2.0),
        capacity_interval=_interval("capacity_interval", section.get("capacity_interval"), 30.0),
        max_bypass=max_bypass,
    )
