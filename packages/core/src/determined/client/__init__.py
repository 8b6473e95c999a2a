"""The typed HTTP client for det's master: the one way the SDK, the CLI, the Hydra launcher and task
processes call its REST API.

``Client(session)`` groups one resource client per REST resource (``.master``, ``.experiments``,
``.trials``, ``.checkpoints``, ``.models``, ``.users``, ``.cluster``, ``.tensorboards``,
``.notebooks``, ``.templates``, ``.config_policies``, ``.webhooks``); ``MasterClient`` has the calls a task
process makes. Both call the master only through the routes of ``ROUTES`` (upstream Determined's
paths and JSON conventions), which a test checks against the master's OpenAPI document.
``Session`` carries the master URL, the token and the retry policy (only idempotent calls are retried).
"""

from determined.client._api import Client
from determined.client._checkpoints import CheckpointsClient
from determined.client._client import MasterClient, NextOperation, metrics_body, utc_now_iso
from determined.client._cluster import ClusterClient, MasterInfoClient
from determined.client._config_policies import ConfigPoliciesClient
from determined.client._context_dir import MAX_CONTEXT_SIZE, ContextTooLargeError, read_context_dir
from determined.client._errors import (
    APIError,
    ClientError,
    ForbiddenError,
    MasterNotFoundError,
    NotFoundError,
    UnauthenticatedError,
)
from determined.client._experiments import CreatedExperiment, ExperimentsClient, create_experiment
from determined.client._login import hash_password, login, logout, master_address
from determined.client._models import ModelsClient
from determined.client._notebooks import NotebooksClient
from determined.client._projects import ProjectsClient
from determined.client._rbac import GroupsClient, RbacClient
from determined.client._routes import ROUTES, Route
from determined.client._session import Session
from determined.client._tasks import CommandsClient, TasksClient
from determined.client._templates import TemplatesClient
from determined.client._tensorboards import TensorboardsClient
from determined.client._token_store import TokenStore
from determined.client._tokens import TokensClient
from determined.client._trials import TrialsClient
from determined.client._users import UsersClient
from determined.client._webhooks import WebhooksClient
from determined.client._workspaces import WorkspacesClient

__all__ = [
    "MAX_CONTEXT_SIZE",
    "ROUTES",
    "APIError",
    "CheckpointsClient",
    "Client",
    "ClientError",
    "ClusterClient",
    "CommandsClient",
    "ConfigPoliciesClient",
    "ContextTooLargeError",
    "CreatedExperiment",
    "ExperimentsClient",
    "ForbiddenError",
    "GroupsClient",
    "MasterClient",
    "MasterInfoClient",
    "MasterNotFoundError",
    "ModelsClient",
    "NextOperation",
    "NotFoundError",
    "NotebooksClient",
    "ProjectsClient",
    "RbacClient",
    "Route",
    "Session",
    "TasksClient",
    "TemplatesClient",
    "TensorboardsClient",
    "TokenStore",
    "TokensClient",
    "TrialsClient",
    "UnauthenticatedError",
    "UsersClient",
    "WebhooksClient",
    "WorkspacesClient",
    "create_experiment",
    "hash_password",
    "login",
    "logout",
    "master_address",
    "metrics_body",
    "read_context_dir",
    "utc_now_iso",
]
