"""Errors raised by the master client.

det's errors (``APIError``, ``NotFoundError``...) carry the request and the master's message. Each
also derives from the class upstream Determined raised in the same case (``NotFoundException``...,
re-exported by ``determined.common.api.errors``), so code written for Determined that catches
upstream's names catches det's errors, and can still build upstream's exceptions with upstream's
constructor arguments.
"""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """The base of every error a call to the master raises (upstream's ``BadRequestException``).

    Attributes:
        message: what went wrong.
    """

    def __init__(self, message: str, *args: Any) -> None:
        super().__init__(message, *args)
        self.message = message

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class APIException(ClientError):
    """Upstream's error for an error status, built from the ``requests.Response``.

    Attributes:
        status_code: the HTTP status code.
        response_error: the master's ``{"error": {...}}`` object, when it sent one.
    """

    def __init__(self, response: Any, *args: Any) -> None:
        self.response_error: dict[str, Any] | None = None
        try:
            error = response.json()["error"]
            message = str(error["error"])
            self.response_error = error
        except (AttributeError, ValueError, KeyError, TypeError):
            message = str(getattr(response, "text", response))
        super().__init__(message, response, *args)
        self._status_code = int(getattr(response, "status_code", 0))

    @property
    def status_code(self) -> int:
        """The HTTP status code."""
        return self._status_code


class NotFoundException(APIException):
    """Upstream's 404 error."""

    def __init__(self, error_message: str) -> None:
        ClientError.__init__(self, error_message)
        self.response_error = None
        self._status_code = 404


class ForbiddenException(ClientError):
    """Upstream's 403 error."""

    def __init__(self, message: str = "") -> None:
        super().__init__(f"Forbidden({message})")


class UnauthenticatedException(ClientError):
    """Upstream's 401 error."""

    def __init__(self, message: str = "Unauthenticated: please log in (det user login).") -> None:
        super().__init__(message)


class InvalidCredentialsException(UnauthenticatedException):
    """Upstream's 401 error for a refused login."""

    def __init__(self) -> None:
        super().__init__("Invalid username/password combination. Please try again.")


class DeleteFailedException(APIException):
    """Upstream's error for a delete the master did not complete."""

    def __init__(self, error_message: str) -> None:
        ClientError.__init__(self, error_message)
        self.response_error = None
        self._status_code = 200


class APIError(APIException):
    """The master answered with an error status.

    Attributes:
        status: the HTTP status code (also ``status_code``, upstream's name).
        message: the master's error message (from its ``{"error": {...}}`` body when it sent one).
    """

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        ClientError.__init__(self, f"{method} {path} failed ({status}): {message}")
        self.method = method
        self.path = path
        self.status = status
        self.message = message
        self.response_error = None
        self._status_code = status


class UnauthenticatedError(APIError, InvalidCredentialsException):
    """401: the token is missing, expired or revoked."""


class ForbiddenError(APIError, ForbiddenException):
    """403: the token's user may not do this."""


class NotFoundError(APIError, NotFoundException):
    """404: the object does not exist (or is hidden from this user)."""


class MasterNotFoundError(ClientError, ConnectionError):
    """The master could not be reached at all (after the retries an idempotent request gets)."""
