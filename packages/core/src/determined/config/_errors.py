"""The error raised for a bad experiment configuration, and the result of a good one."""

from __future__ import annotations

import dataclasses
from typing import Any


class InvalidConfigError(ValueError):
    """An experiment configuration failed validation.

    Attributes:
        errors: every problem found, each ``"<field.path>: <message>"``, sorted.
    """

    def __init__(self, errors: list[str]) -> None:
        self.errors = sorted(errors)
        super().__init__("invalid experiment configuration:\n" + "\n".join(self.errors))


@dataclasses.dataclass(frozen=True)
class ValidatedConfig:
    """The outcome of :func:`validate_experiment_config`.

    Attributes:
        config: the fully defaulted configuration (what the master stores and hands to trials).
        original: the user's configuration as parsed, before any default was merged in.
        warnings: deprecation warnings, each ``"<field.path>: deprecated, ..."``.
    """

    config: dict[str, Any]
    original: dict[str, Any]
    warnings: list[str]
