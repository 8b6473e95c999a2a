"""Upstream's generated ``bindings``: one function per REST call and one class per message.

The functions are those upstream's SDK and user scripts call (``get_GetExperiment(session,
experimentId=1)``, ``post_PauseExperiment(session, id=1)``...), with upstream's names and keyword
parameters. Each one sends its request through a route of det's typed client table
(``determined.client.ROUTES``), so the paths are declared once and checked against the master's
OpenAPI document. ``session`` is a :class:`determined.common.api.Session` (or any
``determined.client.Session``). Errors are det's client errors, which
``determined.common.api.errors`` names as upstream did (``except errors.NotFoundException``).

Upstream calls whose REST route det's master does not serve (workspaces, projects, resource-pool
bindings, ...) are not provided; ``docs/compatibility.md`` lists them.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from determined.client import ROUTES, APIError
from determined.client import Session as ClientSession
from determined.client import _routes as routes
from determined.common.api._messages import *  # noqa: F403  (upstream's names live here)
from determined.common.api._messages import (
    DetEnum,
    Message,
    v1CreateExperimentResponse,
    v1CreateTrialResponse,
    v1GetBestSearcherValidationMetricResponse,
    v1GetCheckpointResponse,
    v1GetExperimentCheckpointsResponse,
    v1GetExperimentResponse,
    v1GetExperimentsResponse,
    v1GetExperimentTrialsResponse,
    v1GetMasterConfigResponse,
    v1GetMasterResponse,
    v1GetMeResponse,
    v1GetMetricsResponse,
    v1GetModelDefResponse,
    v1GetModelLabelsResponse,
    v1GetModelResponse,
    v1GetModelsResponse,
    v1GetModelVersionResponse,
    v1GetModelVersionsResponse,
    v1GetTrainingMetricsResponse,
    v1GetTrialCheckpointsResponse,
    v1GetTrialMetricsByCheckpointResponse,
    v1GetTrialMetricsByModelVersionResponse,
    v1GetTrialResponse,
    v1GetUserByUsernameResponse,
    v1GetUserResponse,
    v1GetUsersResponse,
    v1GetValidationMetricsResponse,
    v1LoginResponse,
    v1PatchExperimentResponse,
    v1PatchModelResponse,
    v1PatchModelVersionResponse,
    v1PatchUserResponse,
    v1PostCheckpointMetadataResponse,
    v1PostModelResponse,
    v1PostModelVersionResponse,
    v1PostUserResponse,
    v1PutExperimentResponse,
    v1PutTrialResponse,
    v1StartTrialResponse,
    v1TaskLogsResponse,
    v1TrialLogsResponse,
)

APIHttpError = APIError
"""Upstream's error for a failed call: det's client raises ``APIError`` and its subclasses."""
APIHttpStreamError = APIError


@dataclasses.dataclass(frozen=True)
class _Binding:
    """How one upstream function maps onto a route of det's client table."""

    route: str
    path: dict[str, str] = dataclasses.field(default_factory=dict)
    """Upstream's keyword -> the route's path parameter."""
    query: tuple[str, ...] = ()
    """Upstream's keywords sent as query parameters (under the same names)."""
    required: tuple[str, ...] = ()
    """The query keywords upstream requires (the others default to ``None``)."""
    body: bool = False
    response: type[Message] | None = None
    stream: bool = False


_LIST = ("limit", "offset", "orderBy")
_LOGS = (
    "agentIds",
    "containerIds",
    "enableRegex",
    "follow",
    "levels",
    "limit",
    "orderBy",
    "rankIds",
    "searchText",
    "sources",
    "stdtypes",
    "timestampAfter",
    "timestampBefore",
)
_CHECKPOINTS = (*_LIST, "sortByAttr", "sortByMetric", "states")
_EXP = {"experimentId": "experiment_id"}
_ID_EXP = {"id": "experiment_id"}
_MODEL = {"modelName": "model_name"}
_VERSION = {"modelName": "model_name", "modelVersionNum": "version"}

_BINDINGS: dict[str, _Binding] = {
    "get_GetMaster": _Binding("master.info", response=v1GetMasterResponse),
    "post_Login": _Binding("auth.login", body=True, response=v1LoginResponse),
    "post_Logout": _Binding("auth.logout"),
    "get_GetMasterConfig": _Binding("master.config", response=v1GetMasterConfigResponse),
    # users
    "get_GetMe": _Binding("users.me", response=v1GetMeResponse),
    "get_GetUsers": _Binding(
        "users.list",
        query=("active", "admin", *_LIST, "name", "roleIdAssignedDirectlyToUser", "sortBy"),
        response=v1GetUsersResponse,
    ),
    "post_PostUser": _Binding("users.create", body=True, response=v1PostUserResponse),
    "get_GetUser": _Binding("users.get", {"userId": "user_id"}, response=v1GetUserResponse),
    "get_GetUserByUsername": _Binding(
        "users.get_by_name", {"username": "username"}, response=v1GetUserByUsernameResponse
    ),
    "patch_PatchUser": _Binding(
        "users.patch", {"userId": "user_id"}, body=True, response=v1PatchUserResponse
    ),
    # experiments
    "get_GetExperiments": _Binding(
        "experiments.list",
        query=(
            "archived",
            "description",
            "experimentIdFilter_gt",
            "experimentIdFilter_gte",
            "experimentIdFilter_incl",
            "experimentIdFilter_lt",
            "experimentIdFilter_lte",
            "experimentIdFilter_notIn",
            "labels",
            *_LIST,
            "name",
            "projectId",
            "showTrialData",
            "sortBy",
            "states",
            "userIds",
            "users",
        ),
        response=v1GetExperimentsResponse,
    ),
    "post_CreateExperiment": _Binding(
        "experiments.create", body=True, response=v1CreateExperimentResponse
    ),
    "get_GetExperiment": _Binding("experiments.get", _EXP, response=v1GetExperimentResponse),
    "put_PutExperiment": _Binding(
        "experiments.put_unmanaged",
        {"externalExperimentId": "external_experiment_id"},
        body=True,
        response=v1PutExperimentResponse,
    ),
    "patch_PatchExperiment": _Binding(
        "experiments.patch",
        {"experiment_id": "experiment_id"},
        body=True,
        response=v1PatchExperimentResponse,
    ),
    "delete_DeleteExperiment": _Binding("experiments.delete", _EXP),
    **{
        f"post_{action.capitalize()}Experiment": _Binding(f"experiments.{action}", _ID_EXP)
        for action in ("activate", "pause", "cancel", "kill", "archive", "unarchive")
    },
    "get_GetExperimentTrials": _Binding(
        "experiments.trials",
        _EXP,
        query=(*_LIST, "sortBy", "states"),
        response=v1GetExperimentTrialsResponse,
    ),
    "get_GetExperimentCheckpoints": _Binding(
        "experiments.checkpoints",
        _ID_EXP,
        query=_CHECKPOINTS,
        response=v1GetExperimentCheckpointsResponse,
    ),
    "get_GetModelDef": _Binding("experiments.model_def", _EXP, response=v1GetModelDefResponse),
    "get_GetBestSearcherValidationMetric": _Binding(
        "experiments.best_searcher_validation_metric",
        _EXP,
        response=v1GetBestSearcherValidationMetricResponse,
    ),
    # trials
    "get_GetTrial": _Binding("trials.get", {"trialId": "trial_id"}, response=v1GetTrialResponse),
    "post_KillTrial": _Binding("trials.kill", {"id": "trial_id"}),
    "post_CreateTrial": _Binding(
        "trials.create_unmanaged", body=True, response=v1CreateTrialResponse
    ),
    "put_PutTrial": _Binding("trials.put_unmanaged", body=True, response=v1PutTrialResponse),
    "post_StartTrial": _Binding(
        "trials.start_unmanaged",
        {"trialId": "trial_id"},
        body=True,
        response=v1StartTrialResponse,
    ),
    "get_GetTrialCheckpoints": _Binding(
        "trials.checkpoints",
        {"id": "trial_id"},
        query=_CHECKPOINTS,
        response=v1GetTrialCheckpointsResponse,
    ),
    "get_TrialLogs": _Binding(
        "trials.logs",
        {"trialId": "trial_id"},
        query=_LOGS,
        response=v1TrialLogsResponse,
        stream=True,
    ),
    "get_TaskLogs": _Binding(
        "tasks.logs",
        {"taskId": "task_id"},
        query=("allocationIds", *_LOGS),
        response=v1TaskLogsResponse,
        stream=True,
    ),
    "get_GetMetrics": _Binding(
        "trials.metrics",
        query=("group", "trialIds"),
        required=("group", "trialIds"),
        response=v1GetMetricsResponse,
        stream=True,
    ),
    "get_GetTrainingMetrics": _Binding(
        "trials.training_metrics",
        query=("trialIds",),
        response=v1GetTrainingMetricsResponse,
        stream=True,
    ),
    "get_GetValidationMetrics": _Binding(
        "trials.validation_metrics",
        query=("trialIds",),
        response=v1GetValidationMetricsResponse,
        stream=True,
    ),
    # checkpoints
    "get_GetCheckpoint": _Binding(
        "checkpoints.get", {"checkpointUuid": "uuid"}, response=v1GetCheckpointResponse
    ),
    "post_PostCheckpointMetadata": _Binding(
        "checkpoints.set_metadata",
        {"checkpoint_uuid": "uuid"},
        body=True,
        response=v1PostCheckpointMetadataResponse,
    ),
    "delete_DeleteCheckpoints": _Binding("checkpoints.delete", body=True),
    "post_CheckpointsRemoveFiles": _Binding("checkpoints.remove_files", body=True),
    "get_GetTrialMetricsByCheckpoint": _Binding(
        "checkpoints.metrics",
        {"checkpointUuid": "uuid"},
        query=("metricGroup", "trialSourceInfoType"),
        response=v1GetTrialMetricsByCheckpointResponse,
    ),
    # model registry
    "get_GetModels": _Binding(
        "models.list",
        query=(
            "archived",
            "description",
            "id",
            "labels",
            *_LIST,
            "name",
            "sortBy",
            "userIds",
            "users",
            "workspaceIds",
            "workspaceNames",
        ),
        response=v1GetModelsResponse,
    ),
    "post_PostModel": _Binding("models.create", body=True, response=v1PostModelResponse),
    "get_GetModelLabels": _Binding(
        "models.labels", query=("workspaceId",), response=v1GetModelLabelsResponse
    ),
    "get_GetModel": _Binding("models.get", _MODEL, response=v1GetModelResponse),
    "patch_PatchModel": _Binding("models.patch", _MODEL, body=True, response=v1PatchModelResponse),
    "delete_DeleteModel": _Binding("models.delete", _MODEL),
    "post_ArchiveModel": _Binding("models.archive", _MODEL),
    "post_UnarchiveModel": _Binding("models.unarchive", _MODEL),
    "get_GetModelVersions": _Binding(
        "models.versions", _MODEL, query=(*_LIST, "sortBy"), response=v1GetModelVersionsResponse
    ),
    "post_PostModelVersion": _Binding(
        "models.create_version", _MODEL, body=True, response=v1PostModelVersionResponse
    ),
    "get_GetModelVersion": _Binding(
        "models.get_version", _VERSION, response=v1GetModelVersionResponse
    ),
    "patch_PatchModelVersion": _Binding(
        "models.patch_version", _VERSION, body=True, response=v1PatchModelVersionResponse
    ),
    "delete_DeleteModelVersion": _Binding("models.delete_version", _VERSION),
    "get_GetTrialMetricsByModelVersion": _Binding(
        "models.version_metrics",
        _VERSION,
        query=("metricGroup", "trialSourceInfoType"),
        response=v1GetTrialMetricsByModelVersionResponse,
    ),
}


def _query_value(value: Any) -> Any:
    """A keyword's value as grpc-gateway reads it from a query string."""
    if isinstance(value, DetEnum):
        return value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return [_query_value(v) for v in value]
    return value


def _body_json(body: Any) -> Any:
    return body.to_json(True) if isinstance(body, Message) else body


def _make_function(name: str, binding: _Binding) -> Callable[..., Any]:
    route = ROUTES[binding.route]

    def call(session: ClientSession, **kwargs: Any) -> Any:
        expected = set(binding.path) | set(binding.query) | ({"body"} if binding.body else set())
        unknown = set(kwargs) - expected
        required = set(binding.path) | set(binding.required) | ({"body"} if binding.body else set())
        missing = required - set(kwargs)
        if unknown or missing:
            raise TypeError(
                f"{name}() got unexpected keywords {sorted(unknown)}"
                if unknown
                else f"{name}() missing required keywords {sorted(missing)}"
            )
        path_params = {param: kwargs[keyword] for keyword, param in binding.path.items()}
        params = {k: _query_value(kwargs.get(k)) for k in binding.query}
        if binding.stream:
            return _stream(session, route, binding, params, path_params)
        answer = routes.call(
            session,
            route,
            body=_body_json(kwargs["body"]) if binding.body else None,
            params=params,
            **path_params,
        )
        return binding.response.from_json(answer) if binding.response is not None else None

    parameters = [inspect.Parameter("session", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    keywords = [*(["body"] if binding.body else []), *binding.path, *binding.required]
    parameters += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY) for k in keywords]
    parameters += [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None)
        for k in binding.query
        if k not in binding.required
    ]
    call.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    call.__name__ = call.__qualname__ = name
    call.__module__ = __name__
    call.__doc__ = f"``{route.method} {route.template}`` (det's client route ``{route.name}``)."
    return call


def _stream(
    session: ClientSession,
    route: routes.Route,
    binding: _Binding,
    params: dict[str, Any],
    path_params: dict[str, Any],
) -> Iterator[Any]:
    assert binding.response is not None
    for result in routes.stream(session, route, params=params, **path_params):
        yield binding.response.from_json(result)


for _name, _binding in _BINDINGS.items():
    if _binding.route in ROUTES:  # routes another distribution of det has not declared are left out
        globals()[_name] = _make_function(_name, _binding)
del _name, _binding
