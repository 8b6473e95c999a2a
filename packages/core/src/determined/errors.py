"""Upstream's ``determined.errors``: the exceptions Determined training code raises or catches.

``CheckpointNotFound`` is det's storage error (``determined.storage.CheckpointNotFound``), so
``except det.errors.CheckpointNotFound`` catches what det's storage managers raise.
"""

from __future__ import annotations

from typing import Any

from determined.storage import CheckpointNotFound


class EnterpriseOnlyError(Exception):
    """The master lacks a feature of Determined's enterprise edition."""


class InternalException(Exception):
    """A bug in the library, not in user code; the message says to report it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = f"Internal error: {message}. Please report this to the det maintainers."

    def __str__(self) -> str:
        return self.message


class InvalidExperimentException(BaseException):
    """The experiment cannot run as written (a ``BaseException``, as upstream's, so a broad
    ``except Exception`` in user code does not swallow it)."""


class InvalidDataTypeException(InvalidExperimentException):
    """A value of the experiment has the wrong type."""

    def __init__(self, typ: type, message: str) -> None:
        super().__init__(f"Invalid data type ({typ.__name__}): {message}.")


class InvalidConfigurationException(InvalidExperimentException):
    """The experiment configuration is invalid."""

    def __init__(self, config: dict[str, Any], message: str) -> None:
        super().__init__(f"Invalid configuration ({config}): {message}.")


class InvalidModelException(InvalidExperimentException):
    """The model is invalid, or (partly) unsupported."""


class InvalidCheckpointException(Exception):
    """A checkpoint is invalid."""

    def __init__(self) -> None:
        super().__init__("Invalid checkpoint.")


class StopLoadingImplementation(Exception):
    """Raised to stop loading user code part way (used when only the Trial class is wanted)."""


class WorkerError(Exception):
    """A worker process failed for an unknown reason."""


class WorkerFinishedGracefully(Exception):
    """A worker process exited cleanly before the chief expected it to."""


class SkipWorkloadException(Exception):
    """A Trial raises it to tell the harness that the current phase can be skipped."""


class CheckpointStateException(Exception):
    """A checkpoint is in a state that does not allow the operation (deleted, partial...)."""


class NoDirectStorageAccess(Exception):
    """Checkpoint storage cannot be reached directly (no credentials or permissions)."""


class ProxiedDownloadFailed(Exception):
    """Downloading a checkpoint through the master failed."""


class MultipleDownloadsFailed(Exception):
    """Every way of downloading a checkpoint failed."""


__all__ = [
    "CheckpointNotFound",
    "CheckpointStateException",
    "EnterpriseOnlyError",
    "InternalException",
    "InvalidCheckpointException",
    "InvalidConfigurationException",
    "InvalidDataTypeException",
    "InvalidExperimentException",
    "InvalidModelException",
    "MultipleDownloadsFailed",
    "NoDirectStorageAccess",
    "ProxiedDownloadFailed",
    "SkipWorkloadException",
    "StopLoadingImplementation",
    "WorkerError",
    "WorkerFinishedGracefully",
]
