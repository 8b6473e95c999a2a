"""Call det-master's routes through upstream Determined 0.38.1's generated bindings; run in the
upstream-client venv (it imports upstream's ``determined``, not det's).

Usage: ``python upstream_bindings_driver.py MASTER_URL IDS_JSON OUT_JSON``. IDS_JSON is what
``populated_master.populate`` returned. Every call goes through ``Driver.call``, which parses the
answer with upstream's own response class (the bindings function does that), then checks the parsed
object against the class's declared field types: a required field missing or null, a value of the wrong
JSON type, or an enum value upstream does not know is a failure. OUT_JSON maps each bindings function
name to the list of its outcomes ("ok" or the error).
"""

from __future__ import annotations

import base64
import collections.abc
import datetime
import enum
import itertools
import json
import pathlib
import sys
import time
import typing
import uuid
from typing import Any

from determined.common import api
from determined.common.api import bindings as b

STREAM_LIMIT = 500  # entries read from one streaming answer (all of them on this small master)


class Driver:
    """Calls bindings functions and records each outcome under the function's name."""

    def __init__(self, master: str) -> None:
        self.master = master
        self.unauth = api.UnauthSession(master, cert=None, max_retries=None)
        self.session: Any = self.unauth
        self.results: dict[str, list[str]] = {}
        self._hints: dict[type, dict[str, Any]] = {}

    def call(self, name: str, *, session: Any = None, **kwargs: Any) -> Any:
        """``bindings.<name>(session, **kwargs)``; the parsed answer, or None when it failed."""
        outcomes = self.results.setdefault(name, [])
        started = time.monotonic()
        try:
            answer = getattr(b, name)(session or self.session, **kwargs)
            if isinstance(answer, collections.abc.Iterator):
                answer = list(itertools.islice(answer, STREAM_LIMIT))
                items = answer
            else:
                items = [] if answer is None else [answer]
            problems: list[str] = []
            for item in items:
                self.check(item, type(item), type(item).__name__, problems)
        except b.APIHttpError as exc:
            response = getattr(exc, "response", None)
            text = response.text[:400] if response is not None else ""
            outcomes.append(f"{exc}: {text}")
            return None
        except Exception as exc:  # a KeyError/ValueError from from_json is the failure to find
            outcomes.append(f"{type(exc).__name__}: {exc}")
            return None
        finally:
            if time.monotonic() - started > 1:
                print(f"{name}: {time.monotonic() - started:.1f} s", file=sys.stderr)
        outcomes.append("ok" if not problems else "; ".join(problems[:5]))
        return answer

    def hints(self, cls: type) -> dict[str, Any]:
        if cls not in self._hints:
            self._hints[cls] = typing.get_type_hints(cls.__init__, vars(b))  # type: ignore[misc]
            self._hints[cls].pop("return", None)
        return self._hints[cls]

    def check(self, value: Any, hint: Any, where: str, problems: list[str]) -> None:
        """Append to ``problems`` where ``value`` (as from_json left it) is not of type ``hint``."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Union:
            if value is None or isinstance(value, b.Unset):
                return  # an optional field, absent or null
            hint = next(a for a in args if a not in (type(None), b.Unset))
            origin, args = typing.get_origin(hint), typing.get_args(hint)
        if hint is typing.Any:
            return
        if value is None:
            problems.append(f"{where}: required {getattr(hint, '__name__', hint)} is missing/null")
            return
        if origin in (list, collections.abc.Sequence):
            if not isinstance(value, list):
                problems.append(f"{where}: {type(value).__name__} where a list is required")
                return
            for index, item in enumerate(value):
                self.check(item, args[0], f"{where}[{index}]", problems)
            return
        if origin in (dict, collections.abc.Mapping):
            if not isinstance(value, dict):
                problems.append(f"{where}: {type(value).__name__} where an object is required")
                return
            for key, item in value.items():
                self.check(item, args[1], f"{where}.{key}", problems)
            return
        expected: tuple[type, ...] = (hint,)
        if hint is float:
            expected = (int, float)
        if not isinstance(value, expected) or (hint in (int, float) and isinstance(value, bool)):
            problems.append(f"{where}: {value!r} is not {getattr(hint, '__name__', hint)}")
            return
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return  # from_json already refused a value upstream's enum lacks
        if isinstance(hint, type) and issubclass(hint, b.Printable):
            for field, field_hint in self.hints(hint).items():
                self.check(getattr(value, field, None), field_hint, f"{where}.{field}", problems)


def context_files(directory: pathlib.Path) -> list[b.v1File]:
    """The model definition of an experiment, as upstream's CLI sends it (one file per entry)."""
    files = []
    for path in sorted(directory.iterdir()):
        content = base64.b64encode(path.read_bytes()).decode()
        files.append(
            b.v1File(
                path=path.name, type=ord("0"), content=content, mtime="0", mode=0o644, uid=0, gid=0
            )
        )
    return files


def run(d: Driver, ids: dict[str, Any]) -> None:
    """Every shared route, in an order where each call finds what it needs."""
    exps, trials = ids["experiments"], ids["trials"]
    now = datetime.datetime.now(datetime.timezone.utc)
    config_yaml = json.dumps(ids["config"])  # JSON is YAML
    files = context_files(pathlib.Path(ids["context"]))

    d.call("get_health", session=d.unauth)
    login = d.call(
        "post_Login", session=d.unauth, body=b.v1LoginRequest(username="admin", password="")
    )
    d.session = api.Session(d.master, "admin", login.token, None, max_retries=None)

    # The master.
    d.call("get_GetMaster")
    d.call("get_GetMasterConfig")
    d.call("get_GetMe")
    d.call("get_CurrentUser")
    agents(d)
    d.call("get_GetResourcePools")
    d.call("get_GetClusterMessage")
    d.call(
        "put_SetClusterMessage",
        body=b.v1SetClusterMessageRequest(
            message="wire test", startTime=now.isoformat().replace("+00:00", "Z"), duration="1h"
        ),
    )
    d.call("get_GetClusterMessage")
    d.call("delete_DeleteClusterMessage")
    d.call(
        "patch_PatchMasterConfig",
        body=b.v1PatchMasterConfigRequest(
            config=b.v1Config(log=b.v1LogConfig(level=b.v1LogLevel.INFO)),
            fieldMask=b.protobufFieldMask(paths=["log.level"]),
        ),
    )
    d.call("get_MasterLogs", limit=5)
    d.call(
        "get_ResourceAllocationRaw",
        timestampAfter=(now - datetime.timedelta(days=1)).isoformat().replace("+00:00", "Z"),
        timestampBefore=(now + datetime.timedelta(days=1)).isoformat().replace("+00:00", "Z"),
    )
    d.call(
        "get_ResourceAllocationAggregated",
        startDate=(now - datetime.timedelta(days=2)).strftime("%Y-%m-%d"),
        endDate=now.strftime("%Y-%m-%d"),
        period=b.v1ResourceAllocationAggregationPeriod.DAILY,
    )

    # Users, tokens, groups, roles.
    user = d.call(
        "post_PostUser",
        body=b.v1PostUserRequest(
            user=b.v1User(username="wire-user", admin=False, active=True), password="Wire-pass-1"
        ),
    )
    user_id = user.user.id
    d.call("get_GetUsers")
    d.call("get_GetUser", userId=user_id)
    d.call("get_GetUserByUsername", username="wire-user")
    d.call("patch_PatchUser", userId=user_id, body=b.v1PatchUser(displayName="Wire User"))
    d.call("post_SetUserPassword", userId=user_id, body="Wire-pass-2")
    d.call("get_GetUserSetting")
    token = d.call(
        "post_PostAccessToken", body=b.v1PostAccessTokenRequest(userId=user_id, description="wire")
    )
    d.call("get_GetAccessTokens")
    d.call(
        "patch_PatchAccessToken",
        tokenId=token.tokenId,
        body=b.v1PatchAccessTokenRequest(tokenId=token.tokenId, description="wire 2"),
    )
    group = d.call("post_CreateGroup", body=b.v1CreateGroupRequest(name="wire-group", addUsers=[]))
    group_id = group.group.groupId
    d.call("post_GetGroups", body=b.v1GetGroupsRequest(limit=10))
    d.call("get_GetGroup", groupId=group_id)
    d.call(
        "put_UpdateGroup",
        groupId=group_id,
        body=b.v1UpdateGroupRequest(groupId=group_id, name="wire-group-2", addUsers=[user_id]),
    )
    roles = d.call("post_ListRoles", body=b.v1ListRolesRequest(limit=20))
    role_id = next(r.roleId for r in roles.roles if r.name != "ClusterAdmin")
    d.call("post_GetRolesByID", body=b.v1GetRolesByIDRequest(roleIds=[role_id]))
    d.call(
        "post_SearchRolesAssignableToScope",
        body=b.v1SearchRolesAssignableToScopeRequest(limit=10, workspaceId=1),
    )
    assignment = b.v1RoleAssignment(role=b.v1Role(roleId=role_id), scopeWorkspaceId=1)
    d.call(
        "post_AssignRoles",
        body=b.v1AssignRolesRequest(
            userRoleAssignments=[b.v1UserRoleAssignment(userId=user_id, roleAssignment=assignment)],
            groupRoleAssignments=[
                b.v1GroupRoleAssignment(groupId=group_id, roleAssignment=assignment)
            ],
        ),
    )
    d.call("get_GetRolesAssignedToUser", userId=user_id)
    d.call("get_GetRolesAssignedToGroup", groupId=group_id)
    d.call("get_GetGroupsAndUsersAssignedToWorkspace", workspaceId=1)
    d.call("get_GetPermissionsSummary")
    d.call(
        "post_RemoveAssignments",
        body=b.v1RemoveAssignmentsRequest(
            userRoleAssignments=[b.v1UserRoleAssignment(userId=user_id, roleAssignment=assignment)]
        ),
    )

    # Workspaces and projects.
    ws = d.call("post_PostWorkspace", body=b.v1PostWorkspaceRequest(name="wire-ws")).workspace.id
    ws2 = d.call("post_PostWorkspace", body=b.v1PostWorkspaceRequest(name="wire-ws-b")).workspace.id
    d.call("get_GetWorkspaces")
    d.call("get_GetWorkspace", id=ws)
    d.call("patch_PatchWorkspace", id=ws, body=b.v1PatchWorkspace(name="wire-ws-2"))
    d.call("post_PinWorkspace", id=ws)
    d.call("get_GetWorkspaces")
    d.call("post_UnpinWorkspace", id=ws)
    d.call("get_ListRPsBoundToWorkspace", workspaceId=ws)
    project = d.call(
        "post_PostProject",
        workspaceId=ws,
        body=b.v1PostProjectRequest(name="wire-project", workspaceId=ws, key="WIRE"),
    ).project.id
    spare_project = d.call(
        "post_PostProject",
        workspaceId=ws,
        body=b.v1PostProjectRequest(name="wire-spare", workspaceId=ws, key="WSPR"),
    ).project.id
    d.call("get_GetWorkspaceProjects", id=ws)
    d.call("get_GetProject", id=project)
    d.call("get_GetProjectByKey", key="WIRE")
    d.call("patch_PatchProject", id=project, body=b.v1PatchProject(description="wire"))
    d.call("post_AddProjectNote", projectId=project, body=b.v1Note(name="n1", contents="c1"))
    d.call(
        "put_PutProjectNotes",
        projectId=project,
        body=b.v1PutProjectNotesRequest(
            projectId=project, notes=[b.v1Note(name="n2", contents="c2")]
        ),
    )
    d.call("get_GetProjectColumns", id=1)
    d.call("get_GetProjectColumns", id=project)
    d.call("post_ArchiveProject", id=spare_project)
    d.call("post_UnarchiveProject", id=spare_project)
    d.call(
        "post_MoveProject",
        projectId=spare_project,
        body=b.v1MoveProjectRequest(destinationWorkspaceId=ws2, projectId=spare_project),
    )
    d.call("post_ArchiveWorkspace", id=ws2)
    d.call("get_GetWorkspaces")
    d.call("post_UnarchiveWorkspace", id=ws2)
    config_policies(d, ws)

    # Experiments in every state, and the ones this run creates.
    created = d.call(
        "post_CreateExperiment",
        body=b.v1CreateExperimentRequest(
            config=config_yaml, modelDefinition=files, activate=False, projectId=project
        ),
    )
    d.call(
        "post_CreateExperiment",
        body=b.v1CreateExperimentRequest(
            config=config_yaml, modelDefinition=files, validateOnly=True
        ),
    )
    created_id = created.experiment.id if created else exps["paused"]
    d.call("get_GetExperiments")
    d.call("get_GetExperiments", projectId=project)
    for exp_id in [*exps.values(), created_id]:
        d.call("get_GetExperiment", experimentId=exp_id)
        d.call("get_GetExperimentTrials", experimentId=exp_id)
        d.call("get_GetExperimentCheckpoints", id=exp_id)
        d.call("get_GetExperimentValidationHistory", experimentId=exp_id)
    d.call("get_GetExperimentLabels")
    d.call("get_GetModelDef", experimentId=exps["completed"])
    d.call("get_GetBestSearcherValidationMetric", experimentId=exps["completed"])
    d.call("put_PutExperimentLabel", experimentId=exps["completed"], label="wire-extra")
    d.call("delete_DeleteExperimentLabel", experimentId=exps["completed"], label="wire-extra")
    d.call(
        "patch_PatchExperiment",
        experiment_id=exps["completed"],
        body=b.v1PatchExperiment(id=exps["completed"], notes="wire notes"),
    )
    d.call("post_PreviewHPSearch", body=b.v1PreviewHPSearchRequest(config=ids["config"]))
    d.call("post_ArchiveExperiment", id=exps["completed"])
    d.call("post_UnarchiveExperiment", id=exps["completed"])
    d.call(
        "post_MoveExperiment",
        experimentId=exps["canceled"],
        body=b.v1MoveExperimentRequest(destinationProjectId=project, experimentId=exps["canceled"]),
    )
    d.call(
        "post_MoveExperiments",
        projectId=project,
        body=b.v1MoveExperimentsRequest(
            destinationProjectId=1, experimentIds=[exps["canceled"]], projectId=project
        ),
    )
    d.call("post_ActivateExperiment", id=created_id)
    d.call("post_PauseExperiment", id=created_id)
    d.call("post_CancelExperiment", id=created_id)
    d.call("post_KillExperiment", id=created_id)
    bulk_experiments(d, exps["completed"], project, config_yaml, files)
    d.call(
        "post_ContinueExperiment",
        body=b.v1ContinueExperimentRequest(id=exps["errored"], overrideConfig="max_restarts: 0\n"),
    )
    d.call("get_GetJobsV2")
    d.call("get_GetJobs")
    job_id = d.call("get_GetExperiment", experimentId=exps["active"]).experiment.jobId
    d.call(
        "post_UpdateJobQueue",
        body=b.v1UpdateJobQueueRequest(updates=[b.v1QueueControl(jobId=job_id, weight=2)]),
    )

    # Trials, their metrics, logs and checkpoints.
    for trial_id in [t for found in trials.values() for t in found]:
        d.call("get_GetTrial", trialId=trial_id)
        d.call("get_GetTrialCheckpoints", id=trial_id)
        d.call("get_GetTrialWorkloads", trialId=trial_id)
        d.call("get_TrialLogs", trialId=trial_id, follow=False)
        d.call("get_TrialLogsFields", trialId=trial_id, follow=False)
    d.call("post_SearchRuns", body=b.v1SearchRunsRequest(limit=0, sort="id=desc"))
    d.call("post_SearchRuns", body=b.v1SearchRunsRequest(limit=2, filter=_runs_of(exps["errored"])))
    done = trials["completed"][0]
    d.call("get_GetMetrics", trialIds=[done], group="training")
    d.call("get_GetMetrics", trialIds=[done], group="validation")
    d.call("get_GetTrainingMetrics", trialIds=[done])
    d.call("get_GetValidationMetrics", trialIds=[done])
    metric_reads(d, exps, done, config_yaml, files)
    checkpoint = d.call("get_GetTrialCheckpoints", id=done).checkpoints[0]
    spare_ckpt = d.call("get_GetTrialCheckpoints", id=trials["spare"][0]).checkpoints[0].uuid
    d.call("get_GetCheckpoint", checkpointUuid=checkpoint.uuid)
    d.call("get_GetTrialMetricsByCheckpoint", checkpointUuid=checkpoint.uuid)
    checkpoint.metadata = {**checkpoint.metadata, "wire": "yes"}
    d.call(
        "post_PostCheckpointMetadata",
        checkpoint_uuid=checkpoint.uuid,
        body=b.v1PostCheckpointMetadataRequest(checkpoint=checkpoint),
    )
    d.call(
        "post_CheckpointsRemoveFiles",
        body=b.v1CheckpointsRemoveFilesRequest(
            checkpointGlobs=["no-such-file*"], checkpointUuids=[spare_ckpt]
        ),
    )
    d.call(
        "patch_PatchCheckpoints",
        body=b.v1PatchCheckpointsRequest(checkpoints=[b.v1PatchCheckpoint(uuid=spare_ckpt)]),
    )

    # Models and model versions.
    d.call(
        "post_PostModel",
        body=b.v1PostModelRequest(name="wire-model", labels=["a"], metadata={"k": "v"}),
    )
    d.call("post_PostModel", body=b.v1PostModelRequest(name="wire-model-gone"))
    d.call("get_GetModels")
    d.call("get_GetModel", modelName="wire-model")
    d.call("patch_PatchModel", modelName="wire-model", body=b.v1PatchModel(description="wire"))
    d.call("get_GetModelLabels")
    d.call(
        "post_PostModelVersion",
        modelName="wire-model",
        body=b.v1PostModelVersionRequest(checkpointUuid=checkpoint.uuid, modelName="wire-model"),
    )
    d.call(
        "post_PostModelVersion",
        modelName="wire-model-gone",
        body=b.v1PostModelVersionRequest(
            checkpointUuid=checkpoint.uuid, modelName="wire-model-gone"
        ),
    )
    d.call("get_GetModelVersions", modelName="wire-model")
    d.call("get_GetModelVersion", modelName="wire-model", modelVersionNum=1)
    d.call(
        "patch_PatchModelVersion",
        modelName="wire-model",
        modelVersionNum=1,
        body=b.v1PatchModelVersion(comment="wire"),
    )
    d.call("get_GetTrialMetricsByModelVersion", modelName="wire-model", modelVersionNum=1)
    d.call("post_ArchiveModel", modelName="wire-model")
    d.call("post_UnarchiveModel", modelName="wire-model")
    d.call(
        "post_MoveModel",
        modelName="wire-model",
        body=b.v1MoveModelRequest(destinationWorkspaceId=ws, modelName="wire-model"),
    )
    d.call("delete_DeleteModelVersion", modelName="wire-model-gone", modelVersionNum=1)
    d.call("delete_DeleteModel", modelName="wire-model-gone")

    # Templates.
    template = b.v1Template(name="wire-tpl", config={"description": "wire"}, workspaceId=1)
    d.call("post_PostTemplate", template_name="wire-tpl", body=template)
    d.call("put_PutTemplate", template_name="wire-tpl", body=template)
    d.call("get_GetTemplates")
    d.call("get_GetTemplate", templateName="wire-tpl")
    d.call("patch_PatchTemplateConfig", templateName="wire-tpl", body={"max_restarts": 1})
    d.call(
        "patch_PatchTemplateName",
        body=b.v1PatchTemplateNameRequest(oldName="wire-tpl", newName="wire-tpl-2"),
    )
    d.call("delete_DeleteTemplate", templateName="wire-tpl-2")
    webhooks(d)

    # Commands, notebooks, TensorBoards and tasks.
    command = d.call(
        "post_LaunchCommand",
        body=b.v1LaunchCommandRequest(config={"entrypoint": ["sleep", "300"]}),
    )
    command_id = command.command.id
    notebook = d.call("post_LaunchNotebook", body=b.v1LaunchNotebookRequest(config={}))
    tensorboard = d.call(
        "post_LaunchTensorboard",
        body=b.v1LaunchTensorboardRequest(experimentIds=[exps["completed"]]),
    )
    d.call("get_GetCommands")
    d.call("get_GetCommand", commandId=command_id)
    d.call(
        "post_SetCommandPriority",
        commandId=command_id,
        body=b.v1SetCommandPriorityRequest(commandId=command_id, priority=10),
    )
    d.call("get_GetNotebooks")
    d.call("get_GetTensorboards")
    if notebook:
        notebook_id = notebook.notebook.id
        d.call("get_GetNotebook", notebookId=notebook_id)
        d.call(
            "put_IdleNotebook",
            notebookId=notebook_id,
            body=b.v1IdleNotebookRequest(notebookId=notebook_id, idle=False),
        )
        d.call("post_KillNotebook", notebookId=notebook_id)
    if tensorboard:
        tensorboard_id = tensorboard.tensorboard.id
        d.call("get_GetTensorboard", tensorboardId=tensorboard_id)
        d.call(
            "post_SetTensorboardPriority",
            tensorboardId=tensorboard_id,
            body=b.v1SetTensorboardPriorityRequest(tensorboardId=tensorboard_id, priority=10),
        )
        d.call("post_KillTensorboard", tensorboardId=tensorboard_id)
    d.call("get_GetTasks")
    d.call("get_GetActiveTasksCount")
    d.call("get_GetTask", taskId=command_id)
    d.call(
        "post_PostTaskLogs",
        body=b.v1PostTaskLogsRequest(logs=[b.v1TaskLog(taskId=command_id, log="wire line\n")]),
    )
    d.call("post_KillCommand", commandId=command_id)
    d.call("get_TaskLogs", taskId=command_id, follow=False)
    d.call("get_TaskLogsFields", taskId=command_id, follow=False)
    d.call(
        "post_KillGenericTask",
        taskId=command_id,
        body=b.v1KillGenericTaskRequest(taskId=command_id),
    )

    # The running trial's allocation.
    active_trial = d.call("get_GetTrial", trialId=trials["active"][0])
    task = d.call("get_GetTask", taskId=active_trial.trial.taskId)
    alloc = task.task.allocations[-1].allocationId
    d.call("get_AllocationPreemptionSignal", allocationId=alloc, timeoutSeconds=0)
    d.call(
        "post_AllocationReady",
        allocationId=alloc,
        body=b.v1AllocationReadyRequest(allocationId=alloc),
    )
    d.call(
        "post_AllocationWaiting",
        allocationId=alloc,
        body=b.v1AllocationWaitingRequest(allocationId=alloc),
    )
    d.call(
        "post_NotifyContainerRunning",
        allocationId=alloc,
        body=b.v1NotifyContainerRunningRequest(allocationId=alloc, data={}, numPeers=1, rank=0),
    )
    d.call("get_AllocationRendezvousInfo", allocationId=alloc, resourcesId="wire")
    d.call(
        "post_MarkAllocationResourcesDaemon",
        allocationId=alloc,
        resourcesId="wire",
        body=b.v1MarkAllocationResourcesDaemonRequest(allocationId=alloc, resourcesId="wire"),
    )
    d.call(
        "post_AllocationAllGather",
        allocationId=alloc,
        body=b.v1AllocationAllGatherRequest(
            allocationId=alloc, data={"rank": 0}, numPeers=1, requestUuid=str(uuid.uuid4())
        ),
    )
    d.call(
        "post_AllocationPendingPreemptionSignal",
        allocationId=alloc,
        body=b.v1AllocationPendingPreemptionSignalRequest(allocationId=alloc),
    )

    # An unmanaged experiment, reported to from outside like upstream's detached mode.
    unmanaged_config = json.dumps({**ids["config"], "name": "wire-unmanaged"})
    put = d.call(
        "put_PutExperiment",
        externalExperimentId=f"wire-{uuid.uuid4()}",
        body=b.v1CreateExperimentRequest(config=unmanaged_config, unmanaged=True, activate=False),
    )
    unmanaged_exp = put.experiment.id if put else exps["completed"]
    trial = d.call(
        "post_CreateTrial",
        body=b.v1CreateTrialRequest(
            experimentId=unmanaged_exp, hparams={"lr": 0.1}, unmanaged=True
        ),
    )
    d.call(
        "put_PutTrial",
        body=b.v1PutTrialRequest(
            createTrialRequest=b.v1CreateTrialRequest(
                experimentId=unmanaged_exp, hparams={"lr": 0.2}, unmanaged=True
            ),
            externalTrialId="wire-trial",
        ),
    )
    run_id = trial.trial.id if trial else done
    d.call("post_RunPrepareForReporting", body=b.v1RunPrepareForReportingRequest(runId=run_id))
    start = d.call("post_StartTrial", trialId=run_id, body=b.v1StartTrialRequest(trialId=run_id))
    metrics = b.v1TrialMetrics(
        trialId=run_id,
        trialRunId=start.trialRunId if start else 0,
        stepsCompleted=1,
        metrics=b.v1Metrics(avgMetrics={"loss": 1.0}),
    )
    d.call(
        "post_ReportTrialMetrics",
        metrics_trialId=run_id,
        body=b.v1ReportTrialMetricsRequest(group="training", metrics=metrics),
    )
    metrics.stepsCompleted = 2
    d.call("post_ReportTrialTrainingMetrics", trainingMetrics_trialId=run_id, body=metrics)
    d.call("post_ReportTrialValidationMetrics", validationMetrics_trialId=run_id, body=metrics)
    d.call(
        "post_ReportTrialProgress",
        trialId=run_id,
        body=b.v1ReportTrialProgressRequest(trialId=run_id, progress=0.5),
    )
    d.call("post_PostTrialRunnerMetadata", trialId=run_id, body=b.v1TrialRunnerMetadata(state="x"))
    d.call(
        "post_ReportCheckpoint",
        body=b.v1Checkpoint(
            uuid=str(uuid.uuid4()),
            metadata={"steps_completed": 2},
            resources={"weights.txt": "1"},
            state=b.checkpointv1State.COMPLETED,
            training=b.v1CheckpointTrainingMetadata(trialId=run_id, experimentId=unmanaged_exp),
            reportTime=now.isoformat().replace("+00:00", "Z"),
        ),
    )
    d.call(
        "post_ReportTrialSourceInfo",
        body=b.v1ReportTrialSourceInfoRequest(
            trialSourceInfo=b.v1TrialSourceInfo(
                checkpointUuid=checkpoint.uuid,
                trialId=run_id,
                trialSourceInfoType=b.v1TrialSourceInfoType.INFERENCE,
            )
        ),
    )
    d.call("post_PostRunMetadata", runId=run_id, body=b.v1PostRunMetadataRequest(metadata={"a": 1}))
    d.call("get_GetRunMetadata", runId=run_id)
    d.call(
        "post_PostWebhookEventData",
        body=b.v1PostWebhookEventDataRequest(
            experimentId=unmanaged_exp,
            trialId=run_id,
            data=b.v1CustomWebhookEventData(title="wire", description="d", level=b.v1LogLevel.INFO),
        ),
    )
    d.call(
        "post_ReportTrialSearcherEarlyExit",
        trialId=run_id,
        body=b.v1TrialEarlyExit(reason=b.v1TrialEarlyExitExitedReason.INVALID_HP),
    )
    d.call(
        "patch_PatchTrial",
        trialId=run_id,
        body=b.v1PatchTrialRequest(trialId=run_id, state=b.trialv1State.COMPLETED),
    )

    query_sweeps(d, ids)

    # Removals last: they need what came before.
    d.call(
        "post_AckAllocationPreemptionSignal",
        allocationId=alloc,
        body=b.v1AckAllocationPreemptionSignalRequest(allocationId=alloc),
    )
    d.call("post_KillTrial", id=trials["active"][0])
    d.call("post_KillExperiment", id=exps["active"])
    d.call("delete_DeleteTensorboardFiles", experimentId=exps["completed"])
    d.call(
        "delete_DeleteCheckpoints", body=b.v1DeleteCheckpointsRequest(checkpointUuids=[spare_ckpt])
    )
    d.call("delete_DeleteExperiment", experimentId=exps["spare"])
    d.call("delete_DeleteGroup", groupId=group_id)
    d.call("delete_DeleteProject", id=spare_project)
    d.call("delete_DeleteWorkspace", id=ws2)
    d.call("post_Logout")


def metric_reads(
    d: Driver, exps: dict[str, int], trial: int, config_yaml: str, files: list[b.v1File]
) -> None:
    """Metric reads across trials (docs/metrics.md). The experiments are terminal, so each stream
    answers its lines and ends; the trial sample needs a search that is not ``single``."""
    metric_ids = ["training.loss", "validation.validation_loss"]
    d.call("get_CompareTrials", trialIds=[trial], metricIds=metric_ids)
    d.call(
        "get_CompareTrials",
        trialIds=[trial],
        metricNames=["loss"],
        metricType=b.v1MetricType.TRAINING,
    )
    d.call("get_GetProjectNumericMetricsRange", id=1)
    d.call("get_ExpMetricNames", ids=[exps["completed"], exps["errored"]], periodSeconds=1)
    completed = exps["completed"]
    d.call("get_MetricBatches", experimentId=completed, metricName="loss", group="training")
    d.call(
        "get_TrialsSnapshot",
        experimentId=completed,
        metricName="validation_loss",
        metricType=b.v1MetricType.VALIDATION,
        batchesProcessed=1,
    )
    config = json.loads(config_yaml)
    config["searcher"] = {"name": "random", "metric": "validation_loss", "max_trials": 1}
    searched = d.call(
        "post_CreateExperiment",
        body=b.v1CreateExperimentRequest(
            config=json.dumps(config), modelDefinition=files, activate=False, projectId=1
        ),
    )
    if searched is not None:
        d.call("post_KillExperiment", id=searched.experiment.id)  # the stream ends once CANCELED
        d.call(
            "get_TrialsSample",
            experimentId=searched.experiment.id,
            metricName="validation_loss",
            group="validation",
            periodSeconds=1,
        )


def agents(d: Driver) -> None:
    """Read an agent and its slots, disable and re-enable the agent and a free slot. Disabling
    drains (the held trial keeps running), and each is enabled again at once so that later
    launches find their slots."""
    found = d.call("get_GetAgents")
    if not found or not found.agents:
        return
    agent_id = found.agents[0].id
    d.call("get_GetAgent", agentId=agent_id)
    slots = d.call("get_GetSlots", agentId=agent_id)
    free = [s.id for s in (slots.slots if slots else []) if s.container is None]
    slot_id = free[0] if free else "0"
    d.call("get_GetSlot", agentId=agent_id, slotId=slot_id)
    d.call(
        "post_DisableSlot",
        agentId=agent_id,
        slotId=slot_id,
        body=b.v1DisableSlotRequest(agentId=agent_id, slotId=slot_id, drain=True),
    )
    d.call("post_EnableSlot", agentId=agent_id, slotId=slot_id)
    d.call(
        "post_DisableAgent",
        agentId=agent_id,
        body=b.v1DisableAgentRequest(agentId=agent_id, drain=True),
    )
    d.call("post_EnableAgent", agentId=agent_id)
    after = d.call("get_GetAgent", agentId=agent_id)
    if after and not (after.agent.enabled and after.agent.slots[slot_id].enabled):
        d.results["post_EnableAgent"].append("the agent or its slot is still disabled")


def config_policies(d: Driver, workspace: int) -> None:
    """Set, read and delete the global experiment policies and a workspace's task policies
    (docs/config_policies.md); deleted at once, so that no later launch meets them."""
    policies = json.dumps({"constraints": {"resources": {"max_slots": 64}}})
    d.call(
        "put_PutGlobalConfigPolicies",
        workloadType="EXPERIMENT",
        body=b.v1PutGlobalConfigPoliciesRequest(configPolicies=policies, workloadType="EXPERIMENT"),
    )
    got = d.call("get_GetGlobalConfigPolicies", workloadType="EXPERIMENT")
    if got and "constraints" not in (got.configPolicies or {}):
        d.results["put_PutGlobalConfigPolicies"].append(f"not stored: {got.configPolicies}")
    d.call("delete_DeleteGlobalConfigPolicies", workloadType="EXPERIMENT")
    d.call("get_GetGlobalConfigPolicies", workloadType="NTSC")
    d.call(
        "put_PutWorkspaceConfigPolicies",
        workspaceId=workspace,
        workloadType="NTSC",
        body=b.v1PutWorkspaceConfigPoliciesRequest(
            configPolicies=policies, workloadType="NTSC", workspaceId=workspace
        ),
    )
    d.call("get_GetWorkspaceConfigPolicies", workspaceId=workspace, workloadType="NTSC")
    d.call("delete_DeleteWorkspaceConfigPolicies", workspaceId=workspace, workloadType="NTSC")
    d.call("get_GetWorkspaceConfigPolicies", workspaceId=workspace, workloadType="NTSC")


def webhooks(d: Driver) -> None:
    """Create, list, edit, test and delete a webhook; the test event goes to a receiver here."""
    import http.server
    import threading

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    trigger = b.v1Trigger(
        triggerType=b.v1TriggerType.EXPERIMENT_STATE_CHANGE, condition={"state": "COMPLETED"}
    )
    hook = d.call(
        "post_PostWebhook",
        body=b.v1Webhook(
            url=url,
            webhookType=b.v1WebhookType.DEFAULT,
            triggers=[trigger],
            mode=b.v1WebhookMode.WORKSPACE,
            name="wire-hook",
            workspaceId=None,
        ),
    )
    hook_id = hook.webhook.id if hook else 0
    d.call("get_GetWebhooks")
    d.call("patch_PatchWebhook", id=hook_id, body=b.v1PatchWebhook(url=url + "/edited"))
    d.call("post_TestWebhook", id=hook_id)
    d.call("delete_DeleteWebhook", id=hook_id)
    server.shutdown()
    server.server_close()


def _runs_of(experiment_id: int) -> str:
    """A run-search filter (the web UI's language) for one experiment's runs."""
    field = {"kind": "field", "columnName": "experimentId", "location": "LOCATION_TYPE_RUN",
             "operator": "=", "type": "COLUMN_TYPE_NUMBER", "value": experiment_id}  # fmt: skip
    group = {"kind": "group", "conjunction": "and", "children": [field]}
    return json.dumps({"filterGroup": group, "showArchived": False})


def self_check() -> list[str]:
    """What the checks say of answers with known faults: a null required string, a value of the
    wrong JSON type, a pool lacking a required field, an enum value upstream does not know."""
    problems: list[str] = []
    driver = Driver("http://127.0.0.1:1")
    notes = b.v1PutProjectNotesResponse(notes=[b.v1Note(name=None, contents=3)])  # type: ignore[arg-type]
    driver.check(notes, type(notes), "notes", problems)
    user = b.v1User(username="u", admin="yes", active=True, id="5")  # type: ignore[arg-type]
    driver.check(user, type(user), "user", problems)
    entry = {"id": 1, "level": "LOG_LEVEL_BOGUS", "message": "", "timestamp": ""}
    for cls, answer in ((b.v1ResourcePool, {"name": "p"}), (b.v1LogEntry, entry)):
        try:
            cls.from_json(answer)
        except (KeyError, ValueError) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
    return problems


def bulk_experiments(
    d: Driver, completed: int, project: int, config_yaml: str, files: list[b.v1File]
) -> None:
    """The bulk actions of a project's experiments, on two new ones and on ``completed``."""
    request = b.v1CreateExperimentRequest(
        config=config_yaml, modelDefinition=files, activate=False, projectId=project
    )
    ids = [d.call("post_CreateExperiment", body=request).experiment.id for _ in range(2)]
    for name, cls, targets, where in (
        ("post_ActivateExperiments", b.v1ActivateExperimentsRequest, ids, project),
        ("post_PauseExperiments", b.v1PauseExperimentsRequest, ids, project),
        ("post_CancelExperiments", b.v1CancelExperimentsRequest, ids[:1], project),
        ("post_KillExperiments", b.v1KillExperimentsRequest, ids[1:], project),
        ("post_ArchiveExperiments", b.v1ArchiveExperimentsRequest, [completed], 1),
        ("post_UnarchiveExperiments", b.v1UnarchiveExperimentsRequest, [completed], 1),
    ):
        d.call(name, projectId=where, body=cls(experimentIds=targets, projectId=where))


def sweep(d: Driver, name: str, enums: dict[str, type[enum.Enum]], **fixed: Any) -> None:
    """Call ``name`` once per value of each enum-typed query parameter (the others as ``fixed``):
    det must accept every value upstream's client can send."""
    for param, values in enums.items():
        for value in values:
            wrapped = [value] if param in ("states", "levels") else value
            d.call(name, **{**fixed, param: wrapped})


def query_sweeps(d: Driver, ids: dict[str, Any]) -> None:
    """The list routes with each sort key, order and state filter of upstream's enums."""
    exp, trial = ids["experiments"]["completed"], ids["trials"]["completed"][0]
    order = {"orderBy": b.v1OrderBy}
    sweep(
        d,
        "get_GetExperiments",
        {**order, "sortBy": b.v1GetExperimentsRequestSortBy, "states": b.experimentv1State},
        archived=False,
        labels=["wire"],
        users=["admin"],
        showTrialData=True,
        experimentIdFilter_gte=1,
    )
    sweep(
        d,
        "get_GetExperimentTrials",
        {**order, "sortBy": b.v1GetExperimentTrialsRequestSortBy, "states": b.experimentv1State},
        experimentId=exp,
    )
    checkpoints = {**order, "sortByAttr": b.checkpointv1SortBy, "states": b.checkpointv1State}
    sweep(d, "get_GetTrialCheckpoints", checkpoints, id=trial)
    sweep(d, "get_GetExperimentCheckpoints", checkpoints, id=exp)
    d.call("get_GetTrialCheckpoints", id=trial, sortByMetric="validation_loss")
    sweep(d, "get_GetModels", {**order, "sortBy": b.v1GetModelsRequestSortBy}, archived=False)
    sweep(
        d,
        "get_GetModelVersions",
        {**order, "sortBy": b.v1GetModelVersionsRequestSortBy},
        modelName="wire-model",
    )
    sweep(d, "get_GetUsers", {**order, "sortBy": b.v1GetUsersRequestSortBy}, active=True)
    sweep(d, "get_GetWorkspaces", {**order, "sortBy": b.v1GetWorkspacesRequestSortBy})
    sweep(
        d,
        "get_GetWorkspaceProjects",
        {**order, "sortBy": b.v1GetWorkspaceProjectsRequestSortBy},
        id=1,
    )
    sweep(d, "get_GetTemplates", {**order, "sortBy": b.v1GetTemplatesRequestSortBy})
    for name in ("get_GetCommands", "get_GetNotebooks", "get_GetTensorboards"):
        sweep(d, name, {**order, "sortBy": b.v1GetTensorboardsRequestSortBy}, users=["admin"])
    for name in ("get_GetJobs", "get_GetJobsV2"):
        sweep(d, name, {**order, "states": b.jobv1State}, resourcePool="default")
    sweep(d, "get_GetAccessTokens", {**order, "sortBy": b.v1GetAccessTokensRequestSortBy})
    sweep(
        d,
        "get_GetTrialWorkloads",
        {**order, "filter": b.GetTrialWorkloadsRequestFilterOption, "metricType": b.v1MetricType},
        trialId=trial,
    )
    sweep(d, "get_TrialLogs", {**order, "levels": b.v1LogLevel}, trialId=trial, follow=False)


def main() -> None:
    if sys.argv[1] == "--self-check":
        print(json.dumps(self_check()))
        return
    master, ids_path, out_path = sys.argv[1:4]
    driver = Driver(master)
    try:
        run(driver, json.loads(pathlib.Path(ids_path).read_text()))
    finally:
        pathlib.Path(out_path).write_text(json.dumps(driver.results, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
