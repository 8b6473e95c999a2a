"""det-core's built-in answers to ``det_distributed_context``: one per launcher environment.

Each recognises its launcher by the variables it sets and returns ``None`` otherwise; their conditions
exclude one another, so their order does not matter. The ``trylast`` single-process fallback answers
when nothing else did, and refuses (ValueError) when the ClusterInfo shows a multi-slot or multi-node
allocation that no launcher set up.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from determined.core._distributed import CHIEF_IP_ENV, DistributedContext
from determined.core._markers import hookimpl

if TYPE_CHECKING:
    from determined import ClusterInfo

TORCH_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
)
USE_TF_CONFIG_ENV = "DET_USE_TF_CONFIG"


def _chief_ip(cluster_info: ClusterInfo | None) -> str | None:
    if cluster_info is not None and cluster_info.container_addrs:
        return cluster_info.container_addrs[0]
    return os.environ.get(CHIEF_IP_ENV) or None


def _set(name: str) -> bool:
    return os.environ.get(name, "") != ""


@hookimpl(specname="det_distributed_context")
def torch_distributed_context(cluster_info: ClusterInfo | None) -> DistributedContext | None:
    """torchrun (``determined.launch.torch_distributed``): its six rank variables are set."""
    if _set("USE_DEEPSPEED") or _set("HOROVOD_RANK") or not all(_set(v) for v in TORCH_VARS):
        return None
    return DistributedContext.from_torch_distributed(chief_ip=_chief_ip(cluster_info))


@hookimpl(specname="det_distributed_context")
def deepspeed_distributed_context(cluster_info: ClusterInfo | None) -> DistributedContext | None:
    """The DeepSpeed launcher: ``USE_DEEPSPEED`` is set."""
    if not _set("USE_DEEPSPEED"):
        return None
    return DistributedContext.from_deepspeed(chief_ip=_chief_ip(cluster_info))


@hookimpl(specname="det_distributed_context")
def horovod_distributed_context(cluster_info: ClusterInfo | None) -> DistributedContext | None:
    """horovodrun: ``HOROVOD_RANK`` is set (horovod is imported only then)."""
    if not _set("HOROVOD_RANK") or _set("USE_DEEPSPEED"):
        return None
    try:
        import horovod.torch as hvd
    except ImportError:
        import horovod.tensorflow as hvd

    hvd.init()
    return DistributedContext.from_horovod(hvd, chief_ip=_chief_ip(cluster_info))


@hookimpl(specname="det_distributed_context")
def tf_config_distributed_context(cluster_info: ClusterInfo | None) -> DistributedContext | None:
    """The tensorflow launcher: ``TF_CONFIG`` is set and the launcher marked it (``DET_USE_TF_CONFIG``)."""
    if not (_set("TF_CONFIG") and _set(USE_TF_CONFIG_ENV)):
        return None
    if _set("USE_DEEPSPEED") or _set("HOROVOD_RANK") or all(_set(v) for v in TORCH_VARS):
        return None
    context, _strategy = DistributedContext.from_tf_config()
    return context


@hookimpl(specname="det_distributed_context", trylast=True)
def single_process_distributed_context(cluster_info: ClusterInfo | None) -> DistributedContext:
    """Rank 0 of 1, unless the allocation has several slots or containers (then a clear ValueError)."""
    if cluster_info is not None:
        slots, containers = len(cluster_info.slot_ids), len(cluster_info.container_addrs)
        if slots > 1 or containers > 1:
            raise ValueError(
                f"this task has {slots} slots on {containers} container(s) but no distributed launcher "
                "set it up: pass distributed=det.core.DistributedContext(...) to core.init(), or start "
                "the script with a launcher (python -m determined.launch.torch_distributed SCRIPT...)"
            )
    return DistributedContext()
