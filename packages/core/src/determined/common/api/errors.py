"""The master client's errors under the names upstream code catches.

``except errors.NotFoundException`` in code written for Determined catches det's
``determined.client.NotFoundError``: each name here is an alias of det's class, not a copy.
``BadRequestException`` is the base of the API errors (``APIError``), as upstream's is of
``APIException``; ``MasterNotFoundException`` is det's ``MasterNotFoundError`` (a
``ConnectionError``).
"""

from __future__ import annotations

from determined.client import (
    APIError,
    ForbiddenError,
    MasterNotFoundError,
    NotFoundError,
    UnauthenticatedError,
)

BadRequestException = APIError
APIException = APIError
NotFoundException = NotFoundError
UnauthenticatedException = UnauthenticatedError
InvalidCredentialsException = UnauthenticatedError
ForbiddenException = ForbiddenError
MasterNotFoundException = MasterNotFoundError

__all__ = [
    "APIException",
    "BadRequestException",
    "ForbiddenException",
    "InvalidCredentialsException",
    "MasterNotFoundException",
    "NotFoundException",
    "UnauthenticatedException",
]
