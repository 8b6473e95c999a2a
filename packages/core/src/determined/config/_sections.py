"""Checkers for ``resources``, ``environment``, ``bind_mounts`` and ``checkpoint_storage``."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from determined.config import _checks as c
from determined.config._checks import Context, describe, join

# --- resources -------------------------------------------------------------------------------------

_SHM_SIZE = re.compile(r"^\d+(\.\d+)?\s*([KMGTP]i?B?|B)?$", re.IGNORECASE)


def _shm_size(ctx: Context, value: Any, path: str) -> None:
    if c.is_int(value):
        if value < 0:
            ctx.error(path, "must be ≥ 0")
    elif not isinstance(value, str) or not _SHM_SIZE.match(value.strip()):
        ctx.error(
            path,
            f'must be a number of bytes or a size such as "128M" or "1.5G", got {describe(value)}',
        )


def _device(ctx: Context, value: Any, path: str) -> None:
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]):
            ctx.error(
                path, f'must look like "/host/path:/container/path[:mode]", got {describe(value)}'
            )
        return
    if c.check_fields(
        ctx,
        value,
        path,
        {"host_path": c.string(), "container_path": c.string(), "mode": c.string()},
    ):
        c.require(ctx, value, path, "host_path", "container_path")


RESOURCES: dict[str, c.Checker] = {
    "slots_per_trial": c.integer(0),
    "max_slots": c.integer(0),
    "weight": c.number(0),
    "priority": c.integer(1, 99),
    "resource_pool": c.string(),
    "is_single_node": c.boolean(),
    "shm_size": _shm_size,
    "devices": c.list_of(_device),
    "native_parallel": c.deprecated(c.boolean(), "it is ignored"),
    "agent_label": c.deprecated(c.string(), "it is ignored; use resource_pool"),
}
RESOURCES_DISALLOWED = {
    "slots": "not allowed for experiments"
}  # commands use it; trials: slots_per_trial

# --- environment -----------------------------------------------------------------------------------

_DEVICE_TYPES = ("cpu", "cuda", "rocm")


def _image(ctx: Context, value: Any, path: str) -> None:
    if isinstance(value, str):
        if not value:
            ctx.error(path, "must not be empty")
        return
    if not isinstance(value, Mapping):
        ctx.error(
            path,
            f"must be an image name or a mapping of cpu/cuda/rocm to images, got {describe(value)}",
        )
        return
    c.check_fields(
        ctx,
        value,
        path,
        {
            **{key: c.string(nonempty=True) for key in _DEVICE_TYPES},
            "gpu": c.deprecated(c.string(nonempty=True), "read as cuda"),
        },
    )


def _env_var(ctx: Context, value: Any, path: str) -> None:
    if not isinstance(value, str):
        ctx.error(path, f"must be a string NAME=VALUE, got {describe(value)}")
    elif not value.partition("=")[0]:
        ctx.error(path, f"must be of the form NAME=VALUE, got {describe(value)}")


def _environment_variables(ctx: Context, value: Any, path: str) -> None:
    items = c.list_of(_env_var)
    if isinstance(value, list):
        items(ctx, value, path)
        return
    if not isinstance(value, Mapping):
        ctx.error(
            path,
            f"must be a list of NAME=VALUE strings or a per-device mapping, got {describe(value)}",
        )
        return
    c.check_fields(
        ctx,
        value,
        path,
        {**{key: items for key in _DEVICE_TYPES}, "gpu": c.deprecated(items, "read as cuda")},
    )


def _proxy_port(ctx: Context, value: Any, path: str) -> None:
    fields = {
        "proxy_port": c.integer(1, 65535),
        "proxy_tcp": c.boolean(),
        "unauthenticated": c.boolean(),
        "default_service_id": c.boolean(),
    }
    if c.check_fields(ctx, value, path, fields):
        c.require(ctx, value, path, "proxy_port")


_REGISTRY_AUTH_KEYS = (
    "username",
    "password",
    "auth",
    "email",
    "serveraddress",
    "identitytoken",
    "registrytoken",
)


def _environment(ctx: Context, value: Any, path: str) -> None:
    fields: dict[str, c.Checker] = {
        "image": _image,
        "environment_variables": _environment_variables,
        "ports": c.map_of(c.integer(1, 65535)),
        "proxy_ports": c.list_of(_proxy_port),
        "force_pull_image": c.boolean(),
        "registry_auth": c.obj({key: c.string() for key in _REGISTRY_AUTH_KEYS}),
        "add_capabilities": c.list_of(c.string()),
        "drop_capabilities": c.list_of(c.string()),
        "pod_spec": c.mapping_any(),
        "python": c.string(nonempty=True),
        "venv": c.string(nonempty=True),
    }
    both = (
        isinstance(value, Mapping)
        and value.get("python") is not None
        and value.get("venv") is not None
    )
    if c.check_fields(ctx, value, path, fields) and both:
        ctx.error(join(path, "venv"), "must not be set together with python")


check_environment = _environment

# --- bind mounts -----------------------------------------------------------------------------------


def _absolute(ctx: Context, value: Any, path: str) -> None:
    if not isinstance(value, str):
        ctx.error(path, f"must be a string, got {describe(value)}")
    elif not value.startswith("/"):
        ctx.error(path, "must be an absolute path")


def _container_path(ctx: Context, value: Any, path: str) -> None:
    if not isinstance(value, str):
        ctx.error(path, f"must be a string, got {describe(value)}")
    elif value in (".", "./", ""):
        ctx.error(path, 'must not be "." or empty')


def _bind_mount(ctx: Context, value: Any, path: str) -> None:
    fields = {
        "host_path": _absolute,
        "container_path": _container_path,
        "read_only": c.boolean(),
        "propagation": c.string(),
    }
    if c.check_fields(ctx, value, path, fields):
        c.require(ctx, value, path, "host_path", "container_path")


check_bind_mounts = c.list_of(_bind_mount)

# --- checkpoint storage ----------------------------------------------------------------------------

STORAGE_TYPES = ("shared_fs", "directory", "s3", "gcs", "azure", "fsspec")

STORAGE_GC: dict[str, c.Checker] = {
    "save_experiment_best": c.integer(0),
    "save_trial_best": c.integer(0),
    "save_trial_latest": c.integer(0),
}


def _prefix(ctx: Context, value: Any, path: str) -> None:
    if not isinstance(value, str):
        ctx.error(path, f"must be a string, got {describe(value)}")
    elif ".." in value.split("/"):
        ctx.error(path, 'must not contain ".." segments')


_STORAGE: dict[str, dict[str, c.Checker]] = {
    "shared_fs": {
        "host_path": _absolute,
        "storage_path": c.string(),
        "propagation": c.string(),
        "container_path": c.string(),
        "checkpoint_path": c.string(),
        "tensorboard_path": c.string(),
    },
    "directory": {"container_path": c.string(nonempty=True)},
    "s3": {
        "bucket": c.string(nonempty=True),
        "access_key": c.string(),
        "secret_key": c.string(),
        "endpoint_url": c.string(),
        "prefix": _prefix,
    },
    "gcs": {"bucket": c.string(nonempty=True), "prefix": _prefix},
    "azure": {
        "container": c.string(nonempty=True),
        "connection_string": c.string(),
        "account_url": c.string(),
        "credential": c.string(),
    },
    "fsspec": {"url": c.string(nonempty=True), "storage_options": c.mapping_any()},
}
_STORAGE_REQUIRED = {
    "shared_fs": ("host_path",),
    "directory": ("container_path",),
    "s3": ("bucket",),
    "gcs": ("bucket",),
    "azure": ("container",),
    "fsspec": ("url",),
}
STORAGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "shared_fs": {"storage_path": None, "propagation": "rprivate"},
    "directory": {},
    "s3": {"access_key": None, "secret_key": None, "endpoint_url": None, "prefix": None},
    "gcs": {"prefix": None},
    "azure": {"connection_string": None, "account_url": None, "credential": None},
    "fsspec": {"storage_options": {}},
}
STORAGE_GC_DEFAULTS = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
_ANY_STORAGE = {key: check for fields in _STORAGE.values() for key, check in fields.items()}


def check_checkpoint_storage(ctx: Context, value: Any, path: str) -> None:
    """Check a ``checkpoint_storage`` block, a union on ``type``."""
    if not isinstance(value, Mapping):
        ctx.error(path, f"must be a mapping, got {describe(value)}")
        return
    kind = value.get("type")
    if kind is None:
        # A partial block (GC knobs only, say): the type may come from the master's default.
        c.check_fields(ctx, value, path, {"type": c.anything(), **STORAGE_GC, **_ANY_STORAGE})
        if ctx.complete:
            ctx.error(join(path, "type"), f"required, one of {', '.join(STORAGE_TYPES)}")
        return
    if kind not in STORAGE_TYPES:
        ctx.error(
            join(path, "type"), f"must be one of {', '.join(STORAGE_TYPES)}, got {describe(kind)}"
        )
        return
    fields = {"type": c.anything(), **STORAGE_GC, **_STORAGE[kind]}
    c.check_fields(ctx, value, path, fields, unknown=f"unknown field for {kind} storage")
    if ctx.complete:
        c.require(ctx, value, path, *_STORAGE_REQUIRED[kind], why=f" for {kind} storage")
    if kind == "shared_fs":
        _check_storage_path(ctx, value, path)
    elif kind == "azure":
        has_conn = value.get("connection_string") is not None
        has_url = value.get("account_url") is not None
        if (has_conn and has_url) or (ctx.complete and not has_conn and not has_url):
            ctx.error(
                join(path, "connection_string"),
                "exactly one of connection_string or account_url must be set",
            )
        if has_conn and value.get("credential") is not None:
            ctx.error(join(path, "credential"), "must not be set together with connection_string")


def _check_storage_path(ctx: Context, value: Mapping[str, Any], path: str) -> None:
    storage_path, host_path = value.get("storage_path"), value.get("host_path")
    if not isinstance(storage_path, str) or not storage_path.startswith("/"):
        if isinstance(storage_path, str) and ".." in storage_path.split("/"):
            ctx.error(join(path, "storage_path"), 'must not contain ".." segments')
        return
    if not isinstance(host_path, str):
        return
    storage, host = posixpath.normpath(storage_path), posixpath.normpath(host_path)
    if storage != host and not storage.startswith(host.rstrip("/") + "/"):
        ctx.error(
            join(path, "storage_path"),
            "must either be a relative directory or a subdirectory of host_path",
        )
