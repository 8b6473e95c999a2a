"""The request and response types of ``determined.common.api.bindings``, under upstream's names.

Upstream generated one class per protobuf message, whose attributes are the JSON field names
(camelCase, as the master sends them). Here one base class, :class:`Message`, holds any fields; a
subclass only declares which fields hold nested messages or enums (``_types``), so
``from_json`` builds ``resp.experiment.state`` as an ``experimentv1State`` like upstream's. A field
the master left out reads as ``None``, as upstream's optional fields do.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

M = TypeVar("M", bound="Message")


class DetEnum(enum.Enum):
    """An enum of the API; ``str()`` drops the common prefix of the values (``ASC``, not
    ``ORDER_BY_ASC``)."""

    def __str__(self) -> str:
        return str(self.value)[len(self.prefix()) :]

    @classmethod
    def prefix(cls) -> str:
        """The prefix shared by every value, up to its last underscore ('' when none)."""
        values = [str(member.value) for member in cls]
        shortest = min(values, key=len, default="")
        length = 0
        while length < len(shortest) and all(v[length] == shortest[length] for v in values):
            length += 1
        common = shortest[:length]
        return common[: common.rfind("_") + 1]


class Printable:
    """``str()`` of a message lists its simple fields and elides nested ones."""

    def __str__(self) -> str:
        simple = (str, int, float, bool, DetEnum)
        shown = []
        for key, value in vars(self).items():
            if value is None:
                continue
            if isinstance(value, list):
                items = ", ".join(str(v) if isinstance(v, simple) else "..." for v in value)
                shown.append(f"{key}=[{items}]")
            else:
                shown.append(f"{key}={value if isinstance(value, simple) else '...'}")
        return f"{type(self).__name__}({', '.join(shown)})"


class Message(Printable):
    """A JSON message of the master's API: its fields are attributes named as in the JSON."""

    _types: ClassVar[dict[str, Any]] = {}
    """Field name -> the Message subclass or DetEnum of its value (or of each item of a list)."""

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return None  # an optional field the master left out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message) or type(other) is not type(self):
            return NotImplemented
        return self.to_json(True) == other.to_json(True)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_json(cls: type[M], obj: Mapping[str, Any]) -> M:
        """The message of a decoded JSON object."""
        fields = {}
        for key, value in obj.items():
            kind = cls._types.get(key)
            if kind is not None and value is not None:
                value = (
                    [_decode(kind, v) for v in value]
                    if isinstance(value, list)
                    else _decode(kind, value)
                )
            fields[key] = value
        return cls(**fields)

    def to_json(self, omit_unset: bool = False) -> dict[str, Any]:
        """The JSON object of this message (without its ``None`` fields when ``omit_unset``)."""
        return {
            key: _encode(value)
            for key, value in vars(self).items()
            if not (omit_unset and value is None)
        }


def _decode(kind: Any, value: Any) -> Any:
    if isinstance(kind, type) and issubclass(kind, Message) and isinstance(value, Mapping):
        return kind.from_json(value)
    if isinstance(kind, type) and issubclass(kind, DetEnum):
        try:
            return kind(value)
        except ValueError:
            return value  # a newer master's value: keep the string
    return value


def _encode(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_json(True)
    if isinstance(value, DetEnum):
        return value.value
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


# ---- enums ------------------------------------------------------------------------------------
class v1OrderBy(DetEnum):
    UNSPECIFIED = "ORDER_BY_UNSPECIFIED"
    ASC = "ORDER_BY_ASC"
    DESC = "ORDER_BY_DESC"


class experimentv1State(DetEnum):
    UNSPECIFIED = "STATE_UNSPECIFIED"
    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    COMPLETED = "STATE_COMPLETED"
    CANCELED = "STATE_CANCELED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    DELETING = "STATE_DELETING"
    DELETE_FAILED = "STATE_DELETE_FAILED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


class trialv1State(DetEnum):
    UNSPECIFIED = "STATE_UNSPECIFIED"
    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    CANCELED = "STATE_CANCELED"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


class checkpointv1State(DetEnum):
    UNSPECIFIED = "STATE_UNSPECIFIED"
    ACTIVE = "STATE_ACTIVE"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    PARTIALLY_DELETED = "STATE_PARTIALLY_DELETED"


class checkpointv1SortBy(DetEnum):
    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    UUID = "SORT_BY_UUID"
    TRIAL_ID = "SORT_BY_TRIAL_ID"
    BATCH_NUMBER = "SORT_BY_BATCH_NUMBER"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    SEARCHER_METRIC = "SORT_BY_SEARCHER_METRIC"


class v1GetExperimentsRequestSortBy(DetEnum):
    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    ID = "SORT_BY_ID"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    NUM_TRIALS = "SORT_BY_NUM_TRIALS"
    PROGRESS = "SORT_BY_PROGRESS"
    USER = "SORT_BY_USER"
    NAME = "SORT_BY_NAME"
    FORKED_FROM = "SORT_BY_FORKED_FROM"
    RESOURCE_POOL = "SORT_BY_RESOURCE_POOL"
    PROJECT_ID = "SORT_BY_PROJECT_ID"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    CHECKPOINT_COUNT = "SORT_BY_CHECKPOINT_COUNT"
    SEARCHER_METRIC_VAL = "SORT_BY_SEARCHER_METRIC_VAL"


class v1GetExperimentTrialsRequestSortBy(DetEnum):
    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    ID = "SORT_BY_ID"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    BEST_VALIDATION_METRIC = "SORT_BY_BEST_VALIDATION_METRIC"
    LATEST_VALIDATION_METRIC = "SORT_BY_LATEST_VALIDATION_METRIC"
    BATCHES_PROCESSED = "SORT_BY_BATCHES_PROCESSED"
    DURATION = "SORT_BY_DURATION"
    RESTARTS = "SORT_BY_RESTARTS"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    LOG_RETENTION_DAYS = "SORT_BY_LOG_RETENTION_DAYS"


class v1GetModelsRequestSortBy(DetEnum):
    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    NAME = "SORT_BY_NAME"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    CREATION_TIME = "SORT_BY_CREATION_TIME"
    LAST_UPDATED_TIME = "SORT_BY_LAST_UPDATED_TIME"
    NUM_VERSIONS = "SORT_BY_NUM_VERSIONS"
    WORKSPACE = "SORT_BY_WORKSPACE"


class v1GetModelVersionsRequestSortBy(DetEnum):
    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    VERSION = "SORT_BY_VERSION"
    CREATION_TIME = "SORT_BY_CREATION_TIME"


class v1GetUsersRequestSortBy(DetEnum):
    UNSPECIFIED = "SORT_BY_UNSPECIFIED"
    DISPLAY_NAME = "SORT_BY_DISPLAY_NAME"
    USER_NAME = "SORT_BY_USER_NAME"
    ADMIN = "SORT_BY_ADMIN"
    ACTIVE = "SORT_BY_ACTIVE"
    MODIFIED_TIME = "SORT_BY_MODIFIED_TIME"
    NAME = "SORT_BY_NAME"
    LAST_AUTH_TIME = "SORT_BY_LAST_AUTH_TIME"
    REMOTE = "SORT_BY_REMOTE"


class v1LogLevel(DetEnum):
    UNSPECIFIED = "LOG_LEVEL_UNSPECIFIED"
    TRACE = "LOG_LEVEL_TRACE"
    DEBUG = "LOG_LEVEL_DEBUG"
    INFO = "LOG_LEVEL_INFO"
    WARNING = "LOG_LEVEL_WARNING"
    ERROR = "LOG_LEVEL_ERROR"
    CRITICAL = "LOG_LEVEL_CRITICAL"


class v1TrialSourceInfoType(DetEnum):
    UNSPECIFIED = "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED"
    INFERENCE = "TRIAL_SOURCE_INFO_TYPE_INFERENCE"
    FINE_TUNING = "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING"


class v1LaunchWarning(DetEnum):
    UNSPECIFIED = "LAUNCH_WARNING_UNSPECIFIED"
    CURRENT_SLOTS_EXCEEDED = "LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"


# ---- messages ---------------------------------------------------------------------------------
class v1Pagination(Message):
    """Where a page of a listing starts and ends, and the total count."""


class v1AgentUserGroup(Message):
    """The unix user and group a task runs as."""


class v1User(Message):
    """A user of the master."""

    _types = {"agentUserGroup": v1AgentUserGroup}


class v1Experiment(Message):
    _types = {"state": experimentv1State}


class trialv1Trial(Message):
    _types = {"state": experimentv1State}


class v1CheckpointTrainingMetadata(Message):
    """The trial, experiment and metrics a checkpoint was saved with."""


class v1Checkpoint(Message):
    _types = {"state": checkpointv1State, "training": v1CheckpointTrainingMetadata}


class v1Model(Message):
    pass


class v1ModelVersion(Message):
    _types = {"model": v1Model, "checkpoint": v1Checkpoint}


class v1MetricsReport(Message):
    """One report of a metric group at one step of a trial."""


class v1TrialLogsResponse(Message):
    """One log line of a trial."""

    _types = {"level": v1LogLevel}


class v1TaskLogsResponse(Message):
    """One log line of a task."""

    _types = {"level": v1LogLevel}


class v1GetMasterResponse(Message):
    pass


class v1GetMasterConfigResponse(Message):
    pass


class v1LoginRequest(Message):
    pass


class v1LoginResponse(Message):
    _types = {"user": v1User}


class v1GetMeResponse(Message):
    _types = {"user": v1User}


class v1GetUserResponse(Message):
    _types = {"user": v1User}


class v1GetUserByUsernameResponse(Message):
    _types = {"user": v1User}


class v1GetUsersResponse(Message):
    _types = {"users": v1User, "pagination": v1Pagination}


class v1PostUserRequest(Message):
    _types = {"user": v1User}


class v1PostUserResponse(Message):
    _types = {"user": v1User}


class v1PatchUser(Message):
    _types = {"agentUserGroup": v1AgentUserGroup}


class v1PatchUserResponse(Message):
    _types = {"user": v1User}


class v1CreateExperimentRequest(Message):
    pass


class v1CreateExperimentResponse(Message):
    _types = {"experiment": v1Experiment}


class v1GetExperimentResponse(Message):
    _types = {"experiment": v1Experiment}


class v1GetExperimentsResponse(Message):
    _types = {"experiments": v1Experiment, "pagination": v1Pagination}


class v1PatchExperiment(Message):
    pass


class v1PatchExperimentResponse(Message):
    _types = {"experiment": v1Experiment}


class v1GetModelDefResponse(Message):
    pass


class v1GetBestSearcherValidationMetricResponse(Message):
    pass


class v1PutExperimentResponse(Message):
    _types = {"experiment": v1Experiment}


class v1CreateTrialRequest(Message):
    pass


class v1CreateTrialResponse(Message):
    _types = {"trial": trialv1Trial}


class v1PutTrialRequest(Message):
    _types = {"createTrialRequest": v1CreateTrialRequest}


class v1PutTrialResponse(Message):
    _types = {"trial": trialv1Trial}


class v1StartTrialRequest(Message):
    pass


class v1StartTrialResponse(Message):
    pass


class v1GetTrialResponse(Message):
    _types = {"trial": trialv1Trial}


class v1GetExperimentTrialsResponse(Message):
    _types = {"trials": trialv1Trial, "pagination": v1Pagination}


class v1GetCheckpointResponse(Message):
    _types = {"checkpoint": v1Checkpoint}


class v1GetExperimentCheckpointsResponse(Message):
    _types = {"checkpoints": v1Checkpoint, "pagination": v1Pagination}


class v1GetTrialCheckpointsResponse(Message):
    _types = {"checkpoints": v1Checkpoint, "pagination": v1Pagination}


class v1PostCheckpointMetadataRequest(Message):
    _types = {"checkpoint": v1Checkpoint}


class v1PostCheckpointMetadataResponse(Message):
    _types = {"checkpoint": v1Checkpoint}


class v1DeleteCheckpointsRequest(Message):
    pass


class v1CheckpointsRemoveFilesRequest(Message):
    pass


class v1GetMetricsResponse(Message):
    _types = {"metrics": v1MetricsReport}


class v1GetTrainingMetricsResponse(Message):
    _types = {"metrics": v1MetricsReport}


class v1GetValidationMetricsResponse(Message):
    _types = {"metrics": v1MetricsReport}


class v1GetTrialMetricsByCheckpointResponse(Message):
    _types = {"metrics": v1MetricsReport}


class v1GetTrialMetricsByModelVersionResponse(Message):
    _types = {"metrics": v1MetricsReport}


class v1GetModelResponse(Message):
    _types = {"model": v1Model}


class v1GetModelsResponse(Message):
    _types = {"models": v1Model, "pagination": v1Pagination}


class v1GetModelLabelsResponse(Message):
    pass


class v1PostModelRequest(Message):
    pass


class v1PostModelResponse(Message):
    _types = {"model": v1Model}


class v1PatchModel(Message):
    pass


class v1PatchModelResponse(Message):
    _types = {"model": v1Model}


class v1GetModelVersionResponse(Message):
    _types = {"modelVersion": v1ModelVersion}


class v1GetModelVersionsResponse(Message):
    _types = {"model": v1Model, "modelVersions": v1ModelVersion, "pagination": v1Pagination}


class v1PostModelVersionRequest(Message):
    pass


class v1PostModelVersionResponse(Message):
    _types = {"modelVersion": v1ModelVersion}


class v1PatchModelVersion(Message):
    pass


class v1PatchModelVersionResponse(Message):
    _types = {"modelVersion": v1ModelVersion}


__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if isinstance(value, type)
    and issubclass(value, Message | DetEnum | Printable)
    and not name.startswith("_")
)
