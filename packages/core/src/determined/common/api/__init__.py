"""Upstream's ``determined.common.api``: only its ``errors`` module is provided."""

from __future__ import annotations

from determined.common.api import errors

__all__ = ["errors"]
