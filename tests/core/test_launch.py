"""The launchers as real subprocesses: wrap_rank, torch_distributed (2 CPU ranks, gloo), tensorflow."""

from __future__ import annotations

import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from determined import ClusterInfo, RendezvousInfo
from determined.launch import tensorflow as tf_launcher
from determined.launch import torch_distributed

PY = sys.executable


def launch(module: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [PY, "-m", f"determined.launch.{module}", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def clean_env() -> dict[str, str]:
    """The test process's environment without any cluster or launcher variable."""
    drop = (
        "DET_CLUSTER_INFO", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TF_CONFIG", "DET_C10D_PORT",
        "DET_COLLECTIVE_PORT", "DET_COLLECTIVE_PORT_RESERVED",
    )  # fmt: skip
    return {k: v for k, v in os.environ.items() if k not in drop}


# -- wrap_rank -------------------------------------------------------------------------------


def test_wrap_rank_prefixes_both_streams_and_propagates_exit_code() -> None:
    script = "import sys; print('out'); print('err', file=sys.stderr); sys.stdout.write('a\\rb\\n'); sys.exit(7)"
    result = subprocess.run(
        [PY, "-m", "determined.launch.wrap_rank", "3", PY, "-c", script],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 7
    assert result.stdout == b"[rank=3] out\n[rank=3] a\r[rank=3] b\n"  # \r ends a line too
    assert result.stderr == b"[rank=3] err\n"


def test_wrap_rank_reads_first_set_variable_and_splits_long_lines() -> None:
    long = "x" * (io.DEFAULT_BUFFER_SIZE + 10)
    result = launch(
        "wrap_rank",
        "HOROVOD_RANK,MY_RANK",
        PY,
        "-c",
        f"print('{long}', end='')",
        env={"MY_RANK": "5"},
    )
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines == [
        "[rank=5] " + "x" * io.DEFAULT_BUFFER_SIZE,
        "[rank=5] " + "x" * 10,
    ]


def test_wrap_rank_usage_errors() -> None:
    assert launch("wrap_rank", "3").returncode == 2
    result = launch("wrap_rank", "NOT_SET_ANYWHERE", PY, "-c", "pass")
    assert result.returncode == 2 and "NOT_SET_ANYWHERE" in result.stderr


def test_wrap_rank_no_redirect_passes_output_through() -> None:
    result = launch("wrap_rank", "--no-redirect-stdio", "1", PY, "-c", "print('plain')")
    assert result.returncode == 0 and result.stdout == "plain\n"


def test_wrap_rank_forwards_sigterm() -> None:
    child = textwrap.dedent(
        """
        import signal, sys
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))
        print('ready', flush=True)
        signal.pause()
        """
    )
    proc = subprocess.Popen(
        [PY, "-m", "determined.launch.wrap_rank", "0", PY, "-c", child],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "[rank=0] ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 42


# -- torch_distributed -----------------------------------------------------------------------

TINY_TRAIN = textwrap.dedent(
    """
    import os
    import torch
    import torch.distributed as dist
    from determined.core._distributed import DistributedContext

    context = DistributedContext.from_torch_distributed()
    dist.init_process_group("gloo")
    value = torch.tensor([float(context.rank + 1)])
    dist.all_reduce(value)
    ranks = context.allgather(context.rank)
    print(f"sum={value.item()} ranks={ranks} size={context.size} "
          f"chief={os.environ['DET_CHIEF_IP']} flag={os.environ['USE_TORCH_DISTRIBUTED']}", flush=True)
    dist.destroy_process_group()
    context.close()
    """
)


def write_cluster_info(path: pathlib.Path, slots: int, addrs: list[str] | None = None) -> None:
    rendezvous = RendezvousInfo(addrs, 0, [slots] * len(addrs)) if addrs else None
    ClusterInfo(
        master_url="http://127.0.0.1:1",
        cluster_id="cluster",
        agent_id="agent",
        slot_ids=list(range(slots)),
        task_id="task",
        allocation_id="alloc",
        session_token="token",
        task_type="COMMAND",
        rendezvous_info=rendezvous,
    ).write(path)


def check_two_ranks(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        assert (
            f"[rank={rank}] sum=3.0 ranks=[0, 1] size=2 chief=127.0.0.1 flag=1" in result.stdout
        ), result.stdout


@pytest.mark.slow
def test_torch_distributed_with_cluster_info(tmp_path: pathlib.Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(TINY_TRAIN)
    info = tmp_path / "cluster.json"
    write_cluster_info(info, slots=2)
    env = {**clean_env(), "DET_CLUSTER_INFO": str(info), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [PY, "-m", "determined.launch.torch_distributed", PY, str(train)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    check_two_ranks(result)


@pytest.mark.slow
def test_torch_distributed_off_cluster(tmp_path: pathlib.Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(TINY_TRAIN)
    env = {**clean_env(), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [
            PY,
            "-m",
            "determined.launch.torch_distributed",
            "--nproc_per_node",
            "2",
            "--",
            PY,
            str(train),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    check_two_ranks(result)


def test_torch_distributed_propagates_failure(tmp_path: pathlib.Path) -> None:
    env = {**clean_env(), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [PY, "-m", "determined.launch.torch_distributed", PY, "-c", "import sys; sys.exit(3)"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode != 0


def test_torch_distributed_command_line_multi_node() -> None:
    info = ClusterInfo(
        "http://m:8080", "c", "a", [0, 1, 2, 3], "t", "alloc", "tok", "TRIAL",
        rendezvous_info=RendezvousInfo(["10.0.0.1", "10.0.0.2"], 1, [4, 4]),
    )  # fmt: skip
    env: dict[str, str] = {}
    overrides, script = torch_distributed.split_args(
        ["--max_restarts", "2", "--", "python3", "t.py"]
    )
    cmd = torch_distributed.create_launch_cmd(overrides, script, env, info)
    joined = " ".join(cmd)
    assert "--nnodes 2 --nproc_per_node 4 --node_rank 1" in joined
    assert "--master_addr 10.0.0.1 --master_port 29400" in joined
    assert joined.endswith(
        "--max_restarts 2 --module determined.launch.wrap_rank RANK -- python3 t.py"
    )
    assert env["DET_CHIEF_IP"] == "10.0.0.1" and env["USE_TORCH_DISTRIBUTED"] == "1"
    assert "DET_COLLECTIVE_KEY" not in env  # several nodes must share the master's key


def test_torch_distributed_single_node_fixes_no_port_in_advance() -> None:
    """c10d on a port the kernel picks, the collective port reserved by the launcher: no port is
    free only for a moment (another process could take it before the rank binds it)."""
    env: dict[str, str] = {}
    cmd = torch_distributed.create_launch_cmd([], ["x"], env, None)
    assert cmd[cmd.index("--rdzv_backend") + 1] == "c10d"
    assert cmd[cmd.index("--rdzv_endpoint") + 1] == "127.0.0.1:0"
    assert "--master_port" not in cmd
    assert env["DET_COLLECTIVE_PORT"] == env["DET_COLLECTIVE_PORT_RESERVED"]
    # a rendezvous chosen by the user's overrides gets a fixed port (theirs wins: it comes later)
    fixed = torch_distributed.create_launch_cmd(["--master_port", "31999"], ["x"], {}, None)
    assert "--rdzv_backend" not in fixed and fixed.index("--master_port") < fixed.index("31999")
    # a collective port set from outside is not the launcher's to reserve
    given = {"DET_COLLECTIVE_PORT": "31998"}
    torch_distributed.create_launch_cmd([], ["x"], given, None)
    assert given["DET_COLLECTIVE_PORT"] == "31998" and "DET_COLLECTIVE_PORT_RESERVED" not in given


def test_torch_distributed_honours_c10d_port_env() -> None:
    env = {"DET_C10D_PORT": "31234"}
    cmd = torch_distributed.create_launch_cmd([], ["x"], env, None)
    assert cmd[cmd.index("--master_port") + 1] == "31234"
    assert cmd[cmd.index("--master_addr") + 1] == "127.0.0.1"
    assert env["DET_COLLECTIVE_KEY"] and env["DET_COLLECTIVE_PORT"]


# -- tensorflow ------------------------------------------------------------------------------


def test_tensorflow_launcher_single_node_runs_script_bare() -> None:
    script = "import os; print(os.environ['DET_CHIEF_IP'], 'TF_CONFIG' in os.environ)"
    result = launch("tensorflow", PY, "-c", script, env=clean_env())
    assert result.returncode == 0 and result.stdout == "127.0.0.1 False\n"


def test_tensorflow_launcher_multi_node_sets_tf_config(tmp_path: pathlib.Path) -> None:
    info = tmp_path / "cluster.json"
    write_cluster_info(info, slots=1, addrs=["127.0.0.1", "127.0.0.2"])
    script = "import os; print(os.environ['TF_CONFIG']); print(os.environ['DET_USE_TF_CONFIG'])"
    result = launch(
        "tensorflow", "--port", "4567", "--", PY, "-c", script,
        env={**clean_env(), "DET_CLUSTER_INFO": str(info)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.startswith("[rank=0] ") and second == "[rank=0] 1"
    assert json.loads(first[len("[rank=0] ") :]) == {
        "cluster": {"worker": ["127.0.0.1:4567", "127.0.0.2:4567"]},
        "task": {"type": "worker", "index": 0},
    }


def test_tensorflow_local_workers_hold_the_collective_port_reserved() -> None:
    env: dict[str, str] = {}
    workers = tf_launcher.create_local_workers(2, ["x"], env)
    port = env["DET_COLLECTIVE_PORT"]
    assert env["DET_COLLECTIVE_PORT_RESERVED"] == port
    cluster = json.loads(workers[0][1]["TF_CONFIG"])["cluster"]["worker"]
    assert f"127.0.0.1:{port}" not in cluster and len(set(cluster)) == 2
    assert all(worker_env["DET_COLLECTIVE_PORT"] == port for _, worker_env in workers)


def test_tensorflow_launcher_parse_args() -> None:
    assert tf_launcher.parse_args(["--port=1", "a"]) == (1, ["a"])
    assert tf_launcher.parse_args(["a", "--port", "1"]) == (29400, ["a", "--port", "1"])
    with pytest.raises(ValueError, match="--port"):
        tf_launcher.parse_args(["--port", "x", "a"])


@pytest.mark.slow
def test_torch_distributed_sigterm_ends_the_whole_tree(tmp_path: pathlib.Path) -> None:
    train = tmp_path / "train.py"
    train.write_text("import os, signal\nprint('pid', os.getpid(), flush=True)\nsignal.pause()\n")
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "determined.launch.torch_distributed",
            "--nproc_per_node",
            "2",
            "--",
            PY,
            str(train),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**clean_env(), "OMP_NUM_THREADS": "1"},
    )
    assert proc.stdout is not None
    pids = []
    while len(pids) < 2:
        line = proc.stdout.readline()
        assert line, "the launcher ended before both ranks started"
        if " pid " in line:
            pids.append(int(line.split()[-1]))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    deadline = time.monotonic() + 30
    alive = list(pids)
    while alive and time.monotonic() < deadline:  # the ranks end too (and get reaped)
        alive = [pid for pid in alive if _exists(pid)]
        time.sleep(0.05)
    assert not alive


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
