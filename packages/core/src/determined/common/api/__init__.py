"""Upstream's ``determined.common.api``: sessions, the generated ``bindings`` and ``errors``.

``Session`` (and ``UnauthSession``, ``TaskSession``) keep upstream's request methods and are det
client sessions, so ``bindings`` functions and ``determined.client.Client`` both accept them.
"""

from __future__ import annotations

from determined._info import canonicalize_master_url
from determined.common.api import bindings, errors
from determined.common.api._session import BaseSession, Session, TaskSession, UnauthSession

__all__ = [
    "BaseSession",
    "Session",
    "TaskSession",
    "UnauthSession",
    "bindings",
    "canonicalize_master_url",
    "errors",
]
