"""DistributedContext: who this rank is, and small collectives over Python objects between ranks.

The collectives (allgather, gather, broadcast and their ``*_local`` twins within one node) are for
coordination — checkpoint paths, preemption decisions, metrics — not for tensors. Every rank must call
the same collectives in the same order; unlike upstream, a rank that calls a different one, dies, closes
or does not arrive within the timeout makes every other rank raise
:class:`~determined._errors.CollectiveError` instead of hanging.

The transport (``_collective.py``) is a star of stdlib sockets, authenticated with an HMAC handshake
keyed by ``DET_COLLECTIVE_KEY``. A context of size 1 opens no socket, so the all-``None`` default
``DistributedContext()`` is the cheap single-process context.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import types
from typing import TYPE_CHECKING, Any

from determined._errors import CollectiveError
from determined.core import _collective

if TYPE_CHECKING:
    import tensorflow as tf

INTER_TRAIN_PROCESS_COMM_PORT_1 = 12360
INTER_TRAIN_PROCESS_COMM_PORT_2 = INTER_TRAIN_PROCESS_COMM_PORT_1 + 16
DEFAULT_TIMEOUT = 1800.0
TIMEOUT_ENV = "DET_COLLECTIVE_TIMEOUT"
PORT_ENV = "DET_COLLECTIVE_PORT"
CHIEF_IP_ENV = "DET_CHIEF_IP"


def _default_timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{TIMEOUT_ENV} must be positive, not {raw!r}")
    return value


def _env_port() -> int:
    """The chief's port for the from_* constructors: ``DET_COLLECTIVE_PORT`` or 12360."""
    raw = os.environ.get(PORT_ENV)
    if not raw:
        return INTER_TRAIN_PROCESS_COMM_PORT_1
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{PORT_ENV} must be a port number, not {raw!r}") from None


def _env_int(*names: str) -> int:
    """The first of ``names`` set in the environment, as an int; ValueError naming them otherwise."""
    for name in names:
        raw = os.environ.get(name)
        if raw is not None and raw != "":
            try:
                return int(raw)
            except ValueError:
                raise ValueError(
                    f"environment variable {name} must be an integer, not {raw!r}"
                ) from None
    raise ValueError(f"environment variable {' or '.join(names)} is not set")


class DistributedContext:
    """The ranks of a distributed job and collectives between them.

    All six rank arguments are given, or none (a single process: rank 0 of 1).

    Args:
        rank: this process's rank among all processes.
        size: the number of processes.
        local_rank: this process's rank on its node.
        local_size: the number of processes on this node.
        cross_rank: this node's rank.
        cross_size: the number of nodes.
        chief_ip: the address of rank 0; required with more than one node (falls back to nothing:
            the ``from_*`` constructors read ``DET_CHIEF_IP``). Single-node jobs use 127.0.0.1.
        pub_port: the TCP port rank 0 listens on (``port_offset`` is added to it).
        pull_port: accepted for compatibility with upstream; unused (one port suffices).
        port_offset: added to ``pub_port``, so several jobs on one host can use distinct ports.
        force_tcp: use TCP on 127.0.0.1 instead of unix sockets for the within-node collectives.
        timeout: seconds for connecting and for each collective; default ``DET_COLLECTIVE_TIMEOUT``
            or 1800.
    """

    def __init__(
        self,
        *,
        rank: int | None = None,
        size: int | None = None,
        local_rank: int | None = None,
        local_size: int | None = None,
        cross_rank: int | None = None,
        cross_size: int | None = None,
        chief_ip: str | None = None,
        pub_port: int = INTER_TRAIN_PROCESS_COMM_PORT_1,
        pull_port: int = INTER_TRAIN_PROCESS_COMM_PORT_2,
        port_offset: int = 0,
        force_tcp: bool = False,
        timeout: float | None = None,
    ) -> None:
        ranks = {
            "rank": rank,
            "size": size,
            "local_rank": local_rank,
            "local_size": local_size,
            "cross_rank": cross_rank,
            "cross_size": cross_size,
        }
        given = [k for k, v in ranks.items() if v is not None]
        if given and len(given) != len(ranks):
            missing = [k for k in ranks if k not in given]
            raise ValueError(
                "DistributedContext: give all of rank, size, local_rank, local_size, cross_rank, "
                f"cross_size or none of them; missing {', '.join(missing)}"
            )
        self.rank = int(rank) if rank is not None else 0
        self.size = int(size) if size is not None else 1
        self.local_rank = int(local_rank) if local_rank is not None else 0
        self.local_size = int(local_size) if local_size is not None else 1
        self.cross_rank = int(cross_rank) if cross_rank is not None else 0
        self.cross_size = int(cross_size) if cross_size is not None else 1
        for index, count in (
            ("rank", "size"),
            ("local_rank", "local_size"),
            ("cross_rank", "cross_size"),
        ):
            if getattr(self, count) < 1:
                raise ValueError(
                    f"DistributedContext: {count} must be >= 1, not {getattr(self, count)}"
                )
            if not 0 <= getattr(self, index) < getattr(self, count):
                raise ValueError(
                    f"DistributedContext: {index}={getattr(self, index)} is out of range for "
                    f"{count}={getattr(self, count)}"
                )
        self._timeout = float(timeout) if timeout is not None else _default_timeout()
        if self._timeout <= 0:
            raise ValueError(f"DistributedContext: timeout must be positive, not {timeout!r}")
        if self.local_size != self.size and not chief_ip:
            raise ValueError(
                "DistributedContext: chief_ip is required when there is more than one node "
                f"(local_size={self.local_size}, size={self.size}); pass chief_ip= or set {CHIEF_IP_ENV}"
            )
        self._chief_ip = chief_ip if self.local_size != self.size else "127.0.0.1"
        self._port = int(pub_port) + int(port_offset)
        self._pull_port = pull_port
        self._force_tcp = force_tcp
        self._closed = False
        self._global: _collective.Hub | _collective.Spoke | None = None
        self._local: _collective.Hub | _collective.Spoke | None = None
        self._tempdir: str | None = None
        if self.size < 2:
            return
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        key = _collective.collective_key()
        assert self._chief_ip is not None
        if self._is_chief:
            # Single node: loopback only. Several nodes: every interface (peers are authenticated).
            host = "127.0.0.1" if self.local_size == self.size else ""
            hub = _collective.Hub(
                _collective.listen((host, self._port)), self.size, self.rank, key, self._timeout
            )
            self._global = hub
            hub.accept_all()
        else:
            self._global = _collective.Spoke(
                (self._chief_ip, self._port), self.rank, self.size, self.rank, 0, key, self._timeout
            )
        if self.local_size < 2:
            return
        # Each node's local chief listens on a node-private endpoint and tells the others where.
        address: _collective.Address | None = None
        listener = None
        if self._is_local_chief:
            if self._force_tcp:
                listener = _collective.listen(("127.0.0.1", 0))
            else:
                self._tempdir = tempfile.mkdtemp(prefix="det-ipc-")
                listener = _collective.listen(os.path.join(self._tempdir, "local.sock"))
            address = _collective.bound_address(listener)
        try:
            everyone = self.allgather((self.cross_rank, self.local_rank, self.rank, address))
        except BaseException:
            if listener is not None:
                listener.close()
            raise
        if listener is not None:
            hub = _collective.Hub(listener, self.local_size, self.rank, key, self._timeout)
            self._local = hub
            hub.accept_all()
            return
        chiefs = [(r, a) for c, lr, r, a in everyone if c == self.cross_rank and lr == 0]
        if len(chiefs) != 1:
            raise CollectiveError(
                f"DistributedContext: node {self.cross_rank} has {len(chiefs)} ranks with local_rank 0"
            )
        hub_rank, hub_address = chiefs[0]
        if isinstance(hub_address, list):
            hub_address = tuple(hub_address)
        self._local = _collective.Spoke(
            hub_address, self.local_rank, self.local_size, self.rank, hub_rank, key, self._timeout
        )

    # -- identity ------------------------------------------------------------------------------

    @property
    def _is_chief(self) -> bool:
        return self.rank == 0

    @property
    def _is_local_chief(self) -> bool:
        return self.local_rank == 0

    def get_rank(self) -> int:
        """This process's rank among all processes (0 is the chief)."""
        return self.rank

    def get_local_rank(self) -> int:
        """This process's rank on its node."""
        return self.local_rank

    def get_size(self) -> int:
        """The number of processes."""
        return self.size

    def get_num_agents(self) -> int:
        """The number of nodes (``cross_size``)."""
        return self.cross_size

    # -- collectives ---------------------------------------------------------------------------

    def _run(
        self,
        group: _collective.Hub | _collective.Spoke | None,
        name: str,
        payload: Any,
        answer: str,
    ) -> tuple[bool, Any]:
        """Run one collective; returns (is_hub, result). ``answer`` picks what the hub sends back."""
        if group is None:
            raise CollectiveError(f"{name} failed: this DistributedContext is closed")
        if isinstance(group, _collective.Spoke):
            return False, group.collective(name, payload)
        values = group.collective(name, payload)
        if answer == "all":
            group.reply(name, values)
        elif answer == "first":
            group.reply(name, values[0])
        else:
            group.reply(name, None)
        return True, values

    def allgather(self, x: Any) -> list[Any]:
        """Every rank's ``x``, ordered by rank, on every rank."""
        if self.size < 2:
            return [x]
        return list(self._run(self._global, "allgather", x, "all")[1])

    def gather(self, x: Any) -> list[Any] | None:
        """Every rank's ``x``, ordered by rank, on the chief; ``None`` on the other ranks."""
        if self.size < 2:
            return [x]
        is_hub, values = self._run(self._global, "gather", x, "none")
        return list(values) if is_hub else None

    def broadcast(self, x: Any) -> Any:
        """The chief's ``x`` on every rank (the other ranks' ``x`` is ignored)."""
        if self.size < 2:
            return x
        is_hub, value = self._run(self._global, "broadcast", x if self._is_chief else None, "first")
        return value[0] if is_hub else value

    def allgather_local(self, x: Any) -> list[Any]:
        """Every local rank's ``x`` on this node, ordered by local rank."""
        if self.local_size < 2:
            return [x]
        return list(self._run(self._local, "allgather_local", x, "all")[1])

    def gather_local(self, x: Any) -> list[Any] | None:
        """This node's ``x`` values, ordered by local rank, on the local chief; ``None`` elsewhere."""
        if self.local_size < 2:
            return [x]
        is_hub, values = self._run(self._local, "gather_local", x, "none")
        return list(values) if is_hub else None

    def broadcast_local(self, x: Any = None) -> Any:
        """The local chief's ``x`` on every rank of this node."""
        if self.local_size < 2:
            return x
        payload = x if self._is_local_chief else None
        is_hub, value = self._run(self._local, "broadcast_local", payload, "first")
        return value[0] if is_hub else value

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self, _reason: str = "") -> None:
        """Close the connections (idempotent). Peers' pending and later collectives then fail."""
        if self._closed:
            return
        self._closed = True
        for group in (self._local, self._global):
            if group is not None:
                group.close(_reason)
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    def __enter__(self) -> DistributedContext:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.close(f"{exc_type.__name__}: {exc}" if exc_type is not None else "")

    def __repr__(self) -> str:
        return (
            f"DistributedContext(rank={self.rank}, size={self.size}, local_rank={self.local_rank}, "
            f"local_size={self.local_size}, cross_rank={self.cross_rank}, "
            f"cross_size={self.cross_size})"
        )

    # -- constructors for launchers' environments ----------------------------------------------

    @classmethod
    def from_torch_distributed(cls, chief_ip: str | None = None) -> DistributedContext:
        """From the variables torchrun sets (``RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK
        GROUP_WORLD_SIZE``); the chief's address defaults to ``DET_CHIEF_IP``."""
        return cls(
            rank=_env_int("RANK"),
            size=_env_int("WORLD_SIZE"),
            local_rank=_env_int("LOCAL_RANK"),
            local_size=_env_int("LOCAL_WORLD_SIZE"),
            cross_rank=_env_int("GROUP_RANK"),
            cross_size=_env_int("GROUP_WORLD_SIZE"),
            chief_ip=chief_ip or os.environ.get(CHIEF_IP_ENV),
            pub_port=_env_port(),
        )

    @classmethod
    def from_deepspeed(cls, chief_ip: str | None = None) -> DistributedContext:
        """From the variables the DeepSpeed launcher sets (``RANK WORLD_SIZE LOCAL_RANK LOCAL_SIZE
        CROSS_RANK CROSS_SIZE``; torchrun's names are accepted as fallbacks)."""
        return cls(
            rank=_env_int("RANK"),
            size=_env_int("WORLD_SIZE"),
            local_rank=_env_int("LOCAL_RANK"),
            local_size=_env_int("LOCAL_SIZE", "LOCAL_WORLD_SIZE"),
            cross_rank=_env_int("CROSS_RANK", "GROUP_RANK"),
            cross_size=_env_int("CROSS_SIZE", "GROUP_WORLD_SIZE"),
            chief_ip=chief_ip or os.environ.get(CHIEF_IP_ENV),
            pub_port=_env_port(),
        )

    @classmethod
    def from_horovod(cls, hvd: Any, chief_ip: str | None = None) -> DistributedContext:
        """From an initialised ``horovod.torch`` or ``horovod.tensorflow`` module ``hvd``."""
        return cls(
            rank=hvd.rank(),
            size=hvd.size(),
            local_rank=hvd.local_rank(),
            local_size=hvd.local_size(),
            cross_rank=hvd.cross_rank(),
            cross_size=hvd.cross_size(),
            chief_ip=chief_ip or os.environ.get(CHIEF_IP_ENV),
            pub_port=_env_port(),
        )

    @classmethod
    def from_tf_config(cls) -> tuple[DistributedContext, tf.distribute.Strategy]:
        """From ``TF_CONFIG`` (as the tensorflow launcher sets it): the context and a matching strategy.

        Several workers give ``MultiWorkerMirroredStrategy`` (one process per node); one worker gives
        ``MirroredStrategy`` when more than one GPU is visible, else the default strategy.
        """
        import tensorflow as tf

        raw = os.environ.get("TF_CONFIG")
        config = json.loads(raw) if raw else {}
        task = config.get("task") or {"type": "worker", "index": 0}
        if task.get("type") != "worker":
            raise ValueError(f"TF_CONFIG: task.type must be 'worker', not {task.get('type')!r}")
        workers = (config.get("cluster") or {}).get("worker") or []
        if len(workers) > 1:
            index = int(task.get("index", 0))
            if not 0 <= index < len(workers):
                raise ValueError(
                    f"TF_CONFIG: task.index {index} is out of range for {len(workers)} workers"
                )
            # Workers sharing a host are one node (local ranks); hosts are numbered in order.
            hosts = [str(worker).rsplit(":", 1)[0] for worker in workers]
            nodes = list(dict.fromkeys(hosts))
            peers = [i for i, host in enumerate(hosts) if host == hosts[index]]
            context = cls(
                rank=index,
                size=len(workers),
                local_rank=peers.index(index),
                local_size=len(peers),
                cross_rank=nodes.index(hosts[index]),
                cross_size=len(nodes),
                chief_ip=hosts[0],
                pub_port=_env_port(),
            )
            strategy: tf.distribute.Strategy = tf.distribute.MultiWorkerMirroredStrategy()
            return context, strategy
        if len(tf.config.list_physical_devices("GPU")) > 1:
            strategy = tf.distribute.MirroredStrategy()
        else:
            strategy = tf.distribute.get_strategy()
        return cls(), strategy
