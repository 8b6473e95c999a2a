"""``launch._util.reserve_ports``: a launcher holds its job's collective port until it exits, so
no other process can take it between the launch and the rank binding it, while det's collective
hub (told the port is reserved) binds beside the hold and accepts connections on it. Ports held for
servers det does not write (``reserve_server_ports``: torch's store, gRPC) are bound beside the
same way by those servers."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys

import pytest

from determined._errors import CollectiveError
from determined.core import _collective

pytestmark = pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="no SO_REUSEPORT")

HOLDER = (
    "import sys; from determined.launch import _util; "
    "print(_util.reserve_ports(1)[0], flush=True); sys.stdin.read()"
)


def _bind(port: int, reuse_port: bool = False) -> socket.socket:
    sock = socket.socket()
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


def test_a_reserved_port_is_held_until_the_holder_exits() -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        port = int(holder.stdout.readline())
        with pytest.raises(OSError) as plain:
            _bind(port)
        assert plain.value.errno == errno.EADDRINUSE
        # the hold is private to this job's launcher, not to any process of the user: a listener
        # must be told the port is reserved (below) to bind beside it
        with pytest.raises(CollectiveError, match="cannot listen"):
            _collective.listen(("127.0.0.1", port))
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    _bind(port).close()  # free again once the launcher is gone


def test_the_hub_listens_on_a_reserved_port_and_gets_the_connections() -> None:
    from determined.launch import _util

    first, second = _util.reserve_ports(2)
    assert first != second
    listener = _collective.listen(("127.0.0.1", first), reserved=True)
    try:
        client = socket.create_connection(("127.0.0.1", first), timeout=10)
        listener.settimeout(10)
        accepted, _ = listener.accept()
        client.sendall(b"ping")
        assert accepted.recv(4) == b"ping"
        accepted.close()
        client.close()
    finally:
        listener.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's SO_REUSEADDR rule")
@pytest.mark.parametrize("libuv", [True, False], ids=["libuv store", "classic store"])
def test_a_server_port_is_refused_to_plain_binds_and_taken_by_torchs_store(libuv: bool) -> None:
    """DeepSpeed's ``MASTER_PORT`` and TensorFlow's worker ports: held with ``SO_REUSEADDR``,
    which torch's TCPStore (rank 0 binds it) and gRPC servers set too."""
    import datetime

    import torch.distributed as dist

    from determined.launch import _util

    (port,) = _util.reserve_server_ports(1)
    with pytest.raises(OSError) as plain:
        _bind(port)
    assert plain.value.errno == errno.EADDRINUSE
    timeout = datetime.timedelta(seconds=60)
    server = dist.TCPStore(
        "127.0.0.1", port, 2, True, timeout=timeout, use_libuv=libuv, wait_for_workers=False
    )
    client = dist.TCPStore("127.0.0.1", port, 2, False, timeout=timeout)
    server.set("rank0", "here")
    assert client.get("rank0") == b"here"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's SO_REUSEADDR rule")
def test_a_multi_node_jobs_rendezvous_ports_are_held_until_released() -> None:
    """``plugins.hold_rendezvous_ports`` (Ray's node agents): torchrun's c10d store and det's hub
    bind beside the holds on every interface, plain binds are refused, and the release frees
    both."""
    import datetime

    import torch.distributed as dist

    from determined.core import plugins

    hold = plugins.hold_rendezvous_ports()
    c10d, collective = int(hold.env["DET_C10D_PORT"]), int(hold.env["DET_COLLECTIVE_PORT"])
    assert hold.env["DET_COLLECTIVE_PORT_RESERVED"] == str(collective)
    for port in (c10d, collective):
        with pytest.raises(OSError) as plain:
            _bind(port)
        assert plain.value.errno == errno.EADDRINUSE
    store = dist.TCPStore("127.0.0.1", c10d, 1, True, timeout=datetime.timedelta(seconds=60))
    store.set("ready", "1")
    hub = _collective.listen(("", collective), reserved=True)
    hub.close()
    del store
    hold.release()
    _bind(collective).close()
