"""Errors raised by the master client."""

from __future__ import annotations


class ClientError(Exception):
    """The base of every error a call to the master raises (upstream's ``BadRequestException``)."""


class APIError(ClientError):
    """The master answered with an error status.

    Attributes:
        status: the HTTP status code (also ``status_code``, upstream's name).
        message: the master's error message (from its ``{"error": {...}}`` body when it sent one).
    """

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path} failed ({status}): {message}")
        self.method = method
        self.path = path
        self.status = status
        self.message = message

    @property
    def status_code(self) -> int:
        """The HTTP status code, under the name upstream's ``APIException`` used."""
        return self.status


class UnauthenticatedError(APIError):
    """401: the token is missing, expired or revoked."""


class ForbiddenError(APIError):
    """403: the token's user may not do this."""


class NotFoundError(APIError):
    """404: the object does not exist (or is hidden from this user)."""


class MasterNotFoundError(ClientError, ConnectionError):
    """The master could not be reached at all (after the retries an idempotent request gets)."""
