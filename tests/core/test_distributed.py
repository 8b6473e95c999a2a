"""DistributedContext: collectives across threads and processes, failure propagation, the plugin."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pluggy
import pytest

from determined._errors import CollectiveError
from determined.core import _distributed_plugin, hookspecs
from determined.core._distributed import DistributedContext

LONG = 600.0  # seconds: the collective timeout of the failure tests, so only a detected failure
# ends them early
PROMPT = LONG / 10  # "promptly": a tenth of it, whatever else this machine is running


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def layout(size: int, local_size: int, rank: int) -> dict[str, int]:
    return {
        "rank": rank,
        "size": size,
        "local_rank": rank % local_size,
        "local_size": local_size,
        "cross_rank": rank // local_size,
        "cross_size": size // local_size,
    }


def run_threads(
    size: int,
    fn: Callable[[DistributedContext], Any],
    local_size: int | None = None,
    timeout: float = 30.0,
    **kwargs: Any,
) -> list[Any]:
    """Run ``fn(context)`` once per rank, each rank a thread with its own context; results by rank.

    An exception is returned in place of the result, so tests can assert on every rank.
    """
    local_size = local_size or size
    port = free_port()
    results: list[Any] = [None] * size

    def rank_main(rank: int) -> None:
        try:
            context = DistributedContext(
                **layout(size, local_size, rank),
                chief_ip="127.0.0.1",
                pub_port=port,
                timeout=timeout,
                **kwargs,
            )
            with context:
                results[rank] = fn(context)
        except BaseException as exc:
            results[rank] = exc

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 30)
        assert not thread.is_alive(), "a rank hung"
    return results


def all_six(context: DistributedContext, arrivals: list[threading.Event]) -> dict[str, Any]:
    """Call every collective; rank r enters each one only after rank r+1 did (reverse arrival)."""
    out = {}
    calls = [
        ("allgather", lambda: context.allgather(("g", context.rank))),
        ("gather", lambda: context.gather(context.rank * 10)),
        ("broadcast", lambda: context.broadcast(f"from {context.rank}")),
        ("allgather_local", lambda: context.allgather_local(context.rank)),
        ("gather_local", lambda: context.gather_local(context.local_rank)),
        ("broadcast_local", lambda: context.broadcast_local(context.rank)),
    ]
    for index, (name, call) in enumerate(calls):
        successor = context.rank + 1
        if successor < context.size:
            assert arrivals[index * context.size + successor].wait(30)
        arrivals[index * context.size + context.rank].set()
        out[name] = call()
    return out


def check_all_six(results: list[Any], size: int, local_size: int) -> None:
    for rank, result in enumerate(results):
        assert not isinstance(result, BaseException), f"rank {rank}: {result!r}"
        node = rank // local_size
        node_ranks = list(range(node * local_size, (node + 1) * local_size))
        assert result["allgather"] == [("g", r) for r in range(size)]
        assert result["gather"] == ([r * 10 for r in range(size)] if rank == 0 else None)
        assert result["broadcast"] == "from 0"
        assert result["allgather_local"] == node_ranks
        local_chief = rank % local_size == 0
        assert result["gather_local"] == (list(range(local_size)) if local_chief else None)
        assert result["broadcast_local"] == node_ranks[0]


@pytest.mark.parametrize("cross_size", [1, 4])
@pytest.mark.parametrize("local_size", [1, 4])
@pytest.mark.parametrize("force_tcp", [False, True])
def test_collectives_threads(cross_size: int, local_size: int, force_tcp: bool) -> None:
    size = cross_size * local_size
    arrivals = [threading.Event() for _ in range(6 * size)]
    results = run_threads(
        size, lambda c: all_six(c, arrivals), local_size=local_size, force_tcp=force_tcp
    )
    check_all_six(results, size, local_size)


def test_size_one_needs_no_sockets() -> None:
    context = DistributedContext()
    assert (context.rank, context.size, context.local_size, context.cross_size) == (0, 1, 1, 1)
    assert context.allgather(1) == [1] and context.gather(2) == [2] and context.broadcast(3) == 3
    assert context.allgather_local(4) == [4] and context.gather_local(5) == [5]
    assert context.broadcast_local(6) == 6
    assert context._is_chief and context._is_local_chief
    assert (context.get_rank(), context.get_local_rank(), context.get_size()) == (0, 0, 1)
    assert context.get_num_agents() == 1
    context.close()
    context.close()  # idempotent


def test_argument_validation() -> None:
    with pytest.raises(ValueError, match="missing .*cross_size"):
        DistributedContext(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0)
    with pytest.raises(ValueError, match="chief_ip is required"):
        DistributedContext(**layout(4, 2, 1))
    with pytest.raises(ValueError, match="rank=4 is out of range"):
        DistributedContext(rank=4, size=4, local_rank=0, local_size=4, cross_rank=0, cross_size=1)
    with pytest.raises(ValueError, match="timeout"):
        DistributedContext(timeout=0)


def test_collective_after_close_fails() -> None:
    def fn(context: DistributedContext) -> Any:
        context.allgather(0)
        context.close()
        return context.allgather(1)

    for result in run_threads(2, fn):
        assert isinstance(result, CollectiveError)


def test_closed_thread_fails_everyone_promptly() -> None:
    def fn(context: DistributedContext) -> Any:
        context.allgather(0)
        if context.rank == 3:
            context.close()
            return "closed"
        return context.allgather(1)

    start = time.monotonic()
    results = run_threads(4, fn, timeout=LONG)
    assert time.monotonic() - start < PROMPT
    assert results[3] == "closed"
    for rank in (0, 1, 2):
        assert isinstance(results[rank], CollectiveError), results[rank]
        assert "allgather failed" in str(results[rank])
        assert "rank 3 closed" in str(results[rank])


def test_chief_closing_fails_workers_promptly() -> None:
    def fn(context: DistributedContext) -> Any:
        if context.rank == 0:
            context.close()
            return "closed"
        return context.broadcast(None)

    start = time.monotonic()
    results = run_threads(4, fn, timeout=LONG)
    assert time.monotonic() - start < PROMPT
    for rank in (1, 2, 3):
        assert isinstance(results[rank], CollectiveError)
        assert "broadcast failed: rank 0 closed" in str(results[rank])


def test_rank_that_never_arrives_times_out() -> None:
    done = threading.Event()
    finished = []

    def fn(context: DistributedContext) -> Any:
        if context.rank == 2:
            assert done.wait(30)
            with pytest.raises(CollectiveError):  # the late rank learns the group failed
                context.allgather(2)
            return "late"
        try:
            return context.allgather(context.rank)
        finally:
            finished.append(context.rank)
            if len(finished) == 3:
                done.set()

    start = time.monotonic()
    results = run_threads(4, fn, timeout=1.0)
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 1.0 + PROMPT
    assert results[2] == "late"
    for rank in (0, 1, 3):
        assert isinstance(results[rank], CollectiveError), results[rank]
        assert "timed out" in str(results[rank])
    assert "rank(s) 2" in str(results[0])


def test_mismatched_collectives_name_both() -> None:
    def fn(context: DistributedContext) -> Any:
        if context.rank == 2:
            return context.broadcast(1)
        return context.allgather(1)

    results = run_threads(4, fn, timeout=LONG)
    for rank, result in enumerate(results):
        assert isinstance(result, CollectiveError), (rank, result)
        assert "collective mismatch" in str(result)
        assert "allgather" in str(result) and "broadcast" in str(result)


def test_unpicklable_payload_fails_everyone() -> None:
    def fn(context: DistributedContext) -> Any:
        return context.allgather(threading.Lock() if context.rank == 1 else 1)

    start = time.monotonic()
    results = run_threads(3, fn, timeout=LONG)
    assert time.monotonic() - start < PROMPT
    for result in results:
        assert isinstance(result, CollectiveError)
        assert "rank 1 could not pickle" in str(result)


def test_local_failure_reaches_the_node() -> None:
    def fn(context: DistributedContext) -> Any:
        if context.rank == 5:
            context.close()
            return "closed"
        if context.cross_rank == 1:
            return context.allgather_local(0)
        return "other node"

    results = run_threads(8, fn, local_size=4, timeout=LONG)
    for rank in (4, 6, 7):
        assert isinstance(results[rank], CollectiveError)
        assert "allgather_local failed: rank 5 closed" in str(results[rank])


# -- separate processes ----------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, os, sys
    from determined._errors import CollectiveError
    from determined.core._distributed import DistributedContext

    layout = json.loads(sys.argv[1])
    mode = sys.argv[2]
    try:
        context = DistributedContext(
            **layout, chief_ip="127.0.0.1", pub_port=int(os.environ["PORT"]),
            timeout=float(os.environ.get("TIMEOUT", "60")),
        )
        rank = context.rank
        out = {"allgather": context.allgather(rank)}
        if mode == "die" and rank == 2:
            os._exit(3)
        out["gather"] = context.gather(rank)
        out["broadcast"] = context.broadcast(rank)
        out["allgather_local"] = context.allgather_local(rank)
        out["gather_local"] = context.gather_local(rank)
        out["broadcast_local"] = context.broadcast_local(rank)
        context.close()
    except CollectiveError as exc:
        out = {"error": str(exc)}
    print(json.dumps(out))
    """
)


def run_processes(
    tmp_path: pathlib.Path, size: int, local_size: int, mode: str, env: dict[str, str] | None = None
) -> list[tuple[int, dict[str, Any]]]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    base_env = {**os.environ, "PORT": str(free_port()), **(env or {})}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), json.dumps(layout(size, local_size, r)), mode],
            env=base_env,
            stdout=subprocess.PIPE,
            text=True,
        )
        # Start the workers first and the chief last: the connection phase must cope.
        for r in reversed(range(size))
    ][::-1]
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=90)
        out.append((proc.returncode, json.loads(stdout) if stdout.strip() else {}))
    return out


def test_collectives_processes(tmp_path: pathlib.Path) -> None:
    results = run_processes(tmp_path, 4, 2, "all", env={"DET_COLLECTIVE_KEY": "sesame"})
    for rank, (code, out) in enumerate(results):
        assert code == 0
        node = [rank - rank % 2, rank - rank % 2 + 1]
        assert out["allgather"] == [0, 1, 2, 3]
        assert out["gather"] == ([0, 1, 2, 3] if rank == 0 else None)
        assert out["broadcast"] == 0
        assert out["allgather_local"] == node
        assert out["gather_local"] == (node if rank % 2 == 0 else None)
        assert out["broadcast_local"] == node[0]


def test_dead_process_fails_everyone_promptly(tmp_path: pathlib.Path) -> None:
    start = time.monotonic()
    results = run_processes(tmp_path, 4, 4, "die", env={"TIMEOUT": str(LONG)})
    assert time.monotonic() - start < PROMPT
    assert results[2][0] == 3
    for rank in (0, 1, 3):
        code, out = results[rank]
        assert code == 0
        assert out["error"] == "gather failed: rank 2 disconnected"


def test_hmac_handshake_refuses_wrong_key(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    script = tmp_path / "intruder.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from determined._errors import CollectiveError
            from determined.core._distributed import DistributedContext
            try:
                DistributedContext(rank=1, size=2, local_rank=1, local_size=2, cross_rank=0,
                                   cross_size=1, pub_port={port}, timeout=20)
            except CollectiveError as exc:
                print(exc)
            """
        )
    )
    monkeypatch.setenv("DET_COLLECTIVE_KEY", "right key")
    intruder = subprocess.Popen(
        [sys.executable, str(script)],
        env={**os.environ, "DET_COLLECTIVE_KEY": "wrong key"},
        stdout=subprocess.PIPE,
        text=True,
    )
    with pytest.raises(CollectiveError, match="0 of 1 peers connected"):
        DistributedContext(
            rank=0, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1,
            pub_port=port, timeout=3,
        )  # fmt: skip
    stdout, _ = intruder.communicate(timeout=30)
    assert "DET_COLLECTIVE_KEY" in stdout


# -- constructors and the plugin -------------------------------------------------------------


def plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("determined")
    pm.add_hookspecs(hookspecs)
    pm.register(_distributed_plugin)
    return pm


DIST_VARS = [
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "USE_DEEPSPEED",
    "LOCAL_SIZE",
    "CROSS_RANK",
    "CROSS_SIZE",
    "HOROVOD_RANK",
    "TF_CONFIG",
    "DET_USE_TF_CONFIG",
    "DET_CHIEF_IP",
]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in DIST_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_DISABLE_PLUGIN_AUTOLOAD", "1")
    return monkeypatch


def test_plugin_single_process(clean_env: pytest.MonkeyPatch) -> None:
    context = plugin_manager().hook.det_distributed_context(cluster_info=None)
    assert isinstance(context, DistributedContext) and context.size == 1


def test_plugin_refuses_multi_slot_without_launcher(clean_env: pytest.MonkeyPatch) -> None:
    from determined import ClusterInfo

    info = ClusterInfo("localhost", "c", "a", [0, 1], "t", "alloc", "tok", "TRIAL")
    with pytest.raises(ValueError, match="2 slots.*launcher"):
        plugin_manager().hook.det_distributed_context(cluster_info=info)


@pytest.mark.parametrize("flavour", ["torch", "deepspeed"])
def test_plugin_reads_launcher_variables(clean_env: pytest.MonkeyPatch, flavour: str) -> None:
    names = [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
    ]
    if flavour == "deepspeed":
        clean_env.setenv("USE_DEEPSPEED", "1")
        names = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"]
    for name, value in zip(names, ["0", "1", "0", "1", "0", "1"], strict=True):
        clean_env.setenv(name, value)
    context = plugin_manager().hook.det_distributed_context(cluster_info=None)
    assert (context.rank, context.size, context.cross_size) == (0, 1, 1)


def test_from_torch_distributed_names_missing_variable(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("RANK", "0")
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        DistributedContext.from_torch_distributed()


def test_from_torch_distributed_threads_share_env_chief_ip(clean_env: pytest.MonkeyPatch) -> None:
    """DET_CHIEF_IP is the fallback chief address of every from_* constructor."""
    clean_env.setenv("DET_CHIEF_IP", "127.0.0.1")
    clean_env.setenv("DET_COLLECTIVE_PORT", str(free_port()))
    for name, value in zip(
        ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE"],
        ["0", "1", "0", "1", "0", "1"],
        strict=True,
    ):
        clean_env.setenv(name, value)
    context = DistributedContext.from_torch_distributed()
    assert context._chief_ip == "127.0.0.1"
