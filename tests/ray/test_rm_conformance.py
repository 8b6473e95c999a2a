"""The Ray resource manager passes the resource-manager conformance suite, on the shared
two-node Ray cluster (two nodes of 2 CPU slots: a gang of 2 fits one node, 4 slots span both)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from determined.master.rm.ray import RayResourceManager, parse_config
from determined.master.testing.rm_suite import ResourceManagerSuite

pytestmark = pytest.mark.slow


class TestRayResourceManager(ResourceManagerSuite):
    wait_s = 120.0

    @pytest.fixture
    def resource_manager(self, ray_cluster: Any, tmp_path: pathlib.Path) -> RayResourceManager:
        config = {
            "type": "ray",
            "address": ray_cluster.address,
            "work_root": str(tmp_path / "nodes"),
        }
        return RayResourceManager(parse_config(config))
