"""Every REST route of the master that det's clients call, declared once.

The resource clients (``ExperimentsClient``, ``TrialsClient``, ...), the task process's
``MasterClient`` and logging in call the master only through :func:`call`, :func:`stream` and
:func:`download` with a :class:`Route` of this table, so a test can enumerate :data:`ROUTES` and check
each against the master's OpenAPI document. Paths are upstream Determined's (``/api/v1/...``,
grpc-gateway JSON with camelCase fields; the one binary route, a checkpoint's files, is
``/checkpoints/{uuid}`` as upstream serves it).
"""

from __future__ import annotations

import dataclasses
import string
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

from determined.client._session import Session


@dataclasses.dataclass(frozen=True)
class Route:
    """One endpoint of the master.

    Attributes:
        name: a stable dotted name (``experiments.get``), unique in :data:`ROUTES`.
        method: the HTTP method.
        template: the path with ``{parameter}`` placeholders.
        idempotent: whether a request may be retried after a lost answer (``None``: decided by the
            method, as :class:`Session` does).
    """

    name: str
    method: str
    template: str
    idempotent: bool | None = None

    @property
    def parameters(self) -> tuple[str, ...]:
        """The placeholder names of :attr:`template`, in order."""
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.template) if f)

    def path(self, **params: Any) -> str:
        """The concrete path; every parameter is percent-encoded as one path segment."""
        missing = set(self.parameters) - set(params)
        if missing or set(params) - set(self.parameters):
            raise TypeError(f"{self.name}: path needs {self.parameters}, got {sorted(params)}")
        return self.template.format(
            **{k: urllib.parse.quote(str(v), safe="") for k, v in params.items()}
        )


ROUTES: dict[str, Route] = {}
"""Every route, by name."""


def _route(name: str, method: str, template: str, idempotent: bool | None = None) -> Route:
    if name in ROUTES:
        raise ValueError(f"route {name!r} declared twice")
    ROUTES[name] = route = Route(name, method, template, idempotent)
    return route


def call(
    session: Session,
    route: Route,
    *,
    body: Any = None,
    params: Mapping[str, Any] | None = None,
    timeout: float | None = 60.0,
    idempotent: bool | None = None,
    **path_params: Any,
) -> dict[str, Any]:
    """Send one request on ``route``; the decoded JSON answer (``{}`` when the body is empty).

    ``None`` values in ``params`` are left out of the query string.
    """
    query = {k: v for k, v in (params or {}).items() if v is not None}
    answer = session.request(
        route.method,
        route.path(**path_params),
        body=body,
        params=query or None,
        timeout=timeout,
        idempotent=route.idempotent if idempotent is None else idempotent,
    )
    return dict(answer or {})


def stream(
    session: Session,
    route: Route,
    *,
    params: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    **path_params: Any,
) -> Iterator[dict[str, Any]]:
    """The ``result`` of each line of a streaming (newline-delimited JSON) GET route."""
    if route.method != "GET":
        raise ValueError(f"{route.name}: only GET routes stream")
    query = {k: v for k, v in (params or {}).items() if v is not None}
    result: Iterator[dict[str, Any]] = session.stream(
        route.path(**path_params), params=query or None, timeout=timeout
    )
    return result


def download(
    session: Session,
    route: Route,
    out: IO[bytes],
    *,
    accept: str,
    on_chunk: Callable[[int], None] | None = None,
    **path_params: Any,
) -> int:
    """GET a binary body (an archive) of ``route`` into ``out``; the number of bytes written."""
    if route.method != "GET":
        raise ValueError(f"{route.name}: only GET routes download")
    return session.download(route.path(**path_params), out, accept=accept, on_chunk=on_chunk)


# ---- master ---------------------------------------------------------------------------------------
MASTER_INFO = _route("master.info", "GET", "/api/v1/master")
MASTER_CONFIG = _route("master.config", "GET", "/api/v1/master/config")
MASTER_CONFIG_PATCH = _route("master.patch_config", "PATCH", "/api/v1/master/config")
MASTER_LOGS = _route("master.logs", "GET", "/api/v1/master/logs")
PREVIEW_HP_SEARCH = _route("master.preview_hp_search", "POST", "/api/v1/preview-hp-search", True)

# ---- users, login and tokens ----------------------------------------------------------------------
AUTH_LOGIN = _route("auth.login", "POST", "/api/v1/auth/login", False)
AUTH_LOGOUT = _route("auth.logout", "POST", "/api/v1/auth/logout", False)
ME = _route("users.me", "GET", "/api/v1/me")
USERS_LIST = _route("users.list", "GET", "/api/v1/users")
USER_CREATE = _route("users.create", "POST", "/api/v1/users", False)
USER_GET = _route("users.get", "GET", "/api/v1/users/{user_id}")
USER_BY_NAME = _route("users.get_by_name", "GET", "/api/v1/users/{username}/by-username")
USER_PATCH = _route("users.patch", "PATCH", "/api/v1/users/{user_id}", False)
USER_SET_PASSWORD = _route("users.set_password", "POST", "/api/v1/users/{user_id}/password", False)
TOKEN_CREATE = _route("tokens.create", "POST", "/api/v1/tokens", False)
TOKENS_LIST = _route("tokens.list", "GET", "/api/v1/tokens")
TOKEN_PATCH = _route("tokens.patch", "PATCH", "/api/v1/tokens/{token_id}", True)

# ---- experiments ----------------------------------------------------------------------------------
EXPERIMENTS_LIST = _route("experiments.list", "GET", "/api/v1/experiments")
EXPERIMENT_CREATE = _route("experiments.create", "POST", "/api/v1/experiments", False)
EXPERIMENT_CONTINUE = _route("experiments.continue", "POST", "/api/v1/experiments/continue", False)
EXPERIMENT_PUT = _route(
    "experiments.put_unmanaged",
    "PUT",
    "/api/v1/experiments/by-external-id/{external_experiment_id}",
    True,  # finds the experiment by its external id: a retry answers the same one
)
EXPERIMENT_GET = _route("experiments.get", "GET", "/api/v1/experiments/{experiment_id}")
EXPERIMENT_PATCH = _route("experiments.patch", "PATCH", "/api/v1/experiments/{experiment_id}")
EXPERIMENT_DELETE = _route("experiments.delete", "DELETE", "/api/v1/experiments/{experiment_id}")
EXPERIMENT_LABEL_PUT = _route(
    "experiments.add_label", "PUT", "/api/v1/experiments/{experiment_id}/labels/{label}"
)
EXPERIMENT_LABEL_DELETE = _route(
    "experiments.remove_label", "DELETE", "/api/v1/experiments/{experiment_id}/labels/{label}"
)
EXPERIMENT_LABELS = _route("experiments.labels", "GET", "/api/v1/experiment/labels")
EXPERIMENT_ACTIONS = {
    action: _route(
        f"experiments.{action}", "POST", f"/api/v1/experiments/{{experiment_id}}/{action}", True
    )
    for action in ("activate", "pause", "cancel", "kill", "archive", "unarchive")
}
"""The lifecycle actions (``POST /api/v1/experiments/{id}/<action>``), by action name."""
EXPERIMENT_TRIALS = _route(
    "experiments.trials", "GET", "/api/v1/experiments/{experiment_id}/trials"
)
EXPERIMENT_CHECKPOINTS = _route(
    "experiments.checkpoints", "GET", "/api/v1/experiments/{experiment_id}/checkpoints"
)
EXPERIMENT_MODEL_DEF = _route(
    "experiments.model_def", "GET", "/api/v1/experiments/{experiment_id}/model_def"
)
EXPERIMENT_BEST_SEARCHER_METRIC = _route(
    "experiments.best_searcher_validation_metric",
    "GET",
    "/api/v1/experiments/{experiment_id}/searcher/best_searcher_validation_metric",
)
EXPERIMENT_TENSORBOARD_FILES_DELETE = _route(
    "experiments.delete_tensorboard_files",
    "DELETE",
    "/api/v1/experiments/{experiment_id}/tensorboard-files",
    True,
)

# ---- trials and runs ------------------------------------------------------------------------------
TRIAL_GET = _route("trials.get", "GET", "/api/v1/trials/{trial_id}")
TRIAL_CREATE = _route("trials.create_unmanaged", "POST", "/api/v1/trials", False)
TRIAL_PUT = _route("trials.put_unmanaged", "PUT", "/api/v1/trials", True)
TRIAL_PATCH = _route("trials.patch_unmanaged", "PATCH", "/api/v1/trials/{trial_id}", True)
TRIAL_START = _route("trials.start_unmanaged", "POST", "/api/v1/trials/{trial_id}/start", False)
TRIAL_KILL = _route("trials.kill", "POST", "/api/v1/trials/{trial_id}/kill", True)
TRIAL_CHECKPOINTS = _route("trials.checkpoints", "GET", "/api/v1/trials/{trial_id}/checkpoints")
TRIAL_WORKLOADS = _route("trials.workloads", "GET", "/api/v1/trials/{trial_id}/workloads")
TRIAL_LOGS = _route("trials.logs", "GET", "/api/v1/trials/{trial_id}/logs")
TRIALS_METRICS = _route("trials.metrics", "GET", "/api/v1/trials/metrics/trial_metrics")
TRIALS_TRAINING_METRICS = _route(
    "trials.training_metrics", "GET", "/api/v1/trials/metrics/training_metrics"
)
TRIALS_VALIDATION_METRICS = _route(
    "trials.validation_metrics", "GET", "/api/v1/trials/metrics/validation_metrics"
)
TRIAL_REPORT_METRICS = _route("trials.report_metrics", "POST", "/api/v1/trials/{trial_id}/metrics")
TRIAL_REPORT_METRICS_BATCH = _route(
    "trials.report_metrics_batch", "POST", "/api/v1/trials/{trial_id}/metrics/batch"
)
TRIAL_PROGRESS = _route("trials.progress", "POST", "/api/v1/trials/{trial_id}/progress")
TRIAL_RUNNER_METADATA = _route(
    "trials.runner_metadata", "POST", "/api/v1/trials/{trial_id}/runner/metadata"
)
TRIAL_EARLY_EXIT = _route("trials.early_exit", "POST", "/api/v1/trials/{trial_id}/early_exit")
TRIAL_SEARCHER_OPERATION = _route(
    "trials.searcher_operation", "GET", "/api/v1/trials/{trial_id}/searcher/operation"
)
TRIAL_COMPLETE_OPERATION = _route(
    "trials.complete_searcher_operation",
    "POST",
    "/api/v1/trials/{trial_id}/searcher/completed_operation",
    True,  # the master judges each length once, so a retry is harmless
)
RUN_START = _route("runs.start", "POST", "/api/v1/runs/start", True)
RUN_METADATA_GET = _route("runs.get_metadata", "GET", "/api/v1/runs/{run_id}/metadata")
RUN_METADATA_SET = _route("runs.set_metadata", "POST", "/api/v1/runs/{run_id}/metadata")

# ---- checkpoints ----------------------------------------------------------------------------------
CHECKPOINT_GET = _route("checkpoints.get", "GET", "/api/v1/checkpoints/{uuid}")
CHECKPOINT_FILES = _route("checkpoints.files", "GET", "/checkpoints/{uuid}")
"""A checkpoint's files as one archive, proxied by the master (not under ``/api/v1``, as upstream)."""
CHECKPOINT_REPORT = _route("checkpoints.report", "POST", "/api/v1/checkpoints", True)
CHECKPOINTS_PATCH = _route("checkpoints.patch", "PATCH", "/api/v1/checkpoints")
CHECKPOINTS_DELETE = _route("checkpoints.delete", "DELETE", "/api/v1/checkpoints")
CHECKPOINTS_REMOVE_FILES = _route(
    "checkpoints.remove_files", "POST", "/api/v1/checkpoints/rm", True
)
CHECKPOINT_METADATA = _route(
    "checkpoints.set_metadata", "POST", "/api/v1/checkpoints/{uuid}/metadata", True
)

# ---- model registry -------------------------------------------------------------------------------
MODELS_LIST = _route("models.list", "GET", "/api/v1/models")
MODEL_CREATE = _route("models.create", "POST", "/api/v1/models", False)
MODEL_LABELS = _route("models.labels", "GET", "/api/v1/model/labels")
MODEL_GET = _route("models.get", "GET", "/api/v1/models/{model_name}")
MODEL_PATCH = _route("models.patch", "PATCH", "/api/v1/models/{model_name}")
MODEL_DELETE = _route("models.delete", "DELETE", "/api/v1/models/{model_name}")
MODEL_ARCHIVE = _route("models.archive", "POST", "/api/v1/models/{model_name}/archive", True)
MODEL_UNARCHIVE = _route("models.unarchive", "POST", "/api/v1/models/{model_name}/unarchive", True)
MODEL_VERSIONS = _route("models.versions", "GET", "/api/v1/models/{model_name}/versions")
MODEL_VERSION_CREATE = _route(
    "models.create_version", "POST", "/api/v1/models/{model_name}/versions", False
)
MODEL_VERSION_GET = _route(
    "models.get_version", "GET", "/api/v1/models/{model_name}/versions/{version}"
)
MODEL_VERSION_PATCH = _route(
    "models.patch_version", "PATCH", "/api/v1/models/{model_name}/versions/{version}"
)
MODEL_VERSION_DELETE = _route(
    "models.delete_version", "DELETE", "/api/v1/models/{model_name}/versions/{version}"
)

# ---- config templates ---------------------------------------------------------------------------
TEMPLATES_LIST = _route("templates.list", "GET", "/api/v1/templates")
TEMPLATE_GET = _route("templates.get", "GET", "/api/v1/templates/{template_name}")
TEMPLATE_CREATE = _route("templates.create", "POST", "/api/v1/templates/{template_name}", False)
TEMPLATE_PUT = _route("templates.put", "PUT", "/api/v1/templates/{template_name}")
TEMPLATE_PATCH_CONFIG = _route(
    "templates.set_config", "PATCH", "/api/v1/templates/{template_name}", True
)
TEMPLATE_RENAME = _route("templates.rename", "PATCH", "/api/v1/template/rename", False)
TEMPLATE_DELETE = _route("templates.delete", "DELETE", "/api/v1/templates/{template_name}")

# ---- webhooks -------------------------------------------------------------------------------------
WEBHOOKS_LIST = _route("webhooks.list", "GET", "/api/v1/webhooks")
WEBHOOK_CREATE = _route("webhooks.create", "POST", "/api/v1/webhooks", False)
WEBHOOK_PATCH = _route("webhooks.patch", "PATCH", "/api/v1/webhooks/{webhook_id}")
WEBHOOK_TEST = _route("webhooks.test", "POST", "/api/v1/webhooks/{webhook_id}/test", False)
WEBHOOK_DELETE = _route("webhooks.delete", "DELETE", "/api/v1/webhooks/{webhook_id}")

# ---- allocations, tasks and webhooks --------------------------------------------------------------
ALLOCATION_PREEMPTION = _route(
    "allocations.preemption_signal", "GET", "/api/v1/allocations/{allocation_id}/signals/preemption"
)
ALLOCATION_ACK_PREEMPTION = _route(
    "allocations.ack_preemption",
    "POST",
    "/api/v1/allocations/{allocation_id}/signals/ack_preemption",
    True,
)
TASK_LOGS_POST = _route("tasks.post_logs", "POST", "/api/v1/task/logs")
TASK_LOGS = _route("tasks.logs", "GET", "/api/v1/tasks/{task_id}/logs")
TASK_GET = _route("tasks.get", "GET", "/api/v1/tasks/{task_id}")
TASK_KILL = _route("tasks.kill", "POST", "/api/v1/tasks/{task_id}/kill", True)
TASKS_COUNT = _route("tasks.count", "GET", "/api/v1/tasks/count")

# ---- commands (tasks beyond trials) ---------------------------------------------------------------
COMMANDS = _route("commands.list", "GET", "/api/v1/commands")
COMMAND_LAUNCH = _route("commands.launch", "POST", "/api/v1/commands", False)
COMMAND_GET = _route("commands.get", "GET", "/api/v1/commands/{command_id}")
COMMAND_KILL = _route("commands.kill", "POST", "/api/v1/commands/{command_id}/kill", True)
COMMAND_SET_PRIORITY = _route(
    "commands.set_priority", "POST", "/api/v1/commands/{command_id}/set_priority", True
)
WEBHOOK_CUSTOM = _route("webhooks.custom", "POST", "/api/v1/webhooks/custom")
TRIAL_SOURCE_INFO = _route("tasks.trial_source_info", "POST", "/api/v1/trial-source-info")

# ---- cluster: message, agents, job queue, resource usage ------------------------------------------
CLUSTER_MESSAGE_GET = _route("master.get_cluster_message", "GET", "/api/v1/master/cluster_message")
CLUSTER_MESSAGE_SET = _route(
    "master.set_cluster_message", "PUT", "/api/v1/master/cluster_message", True
)
CLUSTER_MESSAGE_CLEAR = _route(
    "master.clear_cluster_message", "DELETE", "/api/v1/master/cluster_message", True
)
RESOURCE_POOLS = _route("cluster.resource_pools", "GET", "/api/v1/resource-pools")
AGENTS = _route("cluster.agents", "GET", "/api/v1/agents")
AGENT_GET = _route("cluster.agent", "GET", "/api/v1/agents/{agent_id}")
AGENT_ENABLE = _route("cluster.enable_agent", "POST", "/api/v1/agents/{agent_id}/enable", True)
AGENT_DISABLE = _route("cluster.disable_agent", "POST", "/api/v1/agents/{agent_id}/disable", True)
SLOT_GET = _route("cluster.slot", "GET", "/api/v1/agents/{agent_id}/slots/{slot_id}")
SLOT_ENABLE = _route(
    "cluster.enable_slot", "POST", "/api/v1/agents/{agent_id}/slots/{slot_id}/enable", True
)
SLOT_DISABLE = _route(
    "cluster.disable_slot", "POST", "/api/v1/agents/{agent_id}/slots/{slot_id}/disable", True
)
JOB_QUEUE = _route("cluster.jobs", "GET", "/api/v1/job-queues")
JOB_QUEUE_V2 = _route("cluster.jobs_v2", "GET", "/api/v1/job-queues-v2")
JOB_QUEUE_UPDATE = _route("cluster.update_jobs", "POST", "/api/v1/job-queues", False)
TASKS = _route("cluster.tasks", "GET", "/api/v1/tasks")
ALLOCATION_RAW = _route("resources.allocation_raw", "GET", "/api/v1/resources/allocation/raw")
ALLOCATION_AGGREGATED = _route(
    "resources.allocation_aggregated", "GET", "/api/v1/resources/allocation/aggregated"
)

# ---- metrics of the trials that used a checkpoint or model version --------------------------------
CHECKPOINT_METRICS = _route("checkpoints.metrics", "GET", "/api/v1/checkpoints/{uuid}/metrics")
MODEL_VERSION_METRICS = _route(
    "models.version_metrics", "GET", "/api/v1/models/{model_name}/versions/{version}/metrics"
)

# ---- TensorBoards ---------------------------------------------------------------------------------
TENSORBOARDS_LIST = _route("tensorboards.list", "GET", "/api/v1/tensorboards")
TENSORBOARD_LAUNCH = _route("tensorboards.launch", "POST", "/api/v1/tensorboards", False)
TENSORBOARD_GET = _route("tensorboards.get", "GET", "/api/v1/tensorboards/{tensorboard_id}")
TENSORBOARD_KILL = _route(
    "tensorboards.kill", "POST", "/api/v1/tensorboards/{tensorboard_id}/kill", True
)
TENSORBOARD_SET_PRIORITY = _route(
    "tensorboards.set_priority", "POST", "/api/v1/tensorboards/{tensorboard_id}/set_priority", True
)

# ---- notebooks ------------------------------------------------------------------------------------
NOTEBOOKS_LIST = _route("notebooks.list", "GET", "/api/v1/notebooks")
NOTEBOOK_LAUNCH = _route("notebooks.launch", "POST", "/api/v1/notebooks", False)
NOTEBOOK_GET = _route("notebooks.get", "GET", "/api/v1/notebooks/{notebook_id}")
NOTEBOOK_KILL = _route("notebooks.kill", "POST", "/api/v1/notebooks/{notebook_id}/kill", True)
NOTEBOOK_REPORT_IDLE = _route(
    "notebooks.report_idle", "PUT", "/api/v1/notebooks/{notebook_id}/report_idle", True
)

# ---- workspaces -----------------------------------------------------------------------------------
WORKSPACES_LIST = _route("workspaces.list", "GET", "/api/v1/workspaces")
WORKSPACE_CREATE = _route("workspaces.create", "POST", "/api/v1/workspaces", False)
WORKSPACE_GET = _route("workspaces.get", "GET", "/api/v1/workspaces/{workspace_id}")
WORKSPACE_PATCH = _route("workspaces.patch", "PATCH", "/api/v1/workspaces/{workspace_id}")
WORKSPACE_DELETE = _route("workspaces.delete", "DELETE", "/api/v1/workspaces/{workspace_id}")
WORKSPACE_ARCHIVE = _route(
    "workspaces.archive", "POST", "/api/v1/workspaces/{workspace_id}/archive", True
)
WORKSPACE_UNARCHIVE = _route(
    "workspaces.unarchive", "POST", "/api/v1/workspaces/{workspace_id}/unarchive", True
)
WORKSPACE_PIN = _route("workspaces.pin", "POST", "/api/v1/workspaces/{workspace_id}/pin", True)
WORKSPACE_UNPIN = _route(
    "workspaces.unpin", "POST", "/api/v1/workspaces/{workspace_id}/unpin", True
)
WORKSPACE_PROJECTS = _route(
    "workspaces.projects", "GET", "/api/v1/workspaces/{workspace_id}/projects"
)
WORKSPACE_POOLS = _route(
    "workspaces.resource_pools",
    "GET",
    "/api/v1/workspaces/{workspace_id}/available-resource-pools",
)

# ---- projects (and moving experiments between them) -----------------------------------------------
PROJECT_CREATE = _route(
    "projects.create", "POST", "/api/v1/workspaces/{workspace_id}/projects", False
)
PROJECT_GET = _route("projects.get", "GET", "/api/v1/projects/{project_id}")
PROJECT_GET_BY_KEY = _route("projects.get_by_key", "GET", "/api/v1/projects/key/{key}")
PROJECT_PATCH = _route("projects.patch", "PATCH", "/api/v1/projects/{project_id}")
PROJECT_DELETE = _route("projects.delete", "DELETE", "/api/v1/projects/{project_id}")
PROJECT_ARCHIVE = _route("projects.archive", "POST", "/api/v1/projects/{project_id}/archive", True)
PROJECT_UNARCHIVE = _route(
    "projects.unarchive", "POST", "/api/v1/projects/{project_id}/unarchive", True
)
PROJECT_MOVE = _route("projects.move", "POST", "/api/v1/projects/{project_id}/move", True)
PROJECT_ADD_NOTE = _route("projects.add_note", "POST", "/api/v1/projects/{project_id}/notes", False)
PROJECT_PUT_NOTES = _route("projects.put_notes", "PUT", "/api/v1/projects/{project_id}/notes", True)
PROJECT_COLUMNS = _route("projects.columns", "GET", "/api/v1/projects/{project_id}/columns")
EXPERIMENT_MOVE = _route(
    "experiments.move", "POST", "/api/v1/experiments/{experiment_id}/move", True
)
EXPERIMENTS_MOVE = _route(
    "projects.move_experiments", "POST", "/api/v1/projects/{project_id}/experiments/move", True
)

# ---- user groups and RBAC -------------------------------------------------------------------------
GROUP_CREATE = _route("groups.create", "POST", "/api/v1/groups", False)
GROUPS_SEARCH = _route("groups.search", "POST", "/api/v1/groups/search", True)
GROUP_GET = _route("groups.get", "GET", "/api/v1/groups/{group_id}")
GROUP_UPDATE = _route("groups.update", "PUT", "/api/v1/groups/{group_id}", False)
GROUP_DELETE = _route("groups.delete", "DELETE", "/api/v1/groups/{group_id}", True)
ROLES_LIST = _route("rbac.list_roles", "POST", "/api/v1/roles/search", True)
ROLES_ASSIGNABLE = _route(
    "rbac.roles_assignable", "POST", "/api/v1/roles/search/by-assignability", True
)
ROLES_BY_IDS = _route("rbac.roles_by_ids", "POST", "/api/v1/roles/search/by-ids", True)
ROLES_OF_USER = _route("rbac.roles_of_user", "GET", "/api/v1/roles/search/by-user/{user_id}")
ROLES_OF_GROUP = _route("rbac.roles_of_group", "GET", "/api/v1/roles/search/by-group/{group_id}")
ROLES_ASSIGN = _route("rbac.assign_roles", "POST", "/api/v1/roles/add-assignments", True)
ROLES_REMOVE = _route("rbac.remove_assignments", "POST", "/api/v1/roles/remove-assignments", True)
PERMISSIONS_SUMMARY = _route("rbac.permissions_summary", "GET", "/api/v1/permissions/summary")
ROLES_ON_WORKSPACE = _route(
    "rbac.roles_on_workspace", "GET", "/api/v1/roles/workspace/{workspace_id}"
)
