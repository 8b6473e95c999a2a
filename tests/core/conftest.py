"""Shared fixtures of the core tests: the fake master (``fake_master.py``) and rank threads (``parallel.py``)."""

from __future__ import annotations

import pathlib
import sys

# The helpers live beside this file; make them importable as plain modules under importlib mode.
_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from fake_master import fake_master, off_cluster, on_cluster  # noqa: E402,F401
