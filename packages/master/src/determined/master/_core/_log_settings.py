"""The master's log level and colour, changed at run time by ``PATCH /api/v1/master/config``.

As upstream, the change lasts until the master restarts (the configuration file is not written).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from determined.master._wire import APIError

LOG_LEVELS = {
    "LOG_LEVEL_TRACE": 5,
    "LOG_LEVEL_DEBUG": logging.DEBUG,
    "LOG_LEVEL_INFO": logging.INFO,
    "LOG_LEVEL_WARNING": logging.WARNING,
    "LOG_LEVEL_ERROR": logging.ERROR,
    "LOG_LEVEL_CRITICAL": logging.CRITICAL,
}
"""Upstream's ``LogLevel`` names and the Python levels they set."""


class LogSettings:
    """Level and colour of the ``determined.master`` logger and its handlers."""

    def __init__(self, logger_name: str = "determined.master") -> None:
        self._logger = logging.getLogger(logger_name)
        self._lock = threading.Lock()
        self._color = False

    def describe(self) -> dict[str, Any]:
        """``{"level": "info", "color": False}``: the ``log`` section of the master config."""
        level = self._logger.getEffectiveLevel()
        name = next((k for k, v in LOG_LEVELS.items() if v == level), "LOG_LEVEL_INFO")
        return {"level": name[len("LOG_LEVEL_") :].lower(), "color": self._color}

    def change(self, *, level: str | None = None, color: bool | None = None) -> None:
        """Set the level (an upstream ``LOG_LEVEL_*`` name, or its short form) and/or colour.

        Raises:
            APIError: 400 for an unknown level.
        """
        number = None
        if level is not None:
            key = level.upper()
            key = key if key.startswith("LOG_LEVEL_") else f"LOG_LEVEL_{key}"
            if key not in LOG_LEVELS:
                raise APIError(400, f"log.level: must be one of {', '.join(LOG_LEVELS)}")
            number = LOG_LEVELS[key]
        with self._lock:
            if number is not None:
                self._logger.setLevel(number)
                for handler in self._logger.handlers:
                    handler.setLevel(number)
            if color is not None:
                self._color = bool(color)
