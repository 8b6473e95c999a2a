"""The Ray resource manager's parts that need no Ray cluster: config, slot arithmetic, the node
runner (real processes), its watcher, and the master's wiring (``--ray-address``, no ``import ray``
on the local resource manager)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from process_tree import alive

from determined.master import MasterConfig
from determined.master.__main__ import _config, _parser
from determined.master.rm import resource_manager
from determined.master.rm._process import wait_unreaped
from determined.master.rm.ray import NodeRunner, PoolConfig, parse_config
from determined.master.rm.ray._cluster import (
    alive_nodes,
    bundles,
    group_bundles,
    node_slots,
    strategy,
    too_big,
)
from determined.master.rm.ray._node import MARKER_ENV, kill_marked, node_environment, pack_directory
from determined.master.rm.ray._run import task_environment


def _wait(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# -- config ------------------------------------------------------------------------------------


def test_config_defaults_and_pools() -> None:
    config = parse_config(
        {
            "type": "ray",
            "address": "ray://head:10001",
            "slot_type": "gpu",
            "resource_pools": {"a100": {"resource": "det_pool_a100", "labels": {"zone": "b"}}},
        }
    )
    assert config.address == "ray://head:10001" and config.slot_type == "cuda"
    assert config.pool("a100") == PoolConfig("det_pool_a100", {"zone": "b"})
    assert config.pool("default") == PoolConfig()
    assert config.pool_names() == ["default", "a100"]
    with pytest.raises(ValueError, match=r"resource_pool: no pool 'x'.*pools: default, a100"):
        config.pool("x")


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"slots": 4}, "resource_manager.slots"),
        ({"slot_type": "tpu"}, "resource_manager.slot_type"),
        ({"cpus_per_slot": -1}, "resource_manager.cpus_per_slot"),
        ({"slot_type": "cpu", "cpus_per_slot": 0}, "resource_manager.cpus_per_slot"),
        ({"max_bypass": "x"}, "resource_manager.max_bypass"),
        ({"address": 3}, "resource_manager.address"),
        ({"resource_pools": []}, "resource_manager.resource_pools"),
        ({"resource_pools": {"p": {"gpus": 1}}}, "resource_manager.resource_pools.p.gpus"),
        (
            {"resource_pools": {"p": {"labels": {"a": 1}}}},
            "resource_manager.resource_pools.p.labels",
        ),
        ({"runtime_env": "conda"}, "resource_manager.runtime_env"),
    ],
)
def test_bad_config_names_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        resource_manager({"type": "ray", **section})


def test_plugin_builds_the_ray_manager_without_importing_ray() -> None:
    script = textwrap.dedent(
        """
        import sys
        from determined.master.rm import resource_manager
        local = resource_manager({"type": "local", "slots": 1})
        ray_rm = resource_manager({"type": "ray", "address": "auto"})
        print(type(local).__name__, type(ray_rm).__name__, "ray" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["LocalResourceManager", "RayResourceManager", "False"]


def test_ray_address_flag_and_config_file(tmp_path: pathlib.Path) -> None:
    args = _parser().parse_args(["up", "--ray-address", "ray://head:10001", "--slots", "3"])
    assert _config(args).resource_manager_config() == {
        "type": "ray",
        "address": "ray://head:10001",
    }
    path = tmp_path / "master.yaml"
    path.write_text("resource_manager:\n  type: ray\n  address: auto\n  cpus_per_slot: 2\n")
    from_file = MasterConfig.from_file(path)
    assert from_file.resource_manager_config() == {
        "type": "ray",
        "address": "auto",
        "cpus_per_slot": 2,
    }
    # the flag keeps the file's other Ray settings and replaces the address
    merged = MasterConfig.from_file(path, ray_address="10.0.0.1:6379")
    assert merged.resource_manager_config()["address"] == "10.0.0.1:6379"
    assert merged.resource_manager_config()["cpus_per_slot"] == 2
    assert MasterConfig(slots=2).resource_manager_config() == {"type": "local", "slots": 2}


# -- slot arithmetic ---------------------------------------------------------------------------

NODES = alive_nodes(
    [
        {"NodeID": "a" * 56, "NodeManagerAddress": "10.0.0.1", "Alive": True,
         "Resources": {"CPU": 8.0, "GPU": 2.0, "det_pool_big": 1.0}, "Labels": {"zone": "b"}},
        {"NodeID": "b" * 56, "NodeManagerAddress": "10.0.0.2", "Alive": True,
         "Resources": {"CPU": 3.0}},
        {"NodeID": "c" * 56, "NodeManagerAddress": "10.0.0.3", "Alive": False,
         "Resources": {"CPU": 64.0}},
    ]
)  # fmt: skip


def test_node_slots_per_slot_type_and_pool() -> None:
    assert [n.address for n in NODES] == ["10.0.0.1", "10.0.0.2"]  # the dead node is ignored
    default = PoolConfig()
    assert [node_slots(n, "cpu", 1.0, default) for n in NODES] == [8, 3]
    assert [node_slots(n, "cpu", 2.0, default) for n in NODES] == [4, 1]
    assert [node_slots(n, "cuda", 0.0, default) for n in NODES] == [2, 0]
    assert [node_slots(n, "cuda", 6.0, default) for n in NODES] == [1, 0]
    assert [node_slots(n, "cpu", 1.0, PoolConfig("det_pool_big")) for n in NODES] == [1, 0]
    assert [node_slots(n, "cpu", 1.0, PoolConfig(None, {"zone": "b"})) for n in NODES] == [8, 0]


def test_bundles_and_strategy() -> None:
    assert bundles(2, "cpu", 1.0, PoolConfig()) == [{"CPU": 1.0}, {"CPU": 1.0}]
    assert bundles(1, "cuda", 0.0, PoolConfig("det_pool_big")) == [
        {"GPU": 1.0, "det_pool_big": 1.0}
    ]
    assert strategy(2, [2, 2]) == "STRICT_PACK"
    assert strategy(3, [2, 2]) == "SPREAD"
    groups = group_bundles({0: "n1", 1: "n2", 2: "n1", 3: "n2"})
    assert groups == [("n1", [0, 2]), ("n2", [1, 3])]
    assert group_bundles({0: "n2", 1: "n1"})[0][0] == "n2"  # bundle 0's node is container 0


def test_too_big_gives_the_numbers() -> None:
    assert too_big(4, "default", "cpu", [2, 2]) is None
    assert too_big(5, "default", "cpu", [2, 2, 0]) == (
        "slots_per_trial 5 exceeds the 4 CPU slots of the Ray cluster"
        " (resource pool 'default': 2 node(s) with 2 + 2 slots)"
    )
    assert "no alive node offers its slots" in str(too_big(1, "big", "cuda", [0, 0]))


# -- environment -------------------------------------------------------------------------------


def test_task_and_node_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("HOME", "/home/master")
    spec_env = {
        "PATH": "/venv/bin:/usr/bin:/bin",
        "HOME": "/home/master",
        "DET_TRIAL_ID": "3",
        "PYTHONUNBUFFERED": "1",
    }
    task, prefix = task_environment(spec_env)
    assert task == {"DET_TRIAL_ID": "3", "PYTHONUNBUFFERED": "1"} and prefix == "/venv/bin"
    node = {"PATH": "/opt/bin", "HOME": "/home/node", "RAY_JOB_ID": "1", "OMP_NUM_THREADS": "1"}
    env = node_environment(node, task, prefix)
    assert env == {
        "PATH": "/venv/bin:/opt/bin",
        "HOME": "/home/node",
        "DET_TRIAL_ID": "3",
        "PYTHONUNBUFFERED": "1",
    }


# -- the node runner ---------------------------------------------------------------------------


def _context(tmp_path: pathlib.Path, files: dict[str, str]) -> bytes:
    src = tmp_path / "ctx"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)
    return pack_directory(src)


def _drain(runner: NodeRunner, timeout: float = 30.0) -> tuple[list[str], int]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch, code = runner.poll(1.0)
        lines += [f"{stdtype}:{text}" for _, stdtype, text in batch]
        if code is not None:
            return lines, code
    raise AssertionError(f"no exit; lines so far {lines}")


INFO = {
    "master_url": "http://127.0.0.1:1",
    "task_id": "1.1",
    "allocation_id": "1.1.1",
    "slot_ids": [0, 1],
    "rendezvous_info": {
        "container_addrs": ["a", "b"],
        "container_rank": 1,
        "container_slot_counts": [2, 2],
    },
}


def test_node_runner_runs_the_context_and_streams_output(tmp_path: pathlib.Path) -> None:
    script = (
        "import json, os, sys\n"
        "info = json.load(open(os.environ['DET_CLUSTER_INFO']))\n"
        "print('rank', info['rendezvous_info']['container_rank'], os.environ['GREETING'])\n"
        "print(open('data.txt').read().strip())\n"
        "print('oops', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    context = _context(
        tmp_path,
        {"main.py": script, "data.txt": "from the context\n", "hook.sh": "export GREETING=hi\n"},
    )
    runner = NodeRunner("1.1.1", 1, str(tmp_path / "nodes"))
    pid = runner.start(context, INFO, [sys.executable, "main.py"], {}, "", "hook.sh")
    assert pid > 0
    lines, code = _drain(runner)
    assert code == 3
    # each stream keeps its order; how the two interleave depends on which reader runs first
    assert [line for line in lines if line.startswith("stdout:")] == [
        "stdout:rank 1 hi",
        "stdout:from the context",
    ]
    assert [line for line in lines if line.startswith("stderr:")] == ["stderr:oops"]
    assert len(lines) == 3
    assert (runner.dir / "info" / "cluster.json").stat().st_mode & 0o777 == 0o600
    runner.cleanup()
    assert not runner.dir.exists()


def test_node_runner_signal_reaches_the_whole_group(tmp_path: pathlib.Path) -> None:
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    runner = NodeRunner("1.1.1", 0, str(tmp_path / "nodes"))
    runner.start(
        _context(tmp_path, {"main.py": script}), INFO, [sys.executable, "main.py"], {}, "", None
    )
    batch: list[Any] = []
    _wait(lambda: batch.extend(runner.poll(0.5)[0]) or batch)
    grandchild = int(batch[0][2])
    runner.signal(signal.SIGTERM)
    _, code = _drain(runner)
    assert code == -signal.SIGTERM
    _wait(lambda: not alive(grandchild))
    runner.cleanup()


ESCAPER = (
    "import pathlib, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
    " start_new_session=True)\n"
    "pathlib.Path('escaped.pid').write_text(str(child.pid))\n"
    "time.sleep(120)\n"
)
"""A launcher-like rank: its worker runs in a session (and process group) of its own."""


def _escaped_pid(root: pathlib.Path) -> int:
    found: list[pathlib.Path] = []
    _wait(lambda: found.extend(root.glob("*/work/escaped.pid")) or found)
    _wait(lambda: found[0].read_text())
    return int(found[0].read_text())


def test_sigkill_reaches_workers_in_their_own_session(tmp_path: pathlib.Path) -> None:
    runner = NodeRunner("1.1.1", 0, str(tmp_path / "nodes"))
    leader = runner.start(
        _context(tmp_path, {"main.py": ESCAPER}), INFO, [sys.executable, "main.py"], {}, "", None
    )
    escaped = _escaped_pid(tmp_path / "nodes")
    assert os.getsid(escaped) != os.getsid(leader)
    runner.signal(signal.SIGKILL)
    _, code = _drain(runner)
    assert code == -signal.SIGKILL
    _wait(lambda: not alive(escaped))
    runner.cleanup()


def test_kill_before_start_refuses_to_start(tmp_path: pathlib.Path) -> None:
    runner = NodeRunner("1.1.1", 0, str(tmp_path / "nodes"))
    runner.signal(signal.SIGKILL)
    with pytest.raises(OSError, match="killed before it started"):
        runner.start(_context(tmp_path, {"x": ""}), INFO, [sys.executable, "-V"], {}, "", None)
    runner.cleanup()


def test_ranks_die_with_their_actor_process(tmp_path: pathlib.Path) -> None:
    """SIGKILL the process holding the NodeRunner (a dead actor): the watcher ends the ranks."""
    holder = textwrap.dedent(
        f"""
        import pathlib, sys, time
        from determined.master.rm.ray._node import NodeRunner, pack_directory
        ctx = pathlib.Path({str(tmp_path / "c")!r}); ctx.mkdir()
        (ctx / "main.py").write_text({ESCAPER!r})
        runner = NodeRunner("9.9.9", 0, {str(tmp_path / "nodes")!r})
        pid = runner.start(pack_directory(ctx), {{}}, [sys.executable, "main.py"], {{}}, "", None)
        print(pid, flush=True)
        time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        rank = int(proc.stdout.readline())
        escaped = _escaped_pid(tmp_path / "nodes")
        assert alive(rank) and alive(escaped) and os.getsid(escaped) != os.getsid(rank)
        proc.kill()
        proc.wait()
        _wait(lambda: not alive(rank) and not alive(escaped))
    finally:
        proc.kill()
        proc.wait()


def test_a_group_id_without_marked_processes_is_never_killed() -> None:
    """A launch's group id whose processes are all gone may lead a stranger's group by now (pids
    wrap around): only a marked member, or a leader still held unreaped, makes it the launch's."""
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    try:
        kill_marked(stranger.pid, f"{MARKER_ENV}=gone")
        assert stranger.poll() is None and alive(stranger.pid)
        kill_marked(stranger.pid, f"{MARKER_ENV}=gone", group_held=True)
        assert stranger.wait(20) == -signal.SIGKILL
    finally:
        stranger.kill()
        stranger.wait()


def test_the_leader_is_reaped_only_after_its_group_was_ended(tmp_path: pathlib.Path) -> None:
    """``wait_unreaped`` leaves the exited leader a zombie, so its pid (the group id the runner
    kills) stays reserved until the group's leftovers are gone."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_unreaped(child.pid)
    with open(f"/proc/{child.pid}/stat") as f:
        assert f.read().split(")")[-1].split()[0] == "Z"
    assert child.wait(5) == 0
    wait_unreaped(child.pid)  # reaped already: returns at once


def test_the_chief_agent_holds_rendezvous_ports_until_the_allocation_is_cleaned_up() -> None:
    """A multi-node trial's c10d and collective ports stay bound by the chief node's agent (no
    other process on the node is given them before the ranks bind them) until its cleanup."""
    import errno
    import socket

    from determined.master.rm.ray._node import NodeAgent

    agent = NodeAgent()
    env = agent.hold_rendezvous_ports("alloc-1")
    ports = [int(env["DET_C10D_PORT"]), int(env["DET_COLLECTIVE_PORT"])]
    assert env["DET_COLLECTIVE_PORT_RESERVED"] == env["DET_COLLECTIVE_PORT"]

    def plain_bind(port: int) -> None:
        with socket.socket() as sock:
            sock.bind(("", port))

    for port in ports:
        with pytest.raises(OSError) as taken:
            plain_bind(port)
        assert taken.value.errno == errno.EADDRINUSE
    agent.cleanup("other-allocation")
    with pytest.raises(OSError):
        plain_bind(ports[0])
    agent.cleanup("alloc-1")
    for port in ports:
        plain_bind(port)
