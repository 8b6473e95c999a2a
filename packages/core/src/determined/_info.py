"""Who this process is: ClusterInfo and friends, read from one JSON file the launcher hands over.

The launcher (det-master's resource manager) writes a ClusterInfo JSON file and passes its path in
``DET_CLUSTER_INFO``. Upstream's container path ``/run/determined/info/cluster.json`` and the ``DET_*``
environment variables of a Determined container are read too, so both layouts keep working.
No module-level cache: every call reads the source again, so tests and threads never share stale state.
"""

from __future__ import annotations

import json
import os
import pathlib
import urllib.parse
from typing import Any

CLUSTER_INFO_ENV = "DET_CLUSTER_INFO"
UPSTREAM_CLUSTER_INFO_PATH = "/run/determined/info/cluster.json"
TASK_TYPES = ("TRIAL", "NOTEBOOK", "SHELL", "COMMAND", "TENSORBOARD", "CHECKPOINT_GC")


def canonicalize_master_url(url: str) -> str:
    """Return ``url`` with an explicit scheme and port and no trailing slash."""
    if "://" not in url:
        url = "http://" + url
    parsed = urllib.parse.urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 8080)
    host = parsed.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    path = parsed.path.rstrip("/")
    return f"{parsed.scheme}://{host}:{port}{path}"


class RendezvousInfo:
    """Addresses of every container of a multi-container trial, ordered by container rank."""

    def __init__(
        self, container_addrs: list[str], container_rank: int, container_slot_counts: list[int]
    ) -> None:
        self.container_addrs = list(container_addrs)
        self.container_rank = int(container_rank)
        self.container_slot_counts = list(container_slot_counts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "container_addrs": self.container_addrs,
            "container_rank": self.container_rank,
            "container_slot_counts": self.container_slot_counts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RendezvousInfo:
        return cls(data["container_addrs"], data["container_rank"], data["container_slot_counts"])


class ResourcesInfo:
    """The accelerators assigned to this task."""

    def __init__(self, gpu_uuids: list[str]) -> None:
        self.gpu_uuids = list(gpu_uuids)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu_uuids": self.gpu_uuids}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResourcesInfo:
        return cls(data.get("gpu_uuids", []))


class TrialInfo:
    """What a trial process knows about its trial: ids, seed, hyperparameters and the experiment config.

    ``config`` (the whole experiment config), ``steps_completed`` (where this run starts) and
    ``debug`` are public; upstream's ``_config``, ``_steps_completed`` and ``_debug`` name the same
    values, for user code written for Determined.
    """

    def __init__(
        self,
        trial_id: int,
        experiment_id: int,
        trial_seed: int,
        hparams: dict[str, Any],
        config: dict[str, Any],
        steps_completed: int,
        trial_run_id: int,
        debug: bool,
        inter_node_network_interface: str | None,
    ) -> None:
        self.trial_id = int(trial_id)
        self.experiment_id = int(experiment_id)
        self.trial_seed = int(trial_seed)
        self.hparams = hparams
        self.config = config
        self.steps_completed = int(steps_completed)
        self._trial_run_id = int(trial_run_id)
        self.debug = bool(debug)
        self._inter_node_network_interface = inter_node_network_interface

    # Upstream's private names, read by user code written for Determined.
    @property
    def _config(self) -> dict[str, Any]:
        return self.config

    @_config.setter
    def _config(self, value: dict[str, Any]) -> None:
        self.config = value

    @property
    def _steps_completed(self) -> int:
        return self.steps_completed

    @_steps_completed.setter
    def _steps_completed(self, value: int) -> None:
        self.steps_completed = int(value)

    @property
    def _debug(self) -> bool:
        return self.debug

    @_debug.setter
    def _debug(self, value: bool) -> None:
        self.debug = bool(value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial_id": self.trial_id,
            "experiment_id": self.experiment_id,
            "trial_seed": self.trial_seed,
            "hparams": self.hparams,
            "config": self.config,
            "steps_completed": self.steps_completed,
            "trial_run_id": self._trial_run_id,
            "debug": self.debug,
            "inter_node_network_interface": self._inter_node_network_interface,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialInfo:
        return cls(
            trial_id=data["trial_id"],
            experiment_id=data["experiment_id"],
            trial_seed=data.get("trial_seed", 0),
            hparams=data.get("hparams") or {},
            config=data.get("config") or {},
            steps_completed=data.get("steps_completed", 0),
            trial_run_id=data.get("trial_run_id", 1),
            debug=data.get("debug", False),
            inter_node_network_interface=data.get("inter_node_network_interface"),
        )


class ClusterInfo:
    """Everything a task process needs to know about the cluster it runs on.

    ``None`` from :func:`get_cluster_info` means the process runs off-cluster (plain ``python train.py``).
    """

    def __init__(
        self,
        master_url: str,
        cluster_id: str,
        agent_id: str,
        slot_ids: list[int],
        task_id: str,
        allocation_id: str,
        session_token: str,
        task_type: str,
        master_cert_name: str | None = None,
        master_cert_file: str | None = None,
        latest_checkpoint: str | None = None,
        trial_info: TrialInfo | None = None,
        rendezvous_info: RendezvousInfo | None = None,
        resources_info: ResourcesInfo | None = None,
    ) -> None:
        if task_type not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {', '.join(TASK_TYPES)}, not {task_type!r}")
        self.master_url = canonicalize_master_url(master_url)
        self.cluster_id = cluster_id
        self.agent_id = agent_id
        self.slot_ids = list(slot_ids)
        self.task_id = task_id
        self.allocation_id = allocation_id
        self.session_token = session_token
        self.task_type = task_type
        self.master_cert_name = master_cert_name
        self.master_cert_file = master_cert_file
        self._latest_checkpoint = latest_checkpoint
        self._trial_info = trial_info
        self._rendezvous_info = rendezvous_info
        self._resources_info = resources_info

    @property
    def latest_checkpoint(self) -> str | None:
        """The checkpoint UUID to resume from, or ``None`` for a fresh start (always ``None`` off TRIAL)."""
        return self._latest_checkpoint if self.task_type == "TRIAL" else None

    @property
    def trial(self) -> TrialInfo:
        if self.task_type != "TRIAL" or self._trial_info is None:
            raise RuntimeError(
                f"ClusterInfo.trial is only available for TRIAL tasks, not {self.task_type}"
            )
        return self._trial_info

    @property
    def user_data(self) -> dict[str, Any]:
        if self._trial_info is None:
            return {}
        data = self._trial_info.config.get("data")
        return data if isinstance(data, dict) else {}

    def _rendezvous(self) -> RendezvousInfo:
        if self._rendezvous_info is not None:
            return self._rendezvous_info
        return RendezvousInfo(["127.0.0.1"], 0, [len(self.slot_ids)])

    @property
    def container_addrs(self) -> list[str]:
        return self._rendezvous().container_addrs

    @property
    def container_rank(self) -> int:
        return self._rendezvous().container_rank

    @property
    def container_slot_counts(self) -> list[int]:
        return self._rendezvous().container_slot_counts

    @property
    def gpu_uuids(self) -> list[str]:
        return self._resources_info.gpu_uuids if self._resources_info else []

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: attribute names without their leading underscore."""
        return {
            "master_url": self.master_url,
            "cluster_id": self.cluster_id,
            "agent_id": self.agent_id,
            "slot_ids": self.slot_ids,
            "task_id": self.task_id,
            "allocation_id": self.allocation_id,
            "session_token": self.session_token,
            "task_type": self.task_type,
            "master_cert_name": self.master_cert_name,
            "master_cert_file": self.master_cert_file,
            "latest_checkpoint": self._latest_checkpoint,
            "trial_info": self._trial_info.to_dict() if self._trial_info else None,
            "rendezvous_info": self._rendezvous_info.to_dict() if self._rendezvous_info else None,
            "resources_info": self._resources_info.to_dict() if self._resources_info else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterInfo:
        def sub(key: str, kind: Any) -> Any:
            value = data.get(key)
            return kind.from_dict(value) if value else None

        return cls(
            master_url=data["master_url"],
            cluster_id=data.get("cluster_id", ""),
            agent_id=data.get("agent_id", ""),
            slot_ids=data.get("slot_ids", []),
            task_id=data["task_id"],
            allocation_id=data["allocation_id"],
            session_token=data.get("session_token", ""),
            task_type=data.get("task_type", "TRIAL"),
            master_cert_name=data.get("master_cert_name"),
            master_cert_file=data.get("master_cert_file"),
            latest_checkpoint=data.get("latest_checkpoint"),
            trial_info=sub("trial_info", TrialInfo),
            rendezvous_info=sub("rendezvous_info", RendezvousInfo),
            resources_info=sub("resources_info", ResourcesInfo),
        )

    def write(self, path: str | os.PathLike[str], *, config_json: str | None = None) -> None:
        """Write this ClusterInfo as JSON (readable only by its owner: it holds a session token).

        ``config_json``: the trial's config as ``json.dumps`` encodes it, when the caller has it
        already (det-master encodes an experiment's config once for all its trials): written as
        is instead of encoding the config again, the largest part of the file."""
        data = self.to_dict()
        trial_info = data.get("trial_info")
        marker = None
        if config_json is not None and trial_info is not None:
            marker = f"det-config-{os.urandom(8).hex()}"
            trial_info["config"] = marker
        # dumps, not dump: dump streams through the pure-Python encoder
        text = json.dumps(data)
        if marker is not None:
            text = text.replace(f'"{marker}"', config_json, 1)
        target = pathlib.Path(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        try:
            fd = os.open(target, flags, 0o600)
        except FileNotFoundError:  # its directory is made only when missing: one syscall less
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, flags, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode())

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ClusterInfo:
        with open(path) as f:
            return cls.from_dict(json.load(f))

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ClusterInfo | None:
        """Build from a Determined container's ``DET_*`` variables; ``None`` when they are absent."""
        env = dict(os.environ if env is None else env)
        required = ("DET_MASTER", "DET_TASK_ID", "DET_ALLOCATION_ID", "DET_TASK_TYPE")
        if not all(env.get(k) for k in required):
            return None
        trial_info = None
        if env["DET_TASK_TYPE"] == "TRIAL" and env.get("DET_TRIAL_ID"):
            trial_info = TrialInfo(
                trial_id=int(env["DET_TRIAL_ID"]),
                experiment_id=int(env.get("DET_EXPERIMENT_ID", "0")),
                trial_seed=int(env.get("DET_TRIAL_SEED", "0")),
                hparams=json.loads(env.get("DET_HPARAMS", "{}")),
                config=json.loads(env.get("DET_EXPERIMENT_CONFIG", "{}")),
                steps_completed=int(env.get("DET_STEPS_COMPLETED", "0")),
                trial_run_id=int(env.get("DET_TRIAL_RUN_ID", "1")),
                debug=False,
                inter_node_network_interface=env.get("DET_INTER_NODE_NETWORK_INTERFACE"),
            )
        return cls(
            master_url=env["DET_MASTER"],
            cluster_id=env.get("DET_CLUSTER_ID", ""),
            agent_id=env.get("DET_AGENT_ID", ""),
            slot_ids=json.loads(env.get("DET_SLOT_IDS", "[]")),
            task_id=env["DET_TASK_ID"],
            allocation_id=env["DET_ALLOCATION_ID"],
            session_token=env.get("DET_SESSION_TOKEN", ""),
            task_type=env["DET_TASK_TYPE"],
            master_cert_name=env.get("DET_MASTER_CERT_NAME"),
            master_cert_file=env.get("DET_MASTER_CERT_FILE"),
            latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
            trial_info=trial_info,
        )


def get_cluster_info() -> ClusterInfo | None:
    """Return this process's ClusterInfo, or ``None`` when it runs off-cluster.

    Sources, first match wins: the file named by ``DET_CLUSTER_INFO``, upstream's
    ``/run/determined/info/cluster.json``, then upstream's ``DET_*`` environment variables.
    """
    path = os.environ.get(CLUSTER_INFO_ENV)
    if path:
        return ClusterInfo.read(path)
    if os.path.exists(UPSTREAM_CLUSTER_INFO_PATH):
        return ClusterInfo.read(UPSTREAM_CLUSTER_INFO_PATH)
    return ClusterInfo.from_env()
