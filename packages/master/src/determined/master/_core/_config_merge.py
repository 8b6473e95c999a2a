"""Merging a config template underneath an experiment config, with upstream's rules.

``det e create --template NAME`` (``template`` in ``POST /api/v1/experiments``) fills what the
experiment config leaves out from the template. The experiment config always wins:

- mappings merge key by key, recursively;
- lists and scalars are taken whole from the experiment config when it has them;
- a few lists are joined instead: ``bind_mounts`` and ``devices`` (a template entry whose
  ``container_path`` the experiment already uses is dropped), ``environment.proxy_ports`` (by
  ``proxy_port``), ``log_policies`` (by ``name``, unnamed ones by action and pattern) and
  ``environment.environment_variables`` (template entries first, then the experiment's);
- ``hyperparameters`` merge only where both sides are nested groups (no ``type`` key); a single
  hyperparameter is never mixed from two definitions;
- ``searcher`` and ``checkpoint_storage`` are unions: when the two sides name a different
  ``name``/``type``, only the fields every variant shares come from the template.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from typing import Any

_UNIONS: dict[str, tuple[str, frozenset[str]]] = {
    "searcher": (
        "name",
        frozenset({"metric", "smaller_is_better", "source_trial_id", "source_checkpoint_uuid"}),
    ),
    "checkpoint_storage": (
        "type",
        frozenset({"save_experiment_best", "save_trial_best", "save_trial_latest"}),
    ),
}


def _container_path(entry: Any) -> Hashable:
    return entry.get("container_path") if isinstance(entry, dict) else repr(entry)


def _proxy_port(entry: Any) -> Hashable:
    return entry.get("proxy_port") if isinstance(entry, dict) else repr(entry)


def _log_policy(entry: Any) -> Hashable:
    if not isinstance(entry, dict):
        return repr(entry)
    if entry.get("name") is not None:
        return ("name", entry["name"])
    action = entry.get("action")
    return ("unnamed", repr(action), entry.get("pattern"))


_KEYED_LISTS: dict[tuple[str, ...], Callable[[Any], Hashable]] = {
    ("bind_mounts",): _container_path,
    ("devices",): _container_path,
    ("environment", "proxy_ports"): _proxy_port,
    ("log_policies",): _log_policy,
}


def merge_template(config: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """``config`` with what it leaves out taken from ``template`` (neither is changed)."""
    return _merge_maps(config, template, ())


def _merge_maps(
    ours: dict[str, Any], theirs: dict[str, Any], path: tuple[str, ...]
) -> dict[str, Any]:
    out = copy.deepcopy(ours)
    for key, value in theirs.items():
        if key not in ours or ours[key] is None:
            out[key] = copy.deepcopy(value)
        else:
            out[key] = _merge_value(ours[key], value, (*path, key))
    return out


def _merge_value(ours: Any, theirs: Any, path: tuple[str, ...]) -> Any:
    if theirs is None:
        return copy.deepcopy(ours)
    if path == ("hyperparameters",) and isinstance(ours, dict) and isinstance(theirs, dict):
        return _merge_hparams(ours, theirs)
    if path == ("environment", "environment_variables"):
        return _merge_environment_variables(ours, theirs)
    if path in _KEYED_LISTS and isinstance(ours, list) and isinstance(theirs, list):
        key = _KEYED_LISTS[path]
        taken = {key(entry) for entry in ours}
        return copy.deepcopy(ours) + [copy.deepcopy(e) for e in theirs if key(e) not in taken]
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if len(path) == 1 and path[0] in _UNIONS:
            tag, shared = _UNIONS[path[0]]
            if ours.get(tag) is not None and theirs.get(tag) not in (None, ours.get(tag)):
                theirs = {k: v for k, v in theirs.items() if k in shared}
        return _merge_maps(ours, theirs, path)
    return copy.deepcopy(ours)


def _is_group(hparam: Any) -> bool:
    return isinstance(hparam, dict) and "type" not in hparam


def _merge_hparams(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(ours)
    for name, value in theirs.items():
        if name not in ours:
            out[name] = copy.deepcopy(value)
        elif _is_group(ours[name]) and _is_group(value):
            out[name] = _merge_hparams(ours[name], value)
    return out


def _by_device(variables: Any) -> dict[str, list[Any]]:
    if isinstance(variables, list):
        return {"cpu": list(variables), "cuda": list(variables), "rocm": list(variables)}
    if isinstance(variables, dict):
        return {k: list(variables.get(k) or []) for k in ("cpu", "cuda", "rocm")}
    return {"cpu": [], "cuda": [], "rocm": []}


def _merge_environment_variables(ours: Any, theirs: Any) -> Any:
    if isinstance(ours, list) and isinstance(theirs, list):
        return copy.deepcopy(theirs) + copy.deepcopy(ours)
    mine, template = _by_device(ours), _by_device(theirs)
    return {k: template[k] + mine[k] for k in ("cpu", "cuda", "rocm")}
