"""The pluggy markers of project ``determined``: decorate hook specs and hook implementations."""

from __future__ import annotations

import pluggy

PROJECT_NAME = "determined"
"""The pluggy project name and the entry-point group plugins register under."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
