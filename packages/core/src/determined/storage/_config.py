"""Turn a ``checkpoint_storage`` config (dict or string shortcut) into a storage manager."""

from __future__ import annotations

import os
import posixpath
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from determined.storage._base import StorageManager
from determined.storage._fsspec import FsspecStorageManager

GC_KEYS = frozenset({"save_experiment_best", "save_trial_best", "save_trial_latest"})
"""Checkpoint garbage-collection policy keys: read by the master, ignored here."""


def _field(name: str) -> str:
    return f"checkpoint_storage.{name}"


def _check_keys(config: Mapping[str, Any], allowed: set[str], kind: str) -> None:
    for key in config:
        if key not in allowed:
            raise ValueError(
                f"{_field(key)}: unexpected key for storage type {kind!r}"
                f" (allowed: {', '.join(sorted(allowed))})"
            )


def _string(config: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = config.get(key)
    if value is None:
        if required:
            raise ValueError(f"{_field(key)}: required")
        return None
    if not isinstance(value, str) or (required and not value):
        raise ValueError(f"{_field(key)}: expected a non-empty string, got {value!r}")
    return value


def normalize_prefix(prefix: str | None) -> str:
    """``/a//b/`` -> ``a/b``; a ``..`` segment raises ValueError."""
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise ValueError(f"{_field('prefix')}: expected a string, got {prefix!r}")
    segments = [s for s in prefix.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise ValueError(f"{_field('prefix')}: {prefix!r} may not contain '..' segments")
    return "/".join(segments)


def _bucket_root(config: Mapping[str, Any], key: str) -> str:
    bucket = _string(config, key, required=True)
    assert bucket is not None
    if "/" in bucket:
        raise ValueError(f"{_field(key)}: {bucket!r} may not contain '/' (use prefix)")
    prefix = normalize_prefix(config.get("prefix"))
    return posixpath.join(bucket, prefix) if prefix else bucket


def _local_fs() -> Any:
    from fsspec.implementations.local import LocalFileSystem

    return LocalFileSystem()


def _build_shared_fs(config: Mapping[str, Any], container_path: str | None) -> StorageManager:
    _check_keys(
        config,
        {
            "host_path",
            "storage_path",
            "container_path",
            "propagation",
            "checkpoint_path",
            "tensorboard_path",
        },
        "shared_fs",
    )
    host_path = _string(config, "host_path", required=True)
    assert host_path is not None
    if not os.path.isabs(host_path):
        raise ValueError(f"{_field('host_path')}: must be an absolute path, got {host_path!r}")
    host_path = os.path.normpath(host_path)
    # Legacy configs named the sub-directory checkpoint_path; tensorboard_path is not ours.
    storage_path = _string(config, "storage_path") or _string(config, "checkpoint_path")
    base = container_path if container_path is not None else host_path
    if storage_path:
        full = os.path.normpath(os.path.join(host_path, storage_path))
        if os.path.commonpath([full, host_path]) != host_path:
            raise ValueError(
                f"{_field('storage_path')}: {storage_path!r} must be inside host_path {host_path!r}"
            )
        relative = os.path.relpath(full, host_path)
        if relative != ".":
            base = os.path.join(base, relative)
    return FsspecStorageManager(_local_fs(), base, direct_access=True)


def _build_directory(config: Mapping[str, Any], container_path: str | None) -> StorageManager:
    _check_keys(config, {"container_path"}, "directory")
    path = _string(config, "container_path", required=True)
    assert path is not None
    if not os.path.isabs(path):
        raise ValueError(f"{_field('container_path')}: must be an absolute path, got {path!r}")
    return FsspecStorageManager(_local_fs(), os.path.normpath(path), direct_access=True)


def _missing_extra(package: str, extra: str) -> ImportError:
    return ImportError(
        f"checkpoint storage type {extra!r} needs the {package!r} package:"
        f" pip install det-core[{extra}]"
    )


def _build_s3(config: Mapping[str, Any], container_path: str | None) -> StorageManager:
    _check_keys(
        config,
        {"bucket", "access_key", "secret_key", "endpoint_url", "prefix", "temp_dir"},
        "s3",
    )
    root = _bucket_root(config, "bucket")
    key = _string(config, "access_key")
    secret = _string(config, "secret_key")
    endpoint_url = _string(config, "endpoint_url")
    temp_dir = _string(config, "temp_dir")
    try:
        import s3fs
    except ImportError:
        raise _missing_extra("s3fs", "s3") from None
    options: dict[str, Any] = {}
    if key is not None or secret is not None:
        options.update(key=key, secret=secret)
    if endpoint_url:
        options["client_kwargs"] = {"endpoint_url": endpoint_url}
    fs = s3fs.S3FileSystem(**options)
    return FsspecStorageManager(fs, root, direct_access=False, temp_dir=temp_dir)


def _build_gcs(config: Mapping[str, Any], container_path: str | None) -> StorageManager:
    _check_keys(config, {"bucket", "prefix", "temp_dir"}, "gcs")
    root = _bucket_root(config, "bucket")
    temp_dir = _string(config, "temp_dir")
    try:
        import gcsfs
    except ImportError:
        raise _missing_extra("gcsfs", "gcs") from None
    return FsspecStorageManager(gcsfs.GCSFileSystem(), root, direct_access=False, temp_dir=temp_dir)


def _build_azure(config: Mapping[str, Any], container_path: str | None) -> StorageManager:
    _check_keys(
        config,
        {"container", "connection_string", "account_url", "credential", "temp_dir"},
        "azure",
    )
    container = _string(config, "container", required=True)
    assert container is not None
    connection_string = _string(config, "connection_string")
    account_url = _string(config, "account_url")
    credential = _string(config, "credential")
    temp_dir = _string(config, "temp_dir")
    if (connection_string is None) == (account_url is None):
        raise ValueError(
            f"{_field('connection_string')}: give exactly one of connection_string or account_url"
        )
    options: dict[str, Any] = {}
    if connection_string is not None:
        if credential is not None:
            raise ValueError(f"{_field('credential')}: only valid together with account_url")
        options["connection_string"] = connection_string
    else:
        assert account_url is not None
        host = urllib.parse.urlparse(account_url).netloc
        if not host:
            raise ValueError(f"{_field('account_url')}: not a URL: {account_url!r}")
        options.update(account_name=host.split(".")[0], account_host=host)
        if credential is not None:
            options["credential"] = credential
    try:
        import adlfs
    except ImportError:
        raise _missing_extra("adlfs", "azure") from None
    fs = adlfs.AzureBlobFileSystem(**options)
    return FsspecStorageManager(fs, container, direct_access=False, temp_dir=temp_dir)


def _build_fsspec(config: Mapping[str, Any], container_path: str | None) -> StorageManager:
    _check_keys(config, {"url", "storage_options", "temp_dir"}, "fsspec")
    url = _string(config, "url", required=True)
    assert url is not None
    storage_options = config.get("storage_options") or {}
    if not isinstance(storage_options, Mapping):
        raise ValueError(
            f"{_field('storage_options')}: expected a mapping, got {storage_options!r}"
        )
    temp_dir = _string(config, "temp_dir")
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url, **storage_options)
    except (ValueError, ImportError) as exc:
        raise ValueError(f"{_field('url')}: cannot open {url!r}: {exc}") from exc
    from determined.storage._fsspec import _is_local

    return FsspecStorageManager(fs, root, direct_access=_is_local(fs), temp_dir=temp_dir)


_BUILDERS: dict[str, Callable[[Mapping[str, Any], str | None], StorageManager]] = {
    "shared_fs": _build_shared_fs,
    "directory": _build_directory,
    "s3": _build_s3,
    "gcs": _build_gcs,
    "azure": _build_azure,
    "fsspec": _build_fsspec,
}

STORAGE_TYPES = tuple(_BUILDERS)
"""The ``checkpoint_storage.type`` values det-core handles."""


def build(config: Mapping[str, Any], container_path: str | None = None) -> StorageManager:
    """Build the storage manager for a ``checkpoint_storage`` config.

    Args:
        config: e.g. ``{"type": "s3", "bucket": "b", "prefix": "p"}``; GC keys are ignored.
        container_path: for ``shared_fs``, where ``host_path`` is mounted in this process (if not
            at ``host_path`` itself).

    Raises:
        ValueError: naming ``checkpoint_storage.<field>`` for an unknown type or a bad field.
        ImportError: when the type's optional filesystem package is not installed.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"checkpoint_storage: expected a mapping, got {type(config).__name__}")
    kind = config.get("type")
    builder = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if builder is None:
        raise ValueError(
            f"{_field('type')}: unknown storage type {kind!r}"
            f" (expected one of: {', '.join(STORAGE_TYPES)})"
        )
    rest = {k: v for k, v in config.items() if k != "type" and k not in GC_KEYS}
    return builder(rest, container_path)


def to_config(shortcut: str) -> dict[str, Any]:
    """The dict form of a string shortcut: a path, ``file://``, ``s3://``, ``gs://`` or fsspec URL.

    A local path becomes ``shared_fs`` (made absolute); ``s3://b/p`` and ``gs://b/p`` become ``s3`` and
    ``gcs`` configs; any other URL (``az://``, ``memory://``, ...) becomes ``{"type": "fsspec"}``.
    """
    if not isinstance(shortcut, str) or not shortcut:
        raise ValueError(f"checkpoint_storage: expected a path or URL, got {shortcut!r}")
    if "://" not in shortcut:
        return {"type": "shared_fs", "host_path": os.path.abspath(os.path.expanduser(shortcut))}
    parsed = urllib.parse.urlparse(shortcut)
    scheme = parsed.scheme.lower()
    if scheme in ("file", "s3", "gs", "gcs") and (parsed.params or parsed.query or parsed.fragment):
        raise ValueError(f"checkpoint_storage: {shortcut!r} may not have params, query or fragment")
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"checkpoint_storage: {shortcut!r}: a file URL may not name a host")
        if not parsed.path:
            raise ValueError(f"checkpoint_storage: {shortcut!r} names no path")
        return {"type": "shared_fs", "host_path": os.path.abspath(parsed.path)}
    if scheme in ("s3", "gs", "gcs"):
        if not parsed.netloc:
            raise ValueError(f"checkpoint_storage: {shortcut!r} names no bucket")
        config: dict[str, Any] = {
            "type": "s3" if scheme == "s3" else "gcs",
            "bucket": parsed.netloc,
        }
        prefix = normalize_prefix(parsed.path)
        if prefix:
            config["prefix"] = prefix
        return config
    import fsspec

    if scheme not in fsspec.available_protocols():
        raise ValueError(f"checkpoint_storage: {shortcut!r}: unknown URL scheme {scheme!r}")
    return {"type": "fsspec", "url": shortcut}


def from_string(shortcut: str) -> StorageManager:
    """Build the storage manager for a string shortcut (see ``to_config``)."""
    return build(to_config(shortcut))
