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

import os
import shutil
import tempfile
import types
from typing import TYPE_CHECKING, Any

from determined._errors import CollectiveError
from determined.core import _collective, _distributed_env
from determined.core._distributed_env import (
    CHIEF_IP_ENV,
    DEFAULT_TIMEOUT,
    INTER_TRAIN_PROCESS_COMM_PORT_1,
    INTER_TRAIN_PROCESS_COMM_PORT_2,
    PORT_ENV,
    TIMEOUT_ENV,
    port_is_reserved,
)

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = [
    "CHIEF_IP_ENV",
    "DEFAULT_TIMEOUT",
    "INTER_TRAIN_PROCESS_COMM_PORT_1",
    "INTER_TRAIN_PROCESS_COMM_PORT_2",
    "PORT_ENV",
    "TIMEOUT_ENV",
    "DistributedContext",
]

Group = _collective.Hub | _collective.Spoke


def _run_collective(group: Group | None, name: str, payload: Any, answer: str) -> tuple[bool, Any]:
    """Run one collective on ``group``; returns (is_hub, result).

    ``answer`` picks what the hub sends back to the spokes: ``"all"`` values, the ``"first"`` (the
    hub's own) or ``"none"``.
    """
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


def _connect_local(
    context: DistributedContext, global_group: Group, key: bytes, force_tcp: bool
) -> tuple[Group, str | None]:
    """Connect this node's ranks to their local chief; returns the group and the chief's temp dir.

    Each node's local chief listens on a node-private endpoint (a unix socket in a temporary
    directory, or TCP on 127.0.0.1 with ``force_tcp``) and tells the others where over the global
    group.
    """
    timeout = context._timeout
    address: _collective.Address | None = None
    listener = None
    tempdir = None
    if context.local_rank == 0:
        if force_tcp:
            listener = _collective.listen(("127.0.0.1", 0))
        else:
            tempdir = tempfile.mkdtemp(prefix="det-ipc-")
            listener = _collective.listen(os.path.join(tempdir, "local.sock"))
        address = _collective.bound_address(listener)
    try:
        mine = (context.cross_rank, context.local_rank, context.rank, address)
        everyone = _run_collective(global_group, "allgather", mine, "all")[1]
        if listener is not None:
            hub = _collective.Hub(listener, context.local_size, context.rank, key, timeout)
            hub.accept_all()
            return hub, tempdir
    except BaseException:
        if listener is not None:
            listener.close()
        if tempdir is not None:
            shutil.rmtree(tempdir, ignore_errors=True)
        raise
    chiefs = [(r, a) for c, lr, r, a in everyone if c == context.cross_rank and lr == 0]
    if len(chiefs) != 1:
        raise CollectiveError(
            f"DistributedContext: node {context.cross_rank} has {len(chiefs)} ranks with local_rank 0"
        )
    hub_rank, hub_address = chiefs[0]
    if isinstance(hub_address, list):
        hub_address = tuple(hub_address)
    spoke = _collective.Spoke(
        hub_address,
        context.local_rank,
        context.local_size,
        context.rank,
        hub_rank,
        key,
        timeout,
    )
    return spoke, None


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
        self._timeout = (
            float(timeout) if timeout is not None else _distributed_env.default_timeout()
        )
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
                _collective.listen((host, self._port), reserved=port_is_reserved(self._port)),
                self.size,
                self.rank,
                key,
                self._timeout,
            )
            self._global = hub
            hub.accept_all()
        else:
            self._global = _collective.Spoke(
                (self._chief_ip, self._port), self.rank, self.size, self.rank, 0, key, self._timeout
            )
        if self.local_size >= 2:
            self._local, self._tempdir = _connect_local(self, self._global, key, self._force_tcp)

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

    def allgather(self, stuff: Any) -> list[Any]:
        """Every rank's ``stuff``, ordered by rank, on every rank."""
        if self.size < 2:
            return [stuff]
        return list(_run_collective(self._global, "allgather", stuff, "all")[1])

    def gather(self, stuff: Any) -> list[Any] | None:
        """Every rank's ``stuff``, ordered by rank, on the chief; ``None`` on the other ranks."""
        if self.size < 2:
            return [stuff]
        is_hub, values = _run_collective(self._global, "gather", stuff, "none")
        return list(values) if is_hub else None

    def broadcast(self, stuff: Any) -> Any:
        """The chief's ``stuff`` on every rank (the other ranks' ``stuff`` is ignored)."""
        if self.size < 2:
            return stuff
        is_hub, value = _run_collective(
            self._global, "broadcast", stuff if self._is_chief else None, "first"
        )
        return value[0] if is_hub else value

    def allgather_local(self, stuff: Any) -> list[Any]:
        """Every local rank's ``stuff`` on this node, ordered by local rank."""
        if self.local_size < 2:
            return [stuff]
        return list(_run_collective(self._local, "allgather_local", stuff, "all")[1])

    def gather_local(self, stuff: Any) -> list[Any] | None:
        """This node's ``stuff`` values by local rank on the local chief; ``None`` elsewhere."""
        if self.local_size < 2:
            return [stuff]
        is_hub, values = _run_collective(self._local, "gather_local", stuff, "none")
        return list(values) if is_hub else None

    def broadcast_local(self, stuff: Any = None) -> Any:
        """The local chief's ``stuff`` on every rank of this node."""
        if self.local_size < 2:
            return stuff
        payload = stuff if self._is_local_chief else None
        is_hub, value = _run_collective(self._local, "broadcast_local", payload, "first")
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
        return cls(**_distributed_env.torch_distributed_ranks(chief_ip))

    @classmethod
    def from_deepspeed(cls, chief_ip: str | None = None) -> DistributedContext:
        """From the variables the DeepSpeed launcher sets (``RANK WORLD_SIZE LOCAL_RANK LOCAL_SIZE
        CROSS_RANK CROSS_SIZE``; torchrun's names are accepted as fallbacks)."""
        return cls(**_distributed_env.deepspeed_ranks(chief_ip))

    @classmethod
    def from_horovod(cls, hvd: Any, chief_ip: str | None = None) -> DistributedContext:
        """From an initialised ``horovod.torch`` or ``horovod.tensorflow`` module ``hvd``."""
        return cls(**_distributed_env.horovod_ranks(hvd, chief_ip))

    @classmethod
    def from_tf_config(cls) -> tuple[DistributedContext, tf.distribute.Strategy]:
        """From ``TF_CONFIG`` (as the tensorflow launcher sets it): the context and a matching strategy.

        Several workers give ``MultiWorkerMirroredStrategy`` (one process per node); one worker gives
        ``MirroredStrategy`` when more than one GPU is visible, else the default strategy.
        """
        import tensorflow as tf

        ranks = _distributed_env.tf_config_ranks()
        if ranks is not None:
            context = cls(**ranks)
            strategy: tf.distribute.Strategy = tf.distribute.MultiWorkerMirroredStrategy()
            return context, strategy
        if len(tf.config.list_physical_devices("GPU")) > 1:
            strategy = tf.distribute.MirroredStrategy()
        else:
            strategy = tf.distribute.get_strategy()
        return cls(), strategy
