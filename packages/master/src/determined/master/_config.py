"""The master's settings: command-line flags and the same keys in a YAML ``--config-file``."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import yaml

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def default_data_dir() -> pathlib.Path:
    """``<user data dir>/det-master`` (platformdirs), where the SQLite file, logs and checkpoints go."""
    import platformdirs

    return pathlib.Path(platformdirs.user_data_dir("det-master", appauthor=False))


@dataclasses.dataclass
class MasterConfig:
    """Everything ``det-master up`` can be told.

    Attributes:
        host: the address to listen on (loopback by default).
        port: the TCP port; 0 picks a free one (tests).
        db: a SQLAlchemy URL; ``None`` means ``sqlite:///<data_dir>/det.sqlite``.
        data_dir: where the database, work directories, logs and the pid file live.
        slots: CPU slots offered by the local resource manager when there is no GPU (None: CPU count).
        checkpoint_storage: a directory (shared_fs) or a full ``checkpoint_storage`` dict; ``None``
            means ``<data_dir>/checkpoints``.
        initial_admin_password: the password of ``admin`` and ``determined`` on first start.
        cluster_name: shown by ``GET /api/v1/master``.
        resource_manager: the ``resource_manager`` section handed to the RM hook.
        ray_address: shorthand for ``resource_manager: {type: ray, address: ...}`` (a Ray cluster's
            address, ``auto`` or ``ray://HOST:10001``); merged over ``resource_manager``.
        slurm: shorthand for ``resource_manager: {type: slurm}`` (submit trials to the Slurm
            cluster this machine is a login node of); the section's other settings are kept when
            it is already ``type: slurm``.
        security: upstream's ``security`` section; ``security.authz.type`` is ``rbac`` (the
            default: role-based access control) or ``basic`` (everybody may view and edit, admins
            manage users); ``security.authz.default_workspace_role`` is the role every user holds
            on the default workspace (``Editor``; ``none`` for no default membership).
            ``security.token.default_lifespan_days`` / ``max_lifespan_days`` bound access tokens
            (30 and 30 by default; ``-1``: upstream's maximum).
    """

    host: str = "127.0.0.1"
    port: int = 8080
    db: str | None = None
    data_dir: str | None = None
    slots: int | None = None
    checkpoint_storage: str | dict[str, Any] | None = None
    initial_admin_password: str = ""
    cluster_name: str = ""
    resource_manager: dict[str, Any] | None = None
    ray_address: str | None = None
    slurm: bool = False
    security: dict[str, Any] | None = None

    def resolved_data_dir(self) -> pathlib.Path:
        """The data directory, created if missing."""
        path = pathlib.Path(self.data_dir) if self.data_dir else default_data_dir()
        path.mkdir(parents=True, exist_ok=True)
        return path.resolve()

    def db_url(self) -> str:
        """The database URL to use."""
        return self.db or f"sqlite:///{self.resolved_data_dir() / 'det.sqlite'}"

    def checkpoint_storage_config(self) -> dict[str, Any]:
        """The master's default ``checkpoint_storage`` section for experiments."""
        cs = self.checkpoint_storage
        if isinstance(cs, dict):
            return dict(cs)
        path = pathlib.Path(cs) if cs else self.resolved_data_dir() / "checkpoints"
        path.mkdir(parents=True, exist_ok=True)
        return {"type": "shared_fs", "host_path": str(path.resolve())}

    def resource_manager_config(self) -> dict[str, Any]:
        """The ``resource_manager`` section (``{"type": "local", "slots": N}`` by default)."""
        rm = dict(self.resource_manager or {"type": "local"})
        if self.ray_address:
            if rm.get("type", "local") != "ray":
                rm = {}
            rm.update({"type": "ray", "address": self.ray_address})
        if self.slurm and rm.get("type", "local") != "slurm":
            rm = {"type": "slurm"}
        if self.slots is not None and rm.get("type", "local") == "local":
            rm.setdefault("slots", self.slots)
        return rm

    def authz_settings(self) -> tuple[bool, str | None]:
        """(RBAC on?, default workspace role or None) from ``security.authz``."""
        authz = (self.security or {}).get("authz") or {}
        kind = str(authz.get("type", "rbac")).lower()
        if kind not in ("rbac", "basic"):
            raise ValueError(f"security.authz.type: must be 'rbac' or 'basic', got {kind!r}")
        role = authz.get("default_workspace_role", "Editor")
        if role is None or str(role).lower() in ("", "none"):
            role = None
        return kind == "rbac", role

    @classmethod
    def from_file(cls, path: str | pathlib.Path, **overrides: Any) -> MasterConfig:
        """Load a YAML file with the same keys as the flags (dashes or underscores), then apply
        ``overrides`` that are not None."""
        raw = yaml.safe_load(pathlib.Path(path).read_text()) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: the master config must be a mapping")
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            name = str(key).replace("-", "_")
            if name not in names:
                raise ValueError(
                    f"{path}: unknown setting {key!r} (known: {', '.join(sorted(names))})"
                )
            values[name] = value
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def check(self) -> None:
        """Refuse settings that are unsafe or nonsensical (ValueError with a clear message)."""
        if not 0 <= int(self.port) < 65536:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if self.slots is not None and int(self.slots) < 0:
            raise ValueError(f"slots must be >= 0, got {self.slots}")
        self.authz_settings()
