"""``--config a.b.c=value`` overrides from the command line."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import yaml

_SEGMENT = re.compile(r"([^.\[\]]+)((?:\[\d+\])*)")
_INDEX = re.compile(r"\[(\d+)\]")


def _parse_path(override: str, path: str) -> list[str | int]:
    if not path:
        raise ValueError(f"invalid config override {override!r}: empty field path")
    steps: list[str | int] = []
    for part in path.split("."):
        match = _SEGMENT.fullmatch(part)
        if match is None:
            raise ValueError(
                f"invalid config override {override!r}: bad field path segment {part!r} "
                "(expected name or name[index])"
            )
        steps.append(match.group(1))
        steps.extend(int(index) for index in _INDEX.findall(match.group(2)))
    return steps


def apply_overrides(config: Mapping[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``KEY.PATH=VALUE`` overrides to a copy of ``config`` and return it.

    Values are parsed as YAML (``a.b=3`` sets an int, ``a.b=[1, 2]`` a list, ``a.b=null`` unsets).
    ``a.b[0]=x`` sets a list element (an index equal to the list's length appends). Missing
    intermediate mappings are created.

    Raises:
        ValueError: naming the override, when its syntax, value or path is unusable.
    """
    result: dict[str, Any] = copy.deepcopy(dict(config))
    for override in overrides:
        path, sep, text = override.partition("=")
        if not sep:
            raise ValueError(f"invalid config override {override!r}: expected KEY.PATH=VALUE")
        steps = _parse_path(override, path.strip())
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError as exc:
            raise ValueError(
                f"invalid config override {override!r}: bad YAML value ({exc})"
            ) from None
        _set(result, steps, value, override)
    return result


def _set(root: dict[str, Any], steps: list[str | int], value: Any, override: str) -> None:
    node: Any = root
    for position, step in enumerate(steps):
        last = position == len(steps) - 1
        following: Any = None if last else ([] if isinstance(steps[position + 1], int) else {})
        if isinstance(step, int):
            if not isinstance(node, list):
                raise ValueError(
                    f"invalid config override {override!r}: {_where(steps, position)} is not a list"
                )
            if step > len(node):
                raise ValueError(
                    f"invalid config override {override!r}: index {step} is out of range "
                    f"(the list has {len(node)} items)"
                )
            if step == len(node):
                node.append(following)
        elif not isinstance(node, dict):
            raise ValueError(
                f"invalid config override {override!r}: {_where(steps, position)} is not a mapping"
            )
        if last:
            node[step] = value
            return
        child = node[step] if isinstance(step, int) or step in node else None
        if child is None:
            child = following
            node[step] = child
        node = child


def _where(steps: list[str | int], position: int) -> str:
    text = ""
    for step in steps[:position]:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text or "the config"
