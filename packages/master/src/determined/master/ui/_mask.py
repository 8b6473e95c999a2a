"""Hide secrets in experiment configs before the UI shows them.

Masked: every value under ``data.secrets`` (upstream obfuscates those too), every key whose name
says it holds a credential (``secret_key``, ``access_key``, ``password``, ``token``,
``connection_string``, ``account_key``, ``credentials``, ...), wherever it sits
(``checkpoint_storage``, ``environment.registry_auth``, ...), and environment variables whose name
says the same (``environment.environment_variables: ["AWS_SECRET_ACCESS_KEY=..."]``).
"""

from __future__ import annotations

import re
from typing import Any

MASK = "********"
_SECRET_WORDS = frozenset(
    ("secret", "password", "passwd", "pwd", "token", "credential", "credentials", "apikey")
)
_SECRET_PAIRS = ("access_key", "api_key", "private_key", "account_key", "connection_string")


def is_secret_name(name: str) -> bool:
    """Whether a key or variable name looks like it holds a credential (``num_tokens`` does not)."""
    lowered = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().replace("-", "_")
    if any(pair in lowered for pair in _SECRET_PAIRS):
        return True
    return any(word in _SECRET_WORDS for word in re.split(r"[^a-z0-9]+", lowered))


def _mask_all(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_all(v) for v in value]
    return MASK if value not in (None, "") else value


def _mask_env(value: Any) -> Any:
    if isinstance(value, str) and "=" in value:
        name, _, rest = value.partition("=")
        return f"{name}={MASK}" if is_secret_name(name) and rest else value
    return mask(value)


def mask(value: Any, path: tuple[str, ...] = ()) -> Any:
    """A copy of ``value`` (a config or any part of it) with secrets replaced by ``********``."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            here = (*path, name)
            if here[-2:] == ("data", "secrets") or (
                is_secret_name(name) and item not in (None, "")
            ):
                out[key] = _mask_all(item)
            elif name == "environment_variables":
                out[key] = _env_vars(item)
            else:
                out[key] = mask(item, here)
        return out
    if isinstance(value, list):
        return [mask(item, path) for item in value]
    return value


def _env_vars(value: Any) -> Any:
    if isinstance(value, list):
        return [_mask_env(v) for v in value]
    if isinstance(value, dict):  # per-device lists: {cpu: [...], cuda: [...]}
        return {k: _env_vars(v) for k, v in value.items()}
    return _mask_env(value)
