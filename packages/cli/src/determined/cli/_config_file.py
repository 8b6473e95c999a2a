"""Reading an experiment config file and applying ``--config key=value`` overrides."""

from __future__ import annotations

import pathlib
from collections.abc import Iterable
from typing import Any

import yaml

from determined.cli._errors import CliError

CONFIG_HELP = (
    "a config override as key=value; nested keys with dots (resources.slots_per_trial=2), "
    'lists with commas (a,b) or JSON ([1, 2], {"a": 1}); repeat for several'
)
_COERCE_TO_LIST = {"bind_mounts"}


def read_config_text(path: str) -> str:
    """The text of the config file ``path`` (CliError naming the path when it cannot be read)."""
    file = pathlib.Path(path)
    if not file.exists():
        raise CliError(f"config file '{path}' does not exist")
    if not file.is_file():
        raise CliError(f"config file '{path}' is not a file")
    try:
        return file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read config file '{path}': {exc}") from None


def parse_config(text: str, path: str) -> dict[str, Any]:
    """The YAML mapping in ``text`` (CliError with the YAML problem and its line otherwise)."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CliError(f"invalid experiment config file {path}{where}: {problem}") from None
    if not config or not isinstance(config, dict):
        raise CliError(f"invalid experiment config file {path}: expected a YAML mapping")
    return config


def _value(key: str, raw: str) -> Any:
    try:
        if raw.startswith(("[", "{")):
            value = yaml.safe_load(raw)
            if key in _COERCE_TO_LIST and isinstance(value, dict):
                value = [value]
            return value
        if "," in raw:
            return [yaml.safe_load(part) for part in raw.split(",")]
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise CliError(f"--config {key}={raw}: the value is not valid YAML/JSON: {exc}") from None
    return [value] if key in _COERCE_TO_LIST else value


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def apply_overrides(config: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """``config`` with each ``key.sub=value`` override merged in (values parsed as YAML)."""
    for item in overrides:
        if "=" not in item:
            raise CliError(
                f"--config {item!r}: expected key=value (e.g. resources.slots_per_trial=2)"
            )
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise CliError(f"--config {item!r}: the key must be non-empty dot-separated names")
        nested: dict[str, Any] = {}
        target = nested
        parts = key.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = _value(key, raw)
        # a section written with no children (`slurm:`) parses as None: treat it as empty
        cursor: Any = config
        for part in parts[:-1]:
            if not isinstance(cursor, dict):
                break
            if cursor.get(part) is None and part in cursor:
                cursor[part] = {}
            cursor = cursor.get(part)
        config = _merge(config, nested)
    return config
