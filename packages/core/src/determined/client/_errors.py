"""Errors raised by the master client."""

from __future__ import annotations


class APIError(Exception):
    """The master answered with an error status.

    Attributes:
        status: the HTTP status code.
        message: the master's error message (from its ``{"error": {...}}`` body when it sent one).
    """

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path} failed ({status}): {message}")
        self.method = method
        self.path = path
        self.status = status
        self.message = message


class UnauthenticatedError(APIError):
    """401: the token is missing, expired or revoked."""


class ForbiddenError(APIError):
    """403: the token's user may not do this."""


class NotFoundError(APIError):
    """404: the object does not exist (or is hidden from this user)."""


class MasterNotFoundError(ConnectionError):
    """The master could not be reached at all (after the retries an idempotent request gets)."""
