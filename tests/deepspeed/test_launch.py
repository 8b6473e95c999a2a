"""``python -m determined.launch.deepspeed``: its command line, DistributedContext.from_deepspeed(),
and two ranks on CPU training ZeRO 0/2/3, stopping and resuming exactly."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

import pytest

import determined as det
from determined.core import DistributedContext
from determined.launch import deepspeed as launch_ds

HERE = pathlib.Path(__file__).resolve().parent


def _cluster_info(addrs: list[str], rank: int, counts: list[int]) -> det.ClusterInfo:
    return det.ClusterInfo(
        master_url="http://127.0.0.1:8080",
        cluster_id="c",
        agent_id="a",
        slot_ids=list(range(counts[rank])),
        task_id="t",
        allocation_id="alloc",
        session_token="s",
        task_type="TRIAL",
        rendezvous_info=det.RendezvousInfo(addrs, rank, counts),
    )


def test_parse_args() -> None:
    assert launch_ds.parse_args(["python3", "train.py", "--x", "--", "y"]) == (
        [],
        ["python3", "train.py", "--x", "--", "y"],
    )
    assert launch_ds.parse_args(["--num_gpus", "2", "--", "python3", "t.py"]) == (
        ["--num_gpus", "2"],
        ["python3", "t.py"],
    )
    assert launch_ds.parse_args(["--", "python3", "t.py"]) == ([], ["python3", "t.py"])
    assert launch_ds.parse_args(["--trial", "model_def:MyTrial"]) == (
        [],
        [sys.executable, "-m", "determined.launch.trial", "model_def:MyTrial"],
    )
    assert launch_ds.parse_args(["--trial=m:T"])[1][-1] == "m:T"
    for bad, message in (
        (["--trial"], "--trial needs"),
        (["--trial", "m:T", "extra"], "extra arguments"),
        (["--num_gpus", "2", "python3"], "must be followed by --"),
    ):
        with pytest.raises(ValueError, match=message):
            launch_ds.parse_args(bad)
    assert launch_ds.main(["--trial"]) == 2
    assert launch_ds.main([]) == 2


def test_single_container_command(tmp_path: pathlib.Path) -> None:
    env: dict[str, str] = {}
    info = _cluster_info(["10.0.0.5"], 0, [3])
    cmd = launch_ds.create_launch_cmd([], ["python3", "train.py"], env, info, str(tmp_path))
    assert cmd[:3] == [sys.executable, "-m", "deepspeed.launcher.runner"]
    assert cmd[cmd.index("--num_gpus") + 1] == "3"
    assert cmd[cmd.index("--master_addr") + 1] == "127.0.0.1"
    assert "--no_python" in cmd and "--no_local_rank" in cmd and "--hostfile" not in cmd
    tail = cmd[cmd.index("--") + 1 :]
    assert tail == [sys.executable, "-m", "determined.launch.wrap_rank", "RANK", "--",
                    "python3", "train.py"]  # fmt: skip
    assert env["USE_DEEPSPEED"] == "1" and env["DET_CHIEF_IP"] == "10.0.0.5"
    assert env["DET_COLLECTIVE_PORT"] != cmd[cmd.index("--master_port") + 1]
    assert env["DET_COLLECTIVE_PORT_RESERVED"] == env["DET_COLLECTIVE_PORT"]
    assert len(env["DET_COLLECTIVE_KEY"]) == 32
    # GPUs named by CUDA_VISIBLE_DEVICES, or explicit overrides: DeepSpeed picks the processes
    gpu_env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    gpu_cmd = launch_ds.create_launch_cmd([], ["t"], gpu_env, info, str(tmp_path))
    assert "--num_gpus" not in gpu_cmd
    override = launch_ds.create_launch_cmd(["--include", "localhost:1"], ["t"], {}, info, "")
    assert "--num_gpus" not in override and override.index("--include") > override.index(
        "--no_local_rank"
    )
    # off-cluster: one process unless the overrides say otherwise
    local = launch_ds.create_launch_cmd([], ["t"], {}, None, str(tmp_path))
    assert local[local.index("--num_gpus") + 1] == "1"


def test_several_containers_use_a_hostfile_and_no_ssh(tmp_path: pathlib.Path) -> None:
    env = {"DET_DEEPSPEED_MASTER_PORT": "31000"}
    info = _cluster_info(["10.0.0.1", "10.0.0.2"], 1, [2, 4])
    cmd = launch_ds.create_launch_cmd([], ["python3", "t.py"], env, info, str(tmp_path))
    hostfile = cmd[cmd.index("--hostfile") + 1]
    assert pathlib.Path(hostfile).read_text() == "10.0.0.1 slots=2\n10.0.0.2 slots=4\n"
    assert env["DET_DEEPSPEED_HOSTFILE_PATH"] == hostfile
    assert "--no_ssh" in cmd and cmd[cmd.index("--node_rank") + 1] == "1"
    assert cmd[cmd.index("--master_addr") + 1] == "10.0.0.1"
    assert cmd[cmd.index("--master_port") + 1] == "31000"
    assert env["DET_CHIEF_IP"] == "10.0.0.1" and "DET_COLLECTIVE_KEY" not in env
    with pytest.raises(ValueError, match="2 container addresses but 1 slot counts"):
        launch_ds.write_hostfile(str(tmp_path / "h"), ["a", "b"], [1])


def test_from_deepspeed_reads_the_launcher_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    deepspeed_vars = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_SIZE": "1",
                      "CROSS_RANK": "0", "CROSS_SIZE": "1"}  # fmt: skip
    for name in ("LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in deepspeed_vars.items():
        monkeypatch.setenv(name, value)
    context = DistributedContext.from_deepspeed()
    assert (context.rank, context.size, context.local_size, context.cross_size) == (0, 1, 1, 1)
    monkeypatch.delenv("CROSS_SIZE")
    with pytest.raises(ValueError, match="CROSS_SIZE or GROUP_WORLD_SIZE is not set"):
        DistributedContext.from_deepspeed()
    monkeypatch.setenv("GROUP_WORLD_SIZE", "1")  # torchrun's name is accepted too
    assert DistributedContext.from_deepspeed().cross_size == 1


def test_launcher_imports_no_deepspeed() -> None:
    code = "import sys, determined.launch.deepspeed; print('deepspeed' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["0", "2", "3"])
def test_two_ranks_stop_and_resume_exactly(two_rank_runs: list[dict[str, Any]], stage: str) -> None:
    rank0, rank1 = two_rank_runs
    assert rank0["env"] == {"USE_DEEPSPEED": "1", "LOCAL_SIZE": "2"}
    for rank in (rank0, rank1):
        run = rank[stage]
        straight, stopped, resumed = run["straight"], run["stopped"], run["resumed"]
        assert straight["size"] == 2 and straight["gas"] == 2 and straight["global_batch_size"] == 8
        # every rank holds the same weights, and the resumed run ends where the straight one did
        assert straight["weights"] == rank0[stage]["straight"]["weights"]
        assert resumed["weights"] == straight["weights"]
        # rank 1 asked to stop after batch 5; both stopped at the next boundary (6)
        assert [s[1] for s in stopped["steps"]] == list(range(6))
        assert resumed["steps"] == [[b // 5, b] for b in range(6, 12)]
        assert stopped["validations"] + resumed["validations"] == straight["validations"]
    # the chief reported every workload (per-batch means over both ranks) exactly once
    straight = rank0[stage]["straight"]
    assert [w["batches"] for w in straight["workloads"]] == [2, 4, 6, 8, 10, 12]
    resumed_reports = rank0[stage]["stopped"]["workloads"] + rank0[stage]["resumed"]["workloads"]
    assert resumed_reports == straight["workloads"]
    # validation over 10 records, 4 + 4 then 1 + 1 per global batch, averaged per sample
    assert straight["validations"][0]["n"] == pytest.approx(3.4)
