"""The Ray resource manager of det-master: trials as placement groups on a Ray cluster.

Chosen with ``resource_manager: {type: ray, address: auto}`` in the master config or
``det-master up --ray-address ADDR``. Ray itself is imported only when the manager starts.
"""

from __future__ import annotations

from determined.master.rm.ray._cluster import Node
from determined.master.rm.ray._config import PoolConfig, RayConfig, parse_config
from determined.master.rm.ray._node import NodeRunner
from determined.master.rm.ray._rm import RayResourceManager

__all__ = ["Node", "NodeRunner", "PoolConfig", "RayConfig", "RayResourceManager", "parse_config"]
