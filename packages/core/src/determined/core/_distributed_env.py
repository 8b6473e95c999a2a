"""Ranks from the environment a launcher sets: torchrun, DeepSpeed, Horovod, ``TF_CONFIG``.

Each ``*_ranks`` function returns the keyword arguments of :class:`DistributedContext` for one
launcher (the six rank numbers, the chief's address and port), raising ValueError naming the variable
that is missing or malformed.
"""

from __future__ import annotations

import json
import os
from typing import Any

INTER_TRAIN_PROCESS_COMM_PORT_1 = 12360
INTER_TRAIN_PROCESS_COMM_PORT_2 = INTER_TRAIN_PROCESS_COMM_PORT_1 + 16
DEFAULT_TIMEOUT = 1800.0
TIMEOUT_ENV = "DET_COLLECTIVE_TIMEOUT"
PORT_ENV = "DET_COLLECTIVE_PORT"
RESERVED_PORT_ENV = "DET_COLLECTIVE_PORT_RESERVED"
"""Set by a launcher to the ``DET_COLLECTIVE_PORT`` it holds reserved for the job (the chief binds
it beside the launcher's hold; see ``launch._util.reserve_ports``)."""
CHIEF_IP_ENV = "DET_CHIEF_IP"


def default_timeout() -> float:
    """Seconds for connecting and for each collective: ``DET_COLLECTIVE_TIMEOUT`` or 1800."""
    raw = os.environ.get(TIMEOUT_ENV)
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{TIMEOUT_ENV} must be positive, not {raw!r}")
    return value


def env_port() -> int:
    """The chief's port for the from_* constructors: ``DET_COLLECTIVE_PORT`` or 12360."""
    raw = os.environ.get(PORT_ENV)
    if not raw:
        return INTER_TRAIN_PROCESS_COMM_PORT_1
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{PORT_ENV} must be a port number, not {raw!r}") from None


def port_is_reserved(port: int) -> bool:
    """Whether the launcher holds ``port`` reserved for this job (``DET_COLLECTIVE_PORT_RESERVED``)."""
    return os.environ.get(RESERVED_PORT_ENV) == str(port)


def env_int(*names: str) -> int:
    """The first of ``names`` set in the environment, as an int; ValueError naming them otherwise."""
    for name in names:
        raw = os.environ.get(name)
        if raw is not None and raw != "":
            try:
                return int(raw)
            except ValueError:
                raise ValueError(
                    f"environment variable {name} must be an integer, not {raw!r}"
                ) from None
    raise ValueError(f"environment variable {' or '.join(names)} is not set")


def _chief(chief_ip: str | None) -> dict[str, Any]:
    return {"chief_ip": chief_ip or os.environ.get(CHIEF_IP_ENV), "pub_port": env_port()}


def torch_distributed_ranks(chief_ip: str | None = None) -> dict[str, Any]:
    """From torchrun's ``RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE``."""
    return {
        "rank": env_int("RANK"),
        "size": env_int("WORLD_SIZE"),
        "local_rank": env_int("LOCAL_RANK"),
        "local_size": env_int("LOCAL_WORLD_SIZE"),
        "cross_rank": env_int("GROUP_RANK"),
        "cross_size": env_int("GROUP_WORLD_SIZE"),
        **_chief(chief_ip),
    }


def deepspeed_ranks(chief_ip: str | None = None) -> dict[str, Any]:
    """From the DeepSpeed launcher's ``RANK WORLD_SIZE LOCAL_RANK LOCAL_SIZE CROSS_RANK CROSS_SIZE``
    (torchrun's names are accepted as fallbacks)."""
    return {
        "rank": env_int("RANK"),
        "size": env_int("WORLD_SIZE"),
        "local_rank": env_int("LOCAL_RANK"),
        "local_size": env_int("LOCAL_SIZE", "LOCAL_WORLD_SIZE"),
        "cross_rank": env_int("CROSS_RANK", "GROUP_RANK"),
        "cross_size": env_int("CROSS_SIZE", "GROUP_WORLD_SIZE"),
        **_chief(chief_ip),
    }


def horovod_ranks(hvd: Any, chief_ip: str | None = None) -> dict[str, Any]:
    """From an initialised ``horovod.torch`` or ``horovod.tensorflow`` module ``hvd``."""
    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "cross_rank": hvd.cross_rank(),
        "cross_size": hvd.cross_size(),
        **_chief(chief_ip),
    }


def tf_config_ranks() -> dict[str, Any] | None:
    """From ``TF_CONFIG`` with several workers; ``None`` for one worker (or no ``TF_CONFIG``).

    Workers sharing a host are one node (local ranks); hosts are numbered in order and the first
    worker's host is the chief.
    """
    raw = os.environ.get("TF_CONFIG")
    config = json.loads(raw) if raw else {}
    task = config.get("task") or {"type": "worker", "index": 0}
    if task.get("type") != "worker":
        raise ValueError(f"TF_CONFIG: task.type must be 'worker', not {task.get('type')!r}")
    workers = (config.get("cluster") or {}).get("worker") or []
    if len(workers) <= 1:
        return None
    index = int(task.get("index", 0))
    if not 0 <= index < len(workers):
        raise ValueError(
            f"TF_CONFIG: task.index {index} is out of range for {len(workers)} workers"
        )
    hosts = [str(worker).rsplit(":", 1)[0] for worker in workers]
    nodes = list(dict.fromkeys(hosts))
    peers = [i for i, host in enumerate(hosts) if host == hosts[index]]
    return {
        "rank": index,
        "size": len(workers),
        "local_rank": peers.index(index),
        "local_size": len(peers),
        "cross_rank": nodes.index(hosts[index]),
        "cross_size": len(nodes),
        "chief_ip": hosts[0],
        "pub_port": env_port(),
    }
