"""Reusable test suites for det plugins (opt-in: nothing here is collected unless you subclass it).

``determined.testing.storage_suite.StorageSuite`` is the conformance suite every checkpoint-storage
plugin should pass, ``determined.testing.trial_runner_suite.TrialRunnerSuite`` the one every trial
runner (``det_trial_runner`` hook) should pass. They import pytest, so they load only on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from determined._lazy import lazy_exports

if TYPE_CHECKING:
    from determined.testing.storage_suite import StorageSuite
    from determined.testing.trial_runner_suite import TrialRunnerSuite

__all__ = ["StorageSuite", "TrialRunnerSuite"]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "StorageSuite": "determined.testing.storage_suite",
        "TrialRunnerSuite": "determined.testing.trial_runner_suite",
    },
)
