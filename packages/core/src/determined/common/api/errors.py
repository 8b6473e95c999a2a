"""The master client's errors under the names upstream code catches.

Each upstream name is the base class det's client error derives from (with upstream's
constructor), so ``except errors.NotFoundException`` in code written for Determined catches det's
``determined.client.NotFoundError``: ``BadRequestException`` (det's ``ClientError``) is the base
of every error a call raises, ``MasterNotFoundException`` included; ``APIException`` is the base of
the error statuses; ``UnauthenticatedException`` and ``InvalidCredentialsException`` catch every
401. Upstream's errors that det's client never raises are plain classes here, so ``except``
clauses naming them still work.
"""

from __future__ import annotations

from typing import Any

from determined.client import ClientError, MasterNotFoundError
from determined.client._errors import (
    APIException,
    DeleteFailedException,
    ForbiddenException,
    InvalidCredentialsException,
    NotFoundException,
    UnauthenticatedException,
)

BadRequestException = ClientError
MasterNotFoundException = MasterNotFoundError


class BadResponseException(Exception):
    """The master's answer could not be understood."""

    def __init__(self, message: str, *args: Any) -> None:
        super().__init__(message, *args)
        self.message = message

    def __str__(self) -> str:
        return self.message


class EmptyResultException(BadResponseException):
    """A lookup that must find something found nothing."""


class CorruptTokenCacheException(Exception):
    """The cached login tokens could not be read (the cache was removed; log in again)."""

    def __init__(self) -> None:
        super().__init__("the token cache was corrupt and has been removed; please log in again")


class CorruptCertificateCacheException(Exception):
    """The cached master certificates could not be read (the cache was removed)."""

    def __init__(self) -> None:
        super().__init__("the certificate cache was corrupt and has been removed; try again")


__all__ = [
    "APIException",
    "BadRequestException",
    "BadResponseException",
    "CorruptCertificateCacheException",
    "CorruptTokenCacheException",
    "DeleteFailedException",
    "EmptyResultException",
    "ForbiddenException",
    "InvalidCredentialsException",
    "MasterNotFoundException",
    "NotFoundException",
    "UnauthenticatedException",
]
