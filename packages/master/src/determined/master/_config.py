"""The master's settings: command-line flags and the same keys in a YAML ``--config-file``."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import yaml

from determined.master._limits import Limits, default_storage_roots, local_storage_paths

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
            on the default workspace (``Editor``; ``none`` for no default membership);
            ``security.authz.rbac_ui_enabled`` (upstream's; default: whether the type is ``rbac``)
            is what ``GET /api/v1/master`` reports as ``rbacEnabled``, the switch upstream's
            clients check before offering groups and roles (it changes no check).
            ``security.token.default_lifespan_days`` / ``max_lifespan_days`` bound access tokens
            (30 and 30 by default; ``-1``: upstream's maximum). ``security.tls.cert`` /
            ``security.tls.key``: serve HTTPS with this certificate (PEM) and private key.
        limits: the guards of a shared master (``determined.master._limits.Limits``: search
            size, request body, context and hyperparameter sizes, per-user quotas).
        checkpoint_storage_roots: directories under which experiments and workspaces may put
            local checkpoint storage (None: the data dir, the master's checkpoint directory
            and the system temporary directory).
        tls_cert: the ``--tls-cert`` flag (overrides ``security.tls.cert``).
        tls_key: the ``--tls-key`` flag (overrides ``security.tls.key``).
        db_busy_timeout_s: SQLite only: how long a write waits for a lock another process holds
            on the database file before the request gets a 503 "database is locked" (30 s).
        webhooks: upstream's section: ``signing_key`` (the HMAC key of webhooks' signature
            header; random per start when unset) and ``base_url`` (the web UI's address, for
            links in Slack messages).
        task_container_defaults: upstream's section of defaults for every workload's config
            (``environment_variables``, ...; ``determined.master._task_container_defaults``).
        resource_pools: upstream's list of pools; det reads each ``pool_name`` and its
            ``task_container_defaults`` (merged over the top-level ones for that pool).
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
    limits: dict[str, Any] | None = None
    checkpoint_storage_roots: list[str] | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    db_busy_timeout_s: float = 30.0
    webhooks: dict[str, Any] | None = None
    task_container_defaults: dict[str, Any] | None = None
    resource_pools: list[dict[str, Any]] | None = None

    def task_container_defaults_for(self, pool: str) -> dict[str, Any]:
        """The ``task_container_defaults`` of workloads in ``pool``: the pool's over the
        master's."""
        from determined.master import _task_container_defaults as tcd

        return tcd.merged(self.task_container_defaults, tcd.pools(self.resource_pools).get(pool))

    def limits_config(self) -> Limits:
        """The parsed ``limits`` section."""
        return Limits.from_section(self.limits)

    def storage_roots(self) -> list[str]:
        """Where local checkpoint storage may live: ``checkpoint_storage_roots`` (or, when unset,
        the data dir and the system temporary directory), always with the master's own default
        ``checkpoint_storage``."""
        own = self.checkpoint_storage_config()
        if self.checkpoint_storage_roots is not None:
            roots = [str(pathlib.Path(r).expanduser()) for r in self.checkpoint_storage_roots]
            return roots + [path for _, path in local_storage_paths(own)]
        return default_storage_roots(self.resolved_data_dir(), own)

    def tls_files(self) -> tuple[str, str] | None:
        """(certificate, private key) to serve HTTPS with, or None for plain HTTP."""
        tls = (self.security or {}).get("tls") or {}
        if not isinstance(tls, dict):
            raise ValueError("security.tls: must be a mapping with cert and key")
        cert = self.tls_cert or tls.get("cert")
        key = self.tls_key or tls.get("key")
        if not cert and not key:
            return None
        if not cert or not key:
            raise ValueError("TLS needs both a certificate and a key (--tls-cert and --tls-key)")
        for what, path in (("certificate", cert), ("key", key)):
            if not pathlib.Path(str(path)).is_file():
                raise ValueError(f"TLS {what} file {path} does not exist")
        return str(cert), str(key)

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

    def rbac_ui_enabled(self) -> bool:
        """Upstream's ``security.authz.rbac_ui_enabled`` (default: RBAC on): whether clients
        offer groups and roles (``rbacEnabled`` of ``GET /api/v1/master``)."""
        value = ((self.security or {}).get("authz") or {}).get("rbac_ui_enabled")
        if value is None:
            return self.authz_settings()[0]
        if not isinstance(value, bool):
            raise ValueError(
                f"security.authz.rbac_ui_enabled: must be true or false, got {value!r}"
            )
        return value

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
        self.rbac_ui_enabled()
        self.limits_config()
        if not float(self.db_busy_timeout_s) >= 0:
            raise ValueError(f"db_busy_timeout_s must be >= 0, got {self.db_busy_timeout_s}")
        if self.checkpoint_storage_roots is not None and not isinstance(
            self.checkpoint_storage_roots, list
        ):
            raise ValueError("checkpoint_storage_roots: must be a list of directories")
        self.tls_files()
        from determined.master import _task_container_defaults as tcd

        tcd.check(self.task_container_defaults, "task_container_defaults")
        tcd.pools(self.resource_pools)
