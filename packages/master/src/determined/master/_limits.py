"""Guards for a shared master: size limits, per-user quotas and the allowed checkpoint roots.

Everything here is computed from the request before the master does the work it guards: a grid's
size is a product of counts (nothing is enumerated), a hyperparameter section's size is its JSON
length, a storage path is compared with the roots the admin allows. Each refusal is an
:class:`~determined.master._wire.APIError` that names the field, the limit and the master-config
key an admin changes to raise it (``docs/security.md``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

from determined.master._wire import APIError

MiB = 1024 * 1024

_DEFAULT_CONTEXT_BYTES = 95 * MiB


@dataclasses.dataclass(frozen=True)
class Limits:
    """The master config's ``limits:`` section (0 or a negative value means "no limit").

    Attributes:
        max_search_trials: the most trials one search may plan: a grid's point count (the
            product of every axis' length) or ``searcher.max_trials`` (random, ASHA, plugins),
            PBT's ``population_size * num_rounds``.
        max_request_body_bytes: the largest HTTP request body (413 beyond it).
        max_context_bytes: the largest context directory (the files' total size, uncompressed).
        max_hyperparameters_bytes: the largest ``hyperparameters`` section, as JSON.
        max_active_experiments_per_user: non-terminal experiments one user may own at once.
        max_active_tasks_per_user: commands, notebooks, shells and TensorBoards one user may
            have running (not yet terminated) at once.
        admins_exempt: admins skip the two per-user quotas.
    """

    max_search_trials: int = 100_000
    max_request_body_bytes: int = 144 * MiB
    max_context_bytes: int = _DEFAULT_CONTEXT_BYTES
    max_hyperparameters_bytes: int = 1 * MiB
    max_active_experiments_per_user: int = 0
    max_active_tasks_per_user: int = 0
    admins_exempt: bool = True

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> Limits:
        """Parse the ``limits`` section; ValueError naming ``limits.<key>`` for a bad entry."""
        if section is None:
            return cls()
        if not isinstance(section, Mapping):
            raise ValueError(f"limits: must be a mapping, got {type(section).__name__}")
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in section.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise ValueError(f"limits.{key}: unknown limit (known: {', '.join(sorted(known))})")
            if name == "admins_exempt":
                if not isinstance(value, bool):
                    raise ValueError(f"limits.{key}: must be true or false, got {value!r}")
                values[name] = value
                continue
            if value is None:
                values[name] = 0
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"limits.{key}: must be an integer, got {value!r}")
            values[name] = value
        return cls(**values)


def _over(value: int, limit: int) -> bool:
    return limit > 0 and value > limit


def _positive_int(section: Mapping[str, Any], key: str, default: int) -> int:
    value = section.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise APIError(400, f"searcher.{key}: must be an integer, got {value!r}")
    return value


def search_size(config: Mapping[str, Any]) -> int:
    """How many trials the searcher of a validated experiment config may create, computed from
    counts alone (a grid is never enumerated here)."""
    from determined.searcher import grid_size

    section = config.get("searcher") or {}
    if not isinstance(section, Mapping):
        return 1
    name = section.get("name")
    if name == "single":
        return 1
    if name == "grid":
        hparams = config.get("hyperparameters") or {}
        if not isinstance(hparams, Mapping):
            return 1
        try:
            return grid_size(hparams)
        except ValueError as e:
            raise APIError(400, f"searcher: {e}") from None
    if name == "pbt":
        population = _positive_int(section, "population_size", 1)
        rounds = _positive_int(section, "num_rounds", 1)
        return max(population, 1) * max(rounds, 1)
    return _positive_int(section, "max_trials", 1)


def check_search(config: Mapping[str, Any], limits: Limits) -> None:
    """Refuse a search that plans more trials than ``limits.max_search_trials`` (400), and a
    ``hyperparameters`` section larger than ``limits.max_hyperparameters_bytes``."""
    hparams = config.get("hyperparameters")
    if hparams is not None and limits.max_hyperparameters_bytes > 0:
        try:
            size = len(json.dumps(hparams, default=str))
        except (TypeError, ValueError, RecursionError) as e:
            raise APIError(400, f"hyperparameters: not serializable: {e}") from None
        if size > limits.max_hyperparameters_bytes:
            raise APIError(
                400,
                f"hyperparameters: {size} bytes as JSON, over the master's limit of"
                f" {limits.max_hyperparameters_bytes} (an admin raises it with"
                " limits.max_hyperparameters_bytes in the master config)",
            )
    size = search_size(config)
    if _over(size, limits.max_search_trials):
        shown = f"{size:.3e}" if size >= 10**12 else str(size)
        name = (config.get("searcher") or {}).get("name")
        what = "grid points" if name == "grid" else "trials"
        raise APIError(
            400,
            f"searcher: this search would create {shown} {what}, over the master's limit of"
            f" {limits.max_search_trials} (lower the counts / max_trials, or ask an admin to"
            " raise limits.max_search_trials in the master config)",
        )


def check_experiment_config(master_config: Any, config: Mapping[str, Any]) -> None:
    """The shared-master guards of a validated experiment config, before anything is enumerated
    or stored: the search size and hyperparameters (:func:`check_search`) and the storage roots.

    Args:
        master_config: the master's ``MasterConfig`` (its limits and storage roots).
        config: the validated experiment config.
    """
    check_search(config, master_config.limits_config())
    roots = master_config.storage_roots()
    check_storage_roots(config.get("checkpoint_storage"), roots, "checkpoint_storage")


def quota_error(kind: str, active: int, limit: int, key: str) -> APIError:
    """A 429 for a user at a per-user quota, naming the limit and how an admin raises it."""
    return APIError(
        429,
        f"you already have {active} active {kind} (the master allows {limit} per user):"
        f" wait for one to finish or kill one; an admin raises the limit with limits.{key}"
        " in the master config",
    )


# ----------------------------------------------------------------------------------------------
# storage roots


def default_storage_roots(
    data_dir: str | os.PathLike[str], storage: Mapping[str, Any]
) -> list[str]:
    """The roots allowed when the master config names none: the data dir, the master's own
    checkpoint directory, and the system temporary directory."""
    roots = [os.fspath(data_dir), tempfile.gettempdir()]
    roots.extend(p for _, p in local_storage_paths(storage))
    return roots


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def local_storage_paths(storage: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, absolute path)`` for every place on this machine a ``checkpoint_storage``
    section writes to (``host_path`` joined with ``storage_path``, a directory's
    ``container_path``, a local fsspec URL, a ``temp_dir``)."""
    out: list[tuple[str, str]] = []
    kind = storage.get("type")
    if kind == "shared_fs":
        host = storage.get("host_path")
        if isinstance(host, str) and host:
            out.append(("host_path", host))
            sub = storage.get("storage_path") or storage.get("checkpoint_path")
            if isinstance(sub, str) and sub:
                field = "storage_path" if storage.get("storage_path") else "checkpoint_path"
                out.append((field, os.path.join(host, sub)))
    elif kind == "directory":
        path = storage.get("container_path")
        if isinstance(path, str) and path:
            out.append(("container_path", path))
    elif kind == "fsspec":
        url = storage.get("url")
        if isinstance(url, str) and url:
            if "://" not in url:
                out.append(("url", url))
            else:
                scheme, rest = url.split("://", 1)
                if scheme.lower() in ("file", "local"):
                    out.append(("url", "/" + rest.lstrip("/")))
    temp_dir = storage.get("temp_dir")
    if isinstance(temp_dir, str) and temp_dir:
        out.append(("temp_dir", temp_dir))
    return out


def _inside(path: str, roots: Iterable[str]) -> bool:
    for root in roots:
        try:
            if os.path.commonpath([path, root]) == root:
                return True
        except ValueError:
            continue
    return False


def check_storage_roots(storage: Any, roots: Iterable[str], field: str) -> None:
    """Refuse a ``checkpoint_storage`` section that writes outside ``roots`` on this machine.

    Args:
        storage: the section (non-mappings pass: config validation reports them).
        roots: the allowed directories.
        field: how the section is named in the error (``checkpoint_storage``,
            ``checkpointStorageConfig``).

    Raises:
        APIError: 400 naming ``<field>.<key>`` and the allowed roots.
    """
    if not isinstance(storage, Mapping):
        return
    real_roots = [_real(r) for r in roots]
    for key, path in local_storage_paths(storage):
        if not os.path.isabs(os.path.expanduser(path)):
            continue  # config validation asks for an absolute path and names the field
        if not _inside(_real(path), real_roots):
            raise APIError(
                400,
                f"{field}.{key}: {path!r} is outside the storage roots this master allows"
                f" ({', '.join(real_roots) or 'none'}); an admin adds a directory with"
                " checkpoint_storage_roots in the master config",
            )
