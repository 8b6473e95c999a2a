"""Reusable test suites for det plugins (opt-in: nothing here is collected unless you subclass it).

``determined.testing.storage_suite.StorageSuite`` is the conformance suite every checkpoint-storage
plugin should pass. It imports pytest, so it loads only on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from determined.testing.storage_suite import StorageSuite

__all__ = ["StorageSuite"]


def __getattr__(name: str) -> object:
    if name == "StorageSuite":
        return importlib.import_module("determined.testing.storage_suite").StorageSuite
    raise AttributeError(f"module 'determined.testing' has no attribute {name!r}")
