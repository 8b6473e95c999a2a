"""``Client``: every resource client over one session, the single entry point of the SDK and the CLI."""

from __future__ import annotations

from determined.client._checkpoints import CheckpointsClient
from determined.client._cluster import ClusterClient, MasterInfoClient
from determined.client._config_policies import ConfigPoliciesClient
from determined.client._experiments import ExperimentsClient
from determined.client._models import ModelsClient
from determined.client._notebooks import NotebooksClient
from determined.client._projects import ProjectsClient
from determined.client._rbac import GroupsClient, RbacClient
from determined.client._session import Session
from determined.client._tasks import CommandsClient, TasksClient
from determined.client._templates import TemplatesClient
from determined.client._tensorboards import TensorboardsClient
from determined.client._tokens import TokensClient
from determined.client._trials import TrialsClient
from determined.client._users import UsersClient
from determined.client._webhooks import WebhooksClient
from determined.client._workspaces import WorkspacesClient


class Client:
    """The master's REST API by resource: ``Client(session).experiments.get(7)``.

    Every method calls one route of :data:`determined.client.ROUTES` and returns the master's JSON
    answer (upstream Determined's camelCase fields).

    Args:
        session: the HTTP session (master URL, token, retry policy).
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.master = MasterInfoClient(session)
        self.experiments = ExperimentsClient(session)
        self.trials = TrialsClient(session)
        self.checkpoints = CheckpointsClient(session)
        self.models = ModelsClient(session)
        self.users = UsersClient(session)
        self.groups = GroupsClient(session)
        self.rbac = RbacClient(session)
        self.tokens = TokensClient(session)
        self.cluster = ClusterClient(session)
        self.tasks = TasksClient(session)
        self.commands = CommandsClient(session)
        self.tensorboards = TensorboardsClient(session)
        self.notebooks = NotebooksClient(session)
        self.projects = ProjectsClient(session)
        self.workspaces = WorkspacesClient(session)
        self.templates = TemplatesClient(session)
        self.webhooks = WebhooksClient(session)
        self.config_policies = ConfigPoliciesClient(session)

    def __repr__(self) -> str:
        return f"Client({self.session.master_url!r})"
