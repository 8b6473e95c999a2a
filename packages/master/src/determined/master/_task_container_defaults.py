"""The master config's ``task_container_defaults``, top-level and per resource pool (upstream's keys).

Upstream merges the master's ``task_container_defaults`` with those of the pool a workload runs
in (the pool's win, field by field; environment variables are joined by name, the pool's first)
and fills what an experiment's or a task's config leaves out from the result. det runs no
containers, so only the keys that mean something without one reach a workload's config:

=========================  ==================================================
``environment_variables``  ``environment.environment_variables`` (a list, or per device)
``image``, ``force_pull_image``, ``registry_auth``, ``add_capabilities``,
``drop_capabilities``      ``environment.<same>``
``bind_mounts``            ``bind_mounts``
``devices``                ``resources.devices``
``shm_size_bytes``         ``resources.shm_size``
``preemption_timeout``     ``preemption_timeout`` (experiments)
``log_policies``           ``log_policies`` (experiments)
``slurm``, ``pbs``         ``slurm``, ``pbs`` (experiments)
=========================  ==================================================

Upstream's other keys (network settings, pod specs, ``startup_hook``, ``work_dir``, ...) are
accepted and ignored.
"""

from __future__ import annotations

import copy
from typing import Any

_ENVIRONMENT_KEYS = (
    "environment_variables",
    "image",
    "force_pull_image",
    "registry_auth",
    "add_capabilities",
    "drop_capabilities",
)
_IGNORED_KEYS = frozenset(
    {
        "dtrain_network_interface",
        "nccl_port_range",
        "gloo_port_range",
        "network_mode",
        "cpu_pod_spec",
        "gpu_pod_spec",
        "checkpoint_gc_pod_spec",
        "work_dir",
        "startup_hook",
        "kubernetes",
    }
)
KNOWN_KEYS = frozenset(
    {*_ENVIRONMENT_KEYS, "bind_mounts", "devices", "shm_size_bytes", "preemption_timeout"}
    | {"log_policies", "slurm", "pbs"}
    | _IGNORED_KEYS
)
_EXPERIMENT_ONLY = ("preemption_timeout", "log_policies", "slurm", "pbs")


def _env_name(entry: Any) -> str:
    return str(entry).partition("=")[0]


def _by_device(value: Any) -> dict[str, list[Any]]:
    if isinstance(value, dict):
        return {k: list(value.get(k) or []) for k in ("cpu", "cuda", "rocm")}
    return {k: list(value or []) for k in ("cpu", "cuda", "rocm")}


def _join_env(master: Any, pool: Any) -> Any:
    """The pool's variables first, then the master's whose names the pool does not set."""
    if isinstance(master, list) and isinstance(pool, list):
        names = {_env_name(e) for e in pool}
        return [*pool, *(e for e in master if _env_name(e) not in names)]
    ours, theirs = _by_device(master), _by_device(pool)
    return {k: _join_env(ours[k], theirs[k]) for k in ("cpu", "cuda", "rocm")}


def merged(master: dict[str, Any] | None, pool: dict[str, Any] | None) -> dict[str, Any]:
    """The master's defaults with the pool's over them (environment variables joined by name)."""
    out = copy.deepcopy(master or {})
    for key, value in (pool or {}).items():
        if value is None:
            continue
        if key == "environment_variables" and out.get(key):
            out[key] = _join_env(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def as_config(defaults: dict[str, Any], experiment: bool = True) -> dict[str, Any]:
    """The partial workload config the defaults stand for (the table of the module docstring)."""
    config: dict[str, Any] = {}
    environment = {k: defaults[k] for k in _ENVIRONMENT_KEYS if defaults.get(k) is not None}
    if environment:
        config["environment"] = copy.deepcopy(environment)
    if defaults.get("bind_mounts"):
        config["bind_mounts"] = copy.deepcopy(defaults["bind_mounts"])
    resources: dict[str, Any] = {}
    if defaults.get("devices"):
        resources["devices"] = copy.deepcopy(defaults["devices"])
    if defaults.get("shm_size_bytes"):
        resources["shm_size"] = defaults["shm_size_bytes"]
    if resources:
        config["resources"] = resources
    if experiment:
        for key in _EXPERIMENT_ONLY:
            if defaults.get(key):
                config[key] = copy.deepcopy(defaults[key])
    return config


def check(section: Any, field: str) -> dict[str, Any]:
    """A ``task_container_defaults`` section; ValueError naming the field when it is malformed."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ValueError(f"{field}: must be a mapping")
    for key in section:
        if key not in KNOWN_KEYS:
            raise ValueError(f"{field}.{key}: unknown field")
    from determined import config as expconf

    fragment = as_config(section)
    # Upstream's defaults carry docker's image names etc.: check them as an experiment would.
    problems = expconf.sanity_check(fragment)
    if problems:
        raise ValueError("; ".join(f"{field} ({p})" for p in problems))
    return section


def pools(section: Any) -> dict[str, dict[str, Any]]:
    """``resource_pools`` (upstream's list of ``{pool_name, task_container_defaults, ...}``) as
    pool name → its ``task_container_defaults``; ValueError naming the field when malformed."""
    if section is None:
        return {}
    if not isinstance(section, list):
        raise ValueError("resource_pools: must be a list of pools (each with a pool_name)")
    out: dict[str, dict[str, Any]] = {}
    for i, pool in enumerate(section):
        where = f"resource_pools[{i}]"
        if not isinstance(pool, dict):
            raise ValueError(f"{where}: must be a mapping with a pool_name")
        name = pool.get("pool_name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.pool_name: required (a non-empty string)")
        if name in out:
            raise ValueError(f"{where}.pool_name: pool {name!r} is listed twice")
        out[name] = check(pool.get("task_container_defaults"), f"{where}.task_container_defaults")
    return out


def with_container_defaults(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """A task's ``config`` with what it leaves out taken from ``defaults`` (a pool's
    ``task_container_defaults``); the config itself when there are none."""
    if not defaults:
        return config
    from determined.master._core._config_merge import merge_template

    return merge_template(config, as_config(defaults, experiment=False))


def with_experiment_defaults(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """An experiment's ``config`` (before validation) with what it leaves out taken from
    ``defaults``; the config itself when there are none."""
    if not defaults:
        return config
    from determined.master._core._config_merge import merge_template

    return merge_template(config, as_config(defaults, experiment=True))
