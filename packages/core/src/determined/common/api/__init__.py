"""Upstream's ``determined.common.api``: sessions, the generated ``bindings`` and ``errors``.

``Session`` (and ``UnauthSession``, ``TaskSession``) keep upstream's request methods and are det
client sessions, so ``bindings`` functions and ``determined.client.Client`` both accept them.
"""

from __future__ import annotations

from determined._info import canonicalize_master_url
from determined.client import hash_password
from determined.common.api import authentication, bindings, errors, logs, metric
from determined.common.api._session import BaseSession, Session, TaskSession, UnauthSession
from determined.common.api._util import (
    WARNING_MESSAGE_MAP,
    PageOpts,
    get_default_master_url,
    read_paginated,
)
from determined.common.api.logs import pprint_logs, task_logs, trial_logs

salt_and_hash = hash_password
"""Upstream's name for the password hash a Determined client sends."""

__all__ = [
    "WARNING_MESSAGE_MAP",
    "BaseSession",
    "PageOpts",
    "Session",
    "TaskSession",
    "UnauthSession",
    "authentication",
    "bindings",
    "canonicalize_master_url",
    "errors",
    "get_default_master_url",
    "logs",
    "metric",
    "pprint_logs",
    "read_paginated",
    "salt_and_hash",
    "task_logs",
    "trial_logs",
]
