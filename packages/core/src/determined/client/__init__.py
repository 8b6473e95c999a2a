"""The typed HTTP client for det's master, as task processes use it.

``MasterClient`` has one method per endpoint (upstream Determined's paths and JSON conventions).
``Session`` carries the master URL, the token and the retry policy (only idempotent calls are retried).
"""

from determined.client._client import MasterClient, metrics_body, utc_now_iso
from determined.client._context_dir import read_context_dir
from determined.client._errors import (
    APIError,
    ForbiddenError,
    MasterNotFoundError,
    NotFoundError,
    UnauthenticatedError,
)
from determined.client._experiments import CreatedExperiment, create_experiment
from determined.client._login import hash_password, login, logout, master_address
from determined.client._session import Session
from determined.client._token_store import TokenStore

__all__ = [
    "APIError",
    "CreatedExperiment",
    "ForbiddenError",
    "MasterClient",
    "MasterNotFoundError",
    "NotFoundError",
    "Session",
    "TokenStore",
    "UnauthenticatedError",
    "create_experiment",
    "hash_password",
    "login",
    "logout",
    "master_address",
    "metrics_body",
    "read_context_dir",
    "utc_now_iso",
]
