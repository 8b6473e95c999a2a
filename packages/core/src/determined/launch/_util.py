"""Helpers shared by the launchers: free or reserved ports and running a child with forwarded
signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import types
from collections.abc import Callable, Mapping, Sequence

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that were free on ``host`` a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


_RESERVED: list[socket.socket] = []
"""The sockets holding this process's reserved ports (closed when it exits)."""


def reserve_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports on ``host``, held for the rest of this process's life, for det's
    collective hub.

    A port from :func:`free_ports` is free only until another process takes it: a launcher that
    passes one to a rank that binds it seconds later (after importing torch) can lose it to any
    bind to port 0 or outgoing connection on the machine meanwhile, and the job fails. A reserved
    port stays bound here (``SO_REUSEPORT``, never listening), so the kernel gives it to no one
    else, while a listener of the same user that also sets ``SO_REUSEPORT`` can still bind it:
    det's collective hub does (:func:`determined.core._collective.listen`). Where the option is
    missing this falls back to :func:`free_ports`."""
    ports, held = _bound(count, host, _HUB_OPTION)
    _RESERVED.extend(held)
    return ports


def reserve_server_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports on ``host`` held as :func:`reserve_ports` holds them, for
    servers det does not write that set ``SO_REUSEADDR`` themselves: torch's TCPStore (rank 0's
    ``MASTER_PORT``, torchrun's c10d store; both its backends) and TensorFlow's gRPC servers.

    The ports stay bound here with ``SO_REUSEADDR``, never listening. On Linux such a server binds
    and listens beside the hold, and a bind without the option is refused (both checked by
    tests/core/test_reserved_ports.py); Linux's port selection skips bound ports for binds to port
    0 and outgoing connections. Elsewhere the rule differs, and this falls back to
    :func:`free_ports`."""
    ports, held = _bound(count, host, _SERVER_OPTION)
    _RESERVED.extend(held)
    return ports


_HUB_OPTION: int | None = getattr(socket, "SO_REUSEPORT", None)
_SERVER_OPTION: int | None = socket.SO_REUSEADDR if sys.platform.startswith("linux") else None


def _bound(count: int, host: str, option: int | None) -> tuple[list[int], list[socket.socket]]:
    """``count`` ports and the sockets holding them (bound with ``option``, not listening); with no
    option, free ports and no sockets."""
    if option is None:
        return free_ports(count, host), []
    held = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, option, 1)
            sock.bind((host, 0))
            held.append(sock)
    except OSError:
        for sock in held:
            sock.close()
        raise
    return [sock.getsockname()[1] for sock in held], held


def reserve_collective_port(env: dict[str, str]) -> None:
    """Give a single-node job det's collective port (``DET_COLLECTIVE_PORT``) held reserved by this
    launcher (:func:`reserve_ports`) and marked so for the chief's hub
    (``DET_COLLECTIVE_PORT_RESERVED``); a port already set in ``env`` is left as it is, unmarked."""
    # here, not at the top: determined.core imports this module (its public plugins module)
    from determined.core._distributed_env import PORT_ENV, RESERVED_PORT_ENV

    if env.get(PORT_ENV):
        return
    (port,) = reserve_ports(1)
    env[PORT_ENV] = str(port)
    if _HUB_OPTION is not None:  # else reserve_ports only picked a free port
        env[RESERVED_PORT_ENV] = str(port)


class PortHold:
    """Ports bound on this node, never listening, until :meth:`release`; ``env`` names them for
    the job's processes."""

    def __init__(self, sockets: list[socket.socket], env: dict[str, str]) -> None:
        self._sockets = sockets
        self.env = env

    def release(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets = []


def hold_rendezvous_ports(host: str = "") -> PortHold:
    """A multi-node job's rendezvous ports on its chief's node, held until the job ends: torchrun's
    c10d store port (``DET_C10D_PORT``, as :func:`reserve_server_ports`) and det's collective port
    (``DET_COLLECTIVE_PORT``, as :func:`reserve_ports`, marked for the chief's hub). For resource
    managers that start each node's share themselves (Ray's node agents, a Slurm job's nodes): the
    process that holds them must outlive the job's processes on the chief's node."""
    from determined.core._distributed_env import PORT_ENV, RESERVED_PORT_ENV
    from determined.launch.torch_distributed import C10D_PORT_ENV

    (c10d,), c10d_held = _bound(1, host, _SERVER_OPTION)
    (collective,), collective_held = _bound(1, host, _HUB_OPTION)
    env = {C10D_PORT_ENV: str(c10d), PORT_ENV: str(collective)}
    if collective_held:
        env[RESERVED_PORT_ENV] = str(collective)
    return PortHold(c10d_held + collective_held, env)


def exit_code(returncode: int) -> int:
    """A shell-style exit status: a child killed by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run_forwarding_signals(
    cmd: Sequence[str],
    env: Mapping[str, str] | None = None,
    whole_group: bool = False,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    **popen_kwargs: object,
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` and forward SIGTERM/SIGINT to it until it exits; returns the finished process.

    With ``whole_group`` the child leads a new process group and signals go to the whole group, so a
    launcher's grandchildren (torchrun's workers) are terminated too. ``on_start`` runs once the child
    started and the forwarding handlers are in place (e.g. to start threads that read its pipes), so
    no one can see the child's output and signal us before a signal would be forwarded.
    """
    try:
        proc: subprocess.Popen[bytes] = subprocess.Popen(
            list(cmd),
            env=dict(env) if env is not None else None,
            start_new_session=whole_group,
            **popen_kwargs,  # type: ignore[call-overload]
        )
    except FileNotFoundError as exc:
        print(f"det launcher: cannot run {cmd[0]!r}: {exc}", file=sys.stderr)
        raise SystemExit(127) from None

    def forward(signum: int, _frame: types.FrameType | None) -> None:
        if proc.returncode is not None:
            return  # reaped: its pid (and group id) may belong to someone else by now
        try:
            if whole_group:
                os.killpg(proc.pid, signum)
            else:
                proc.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {}
    for signum in FORWARDED_SIGNALS:
        try:
            previous[signum] = signal.signal(signum, forward)
        except ValueError:  # not the main thread: cannot install handlers
            pass
    # only now may the child's output be read: whoever sees it may signal us at once
    if on_start is not None:
        on_start(proc)
    try:
        proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return proc


TRIAL_MODULE = "determined.launch.trial"
UNDER_LAUNCHER_ENV = "DET_TRIAL_UNDER_LAUNCHER"


def trial_script(args: Sequence[str]) -> list[str] | None:
    """The command a launcher runs for ``--trial MODULE:Class`` (each rank runs det's trial
    runner, ``python -m determined.launch.trial``); ``None`` when ``args`` is a script.

    Raises:
        ValueError: ``--trial`` without a class, or with more arguments after it.
    """
    if not args or not (args[0] == "--trial" or args[0].startswith("--trial=")):
        return None
    if args[0] == "--trial":
        if len(args) < 2 or not args[1] or args[1].startswith("-"):
            raise ValueError("--trial needs MODULE:TrialClass")
        spec, rest = args[1], list(args[2:])
    else:
        spec, rest = args[0].split("=", 1)[1], list(args[1:])
    if not spec:
        raise ValueError("--trial needs MODULE:TrialClass")
    if rest:
        raise ValueError(f"extra arguments after --trial {spec}: {' '.join(rest)}")
    return [sys.executable, "-m", TRIAL_MODULE, spec]
