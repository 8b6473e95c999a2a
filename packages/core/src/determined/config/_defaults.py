"""Merging configs (user over defaults), det's schema defaults, and normalising legacy shapes."""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Mapping
from typing import Any

from determined.config import _searcher, _sections
from determined.config._hparams import is_definition, normalize_hyperparameters

DEFAULT_CPU_IMAGE = "determinedai/pytorch-ngc-dev:0736b6d"
DEFAULT_CUDA_IMAGE = "determinedai/pytorch-ngc-dev:0736b6d"
DEFAULT_ROCM_IMAGE = "determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d"
DEFAULT_LOG_POLICIES = (
    {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*"},
    {"name": "ECC Error", "pattern": ".*uncorrectable ECC error encountered.*"},
)
PERIOD_DEFAULT = {"batches": 0}
RECORDS_PER_EPOCH_DEFAULT = 0
SCHEDULING_UNIT_DEFAULT = 100
OPTIMIZATIONS_DEFAULTS: dict[str, Any] = {
    "aggregation_frequency": 1,
    "average_aggregated_gradients": True,
    "average_training_metrics": True,
    "gradient_compression": False,
    "grad_updates_size_file": None,
    "mixed_precision": "O0",
    "tensor_fusion_threshold": 64,
    "tensor_fusion_cycle_time": 1,
    "auto_tune_tensor_fusion": False,
}
_DEVICE_TYPES = ("cpu", "cuda", "rocm")
_LENGTH_PATHS = ("min_validation_period", "min_checkpoint_period", "searcher.max_length")
_MOUNT_LISTS = ("bind_mounts", "resources.devices")
_UNIONS = {
    "searcher": ("name", _searcher.COMMON_KEYS),
    "checkpoint_storage": ("type", tuple(_sections.STORAGE_GC)),
}

_ADJECTIVES = (
    "amber", "brave", "calm", "daring", "eager", "fuzzy", "gentle", "humble", "icy", "jolly",
    "keen", "lively", "mellow", "nimble", "olive", "plucky", "quiet", "rapid", "sunny", "tidy",
    "upbeat", "vivid", "witty", "young", "zesty",
)  # fmt: skip
_NOUNS = (
    "badger", "canyon", "dolphin", "ember", "falcon", "glacier", "harbor", "island", "jaguar",
    "kettle", "lantern", "meadow", "nebula", "orchard", "pebble", "quartz", "river", "summit",
    "tulip", "urchin", "valley", "walrus", "yarrow", "zephyr", "comet", "otter",
)  # fmt: skip


def petname() -> str:
    """A random ``adjective-noun-noun`` name for an experiment."""
    return "-".join((random.choice(_ADJECTIVES), random.choice(_NOUNS), random.choice(_NOUNS)))


def schema_defaults() -> dict[str, Any]:
    """The defaults every experiment config gets, fresh per call (a new name and seed each time)."""
    return {
        "name": f"Experiment ({petname()})",
        "description": None,
        "labels": [],
        "data": {},
        "entrypoint": None,
        "hyperparameters": {},
        "resources": {
            "slots_per_trial": 1,
            "max_slots": None,
            "weight": 1,
            "priority": None,
            "resource_pool": "",
            "is_single_node": None,
            "shm_size": None,
            "devices": [],
        },
        "checkpoint_policy": "best",
        "max_restarts": 5,
        "min_validation_period": dict(PERIOD_DEFAULT),
        "min_checkpoint_period": dict(PERIOD_DEFAULT),
        "records_per_epoch": RECORDS_PER_EPOCH_DEFAULT,
        "scheduling_unit": SCHEDULING_UNIT_DEFAULT,
        "perform_initial_validation": False,
        "reproducibility": {"experiment_seed": int(time.time()) & 0xFFFFFFFF},
        "environment": {
            "image": {
                "cpu": DEFAULT_CPU_IMAGE,
                "cuda": DEFAULT_CUDA_IMAGE,
                "rocm": DEFAULT_ROCM_IMAGE,
            },
            "environment_variables": {key: [] for key in _DEVICE_TYPES},
            "ports": {},
            "proxy_ports": [],
            "force_pull_image": False,
            "registry_auth": None,
            "add_capabilities": [],
            "drop_capabilities": [],
            "pod_spec": None,
            "python": None,
            "venv": None,
        },
        "bind_mounts": [],
        "workspace": "",
        "project": "",
        "log_policies": [dict(policy) for policy in DEFAULT_LOG_POLICIES],
        "retention_policy": None,
        "preemption_timeout": None,
        "profiling": {
            "enabled": False,
            "begin_on_batch": 0,
            "end_after_batch": None,
            "sync_timings": True,
        },
        "optimizations": dict(OPTIMIZATIONS_DEFAULTS),
        "integrations": None,
        "slurm": {},
        "pbs": {},
        "debug": False,
    }


def merge(user: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``defaults`` under ``user``: user values win, mappings merge recursively.

    Special cases follow Determined: ``null`` never overrides; hyperparameters merge only where both
    sides are nested dicts; ``searcher`` and ``checkpoint_storage`` merge fully only when both name the
    same ``name``/``type`` (or the user names none), else only their common keys; ``bind_mounts`` and
    ``resources.devices`` append the defaults' entries whose container path the user does not use;
    ``log_policies`` add the defaults' policies whose name the user does not use; Length objects and
    other lists are taken whole from the user.
    """
    result = _merge(user, defaults, "")
    return result if isinstance(result, dict) else dict(user)


def _merge(user: Any, default: Any, path: str) -> Any:
    if user is None:
        return copy.deepcopy(default)
    if default is None:
        return copy.deepcopy(user)
    if path == "environment.environment_variables":
        return _merge_env_vars(user, default)
    if isinstance(user, list) and isinstance(default, list):
        if path in _MOUNT_LISTS:
            used = {_container_path(entry) for entry in user}
            extra = [entry for entry in default if _container_path(entry) not in used]
            return copy.deepcopy(user + extra)
        if path == "log_policies":
            names = {p.get("name") for p in user if isinstance(p, Mapping) and p.get("name")}
            extra = [p for p in default if not isinstance(p, Mapping) or p.get("name") not in names]
            return copy.deepcopy(user + extra)
        return copy.deepcopy(user)
    if not isinstance(user, Mapping) or not isinstance(default, Mapping) or path in _LENGTH_PATHS:
        return copy.deepcopy(user)
    if path == "hyperparameters":
        return _merge_hparams(user, default)
    if path in _UNIONS:  # a default of another kind contributes only the keys all kinds share
        tag, common = _UNIONS[path]
        if user.get(tag) is not None and default.get(tag) not in (None, user.get(tag)):
            default = {k: v for k, v in default.items() if k in common}
    result = {key: copy.deepcopy(value) for key, value in user.items()}
    for key, value in default.items():
        result[key] = _merge(user.get(key), value, f"{path}.{key}" if path else str(key))
    return result


def _container_path(entry: Any) -> Any:
    if isinstance(entry, Mapping):
        return entry.get("container_path")
    if isinstance(entry, str):
        parts = entry.split(":")
        return parts[1] if len(parts) > 1 else entry
    return None


def _merge_hparams(user: Mapping[str, Any], default: Mapping[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(dict(user))
    for name, value in default.items():
        mine = user.get(name)
        if mine is None:
            result[name] = copy.deepcopy(value)
        elif _is_nested(mine) and _is_nested(value):
            result[name] = _merge_hparams(mine, value)
    return result


def _is_nested(value: Any) -> bool:
    return isinstance(value, Mapping) and not is_definition(value)


def _merge_env_vars(user: Any, default: Any) -> Any:
    """Defaults' variables first, then the user's (later definitions win), per device type."""
    mine, theirs = _env_map(user), _env_map(default)
    if mine is None or theirs is None:
        return copy.deepcopy(user)
    keys = dict.fromkeys([*theirs, *mine])
    return {key: theirs.get(key, []) + mine.get(key, []) for key in keys}


def _env_map(value: Any) -> dict[str, list[Any]] | None:
    if isinstance(value, list):
        return {key: list(value) for key in _DEVICE_TYPES}
    if isinstance(value, Mapping):
        result = {key: list(v) for key, v in value.items() if isinstance(v, list)}
        if "gpu" in result:
            result["cuda"] = result.get("cuda", []) + result.pop("gpu")
        return result
    return None


def normalize(config: dict[str, Any]) -> dict[str, Any]:
    """Rewrite shorthand and legacy shapes into the one stored shape (mutates and returns ``config``).

    ``environment.image`` string → ``{cpu, cuda, rocm}`` (legacy ``gpu`` → ``cuda``); environment
    variables list → per-device map; shorthand hyperparameters → ``{type: const, val}``.
    """
    environment = config.get("environment")
    if isinstance(environment, dict):
        image = environment.get("image")
        if isinstance(image, str):
            environment["image"] = {key: image for key in _DEVICE_TYPES}
        elif isinstance(image, dict) and "gpu" in image:
            gpu = image.pop("gpu")
            if image.get("cuda") is None:
                image["cuda"] = gpu
        env_vars = _env_map(environment.get("environment_variables"))
        if env_vars is not None:
            environment["environment_variables"] = env_vars
    hparams = config.get("hyperparameters")
    if isinstance(hparams, Mapping):
        config["hyperparameters"] = normalize_hyperparameters(hparams)
    return config


def fill_unions(config: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """Apply the defaults that depend on a union tag (searcher name, storage type) and list entries.

    Call this after the schema defaults were merged in: it also drops log policies that only name a
    default policy, which is how a user disables one.
    """
    searcher = config.get("searcher")
    if isinstance(searcher, Mapping):
        config["searcher"] = _searcher.fill_searcher(searcher, warnings)
    storage = config.get("checkpoint_storage")
    if isinstance(storage, Mapping):
        filled = dict(storage)
        kind_defaults = _sections.STORAGE_DEFAULTS.get(filled.get("type"), {})  # type: ignore[arg-type]
        for key, value in {**_sections.STORAGE_GC_DEFAULTS, **kind_defaults}.items():
            if filled.get(key) is None:
                filled[key] = copy.deepcopy(value)
        config["checkpoint_storage"] = filled
    policies = config.get("log_policies")
    if isinstance(policies, list):  # a policy that only names a default (no pattern) disables it
        config["log_policies"] = [
            p
            for p in policies
            if not (isinstance(p, Mapping) and p.get("pattern") is None and p.get("name"))
        ]
    mounts = config.get("bind_mounts")
    if isinstance(mounts, list):
        config["bind_mounts"] = [
            {
                "read_only": False,
                "propagation": "rprivate",
                **{k: v for k, v in m.items() if v is not None},
            }
            if isinstance(m, Mapping)
            else m
            for m in mounts
        ]
    environment = config.get("environment")
    if isinstance(environment, dict) and isinstance(environment.get("proxy_ports"), list):
        port_defaults = {"proxy_tcp": False, "unauthenticated": False, "default_service_id": False}
        environment["proxy_ports"] = [
            {**port_defaults, **{k: v for k, v in p.items() if v is not None}}
            if isinstance(p, Mapping)
            else p
            for p in environment["proxy_ports"]
        ]
    return config
