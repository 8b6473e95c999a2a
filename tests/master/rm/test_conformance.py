"""The local resource manager passes the resource-manager conformance suite."""

from __future__ import annotations

import pytest

from determined.master.rm import LocalResourceManager
from determined.master.testing.rm_suite import ResourceManagerSuite


class TestLocalResourceManager(ResourceManagerSuite):
    @pytest.fixture
    def resource_manager(self) -> LocalResourceManager:
        return LocalResourceManager(slots=3, slot_type="cpu")
