"""Upstream's legacy launcher command lines: ``torch_distributed --trial MODULE:Class`` runs the
class on every rank through det's trial runner, and ``determined.launch.horovod`` says clearly
that det does not run Horovod (and what to use instead)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from determined import ClusterInfo
from determined.launch import _util, horovod, torch_distributed

PY = sys.executable

ECHO_TRIAL = textwrap.dedent(
    """
    import os

    from determined.core import hookimpl, plugins


    class EchoTrial:
        pass


    class _Runner:
        launcher = "determined.launch.torch_distributed"

        def run(self, trial_class, cluster_info):
            print(
                f"ran {trial_class.__name__} rank={os.environ.get('RANK')} "
                f"world={os.environ.get('WORLD_SIZE')} "
                f"under={os.environ.get('DET_TRIAL_UNDER_LAUNCHER')}",
                flush=True,
            )


    class _Plugin:
        @hookimpl
        def det_trial_runner(self, trial_class):
            return _Runner() if trial_class.__name__ == "EchoTrial" else None


    plugins.register(_Plugin(), name="echo-trial-runner")
    """
)


def clean_env() -> dict[str, str]:
    drop = ("DET_CLUSTER_INFO", "RANK", "WORLD_SIZE", "LOCAL_RANK", "DET_TRIAL_UNDER_LAUNCHER")
    return {k: v for k, v in os.environ.items() if k not in drop} | {"OMP_NUM_THREADS": "1"}


def run_module(module: str, *args: str, cwd: pathlib.Path | None = None, env=None, timeout=120):
    return subprocess.run(
        [PY, "-m", f"determined.launch.{module}", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env if env is not None else clean_env(),
        timeout=timeout,
    )


# -- torch_distributed --trial ---------------------------------------------------------------


def test_torch_distributed_parses_trial_like_upstream() -> None:
    trial = [PY, "-m", "determined.launch.trial", "model_def:MyTrial"]
    assert torch_distributed.parse_args(["--trial", "model_def:MyTrial"]) == ([], trial, True)
    assert torch_distributed.parse_args(["--trial=model_def:MyTrial"]) == ([], trial, True)
    overrides = ["--max_restarts", "1"]
    assert torch_distributed.parse_args([*overrides, "--", "--trial", "model_def:MyTrial"]) == (
        overrides,
        trial,
        True,
    )
    # a script is still a script, even one whose own arguments say --trial
    assert torch_distributed.parse_args(["python3", "train.py", "--trial", "x"]) == (
        [],
        ["python3", "train.py", "--trial", "x"],
        False,
    )
    for bad in (["--trial"], ["--trial", "a:B", "extra"], ["--trial="]):
        with pytest.raises(ValueError):
            torch_distributed.parse_args(bad)


def test_torch_distributed_trial_usage_errors() -> None:
    result = run_module("torch_distributed", "--trial", "model_def:MyTrial", "train.py")
    assert result.returncode == 2
    assert "extra arguments after --trial" in result.stderr and "usage:" in result.stderr
    helped = run_module("torch_distributed", "--help")
    assert helped.returncode == 0 and "--trial MODULE:TrialClass" in helped.stdout


@pytest.mark.slow
def test_torch_distributed_trial_runs_the_class_on_every_rank(tmp_path: pathlib.Path) -> None:
    (tmp_path / "echo_def.py").write_text(ECHO_TRIAL)
    result = run_module(
        "torch_distributed", "--nproc_per_node", "2", "--", "--trial", "echo_def:EchoTrial",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        assert f"[rank={rank}] ran EchoTrial rank={rank} world=2 under=1" in result.stdout


def test_torch_distributed_trial_failure_is_the_exit_status(tmp_path: pathlib.Path) -> None:
    result = run_module("torch_distributed", "--trial", "no_such_module:Trial", cwd=tmp_path)
    assert result.returncode != 0
    assert "module 'no_such_module' not found" in result.stderr


# -- horovod ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--trial", "model_def:MyTrial"],
        ["python3", "train.py"],
        ["--fusion-threshold-mb", "1", "--", "python3", "train.py"],
        ["--", "--trial", "model_def:MyTrial"],
    ],
)
def test_horovod_says_it_is_not_supported(args: list[str]) -> None:
    result = run_module("horovod", *args)
    assert result.returncode == horovod.UNSUPPORTED_EXIT
    assert "Traceback" not in result.stderr
    assert "det does not" in result.stderr and "Horovod" in result.stderr
    assert "determined.launch.torch_distributed" in result.stderr


def test_horovod_parses_upstreams_command_line() -> None:
    parsed = horovod.parse_args(["-np", "2", "--", "--autohorovod", "--trial", "m:T"])
    assert parsed.overrides == ["-np", "2"] and parsed.autohorovod
    assert parsed.script == [PY, "-m", _util.TRIAL_MODULE, "m:T"]
    assert horovod.parse_args(["python3", "t.py", "--x"]).script == ["python3", "t.py", "--x"]
    for bad in ([], ["--autohorovod"], ["--trial", "m:T", "extra"]):
        with pytest.raises(ValueError):
            horovod.parse_args(bad)


def test_horovod_usage_errors_and_help() -> None:
    result = run_module("horovod")
    assert result.returncode == 2 and "empty script" in result.stderr and "usage:" in result.stderr
    helped = run_module("horovod", "-h")
    assert helped.returncode == 0 and "(--trial MODULE:TrialClass | SCRIPT...)" in helped.stdout


def test_autohorovod_on_one_slot_runs_the_script_without_horovod() -> None:
    result = run_module("horovod", "--autohorovod", PY, "-c", "print('ran alone')")
    assert result.returncode == 0 and result.stdout == "ran alone\n"
    failed = run_module("horovod", "--autohorovod", PY, "-c", "import sys; sys.exit(4)")
    assert failed.returncode == 4


def test_autohorovod_on_two_slots_is_not_supported(tmp_path: pathlib.Path) -> None:
    info = tmp_path / "cluster.json"
    ClusterInfo(
        master_url="http://127.0.0.1:1",
        cluster_id="cluster",
        agent_id="agent",
        slot_ids=[0, 1],
        task_id="task",
        allocation_id="alloc",
        session_token="token",
        task_type="COMMAND",
    ).write(info)
    result = run_module(
        "horovod", "--autohorovod", PY, "-c", "print('should not run')",
        env=clean_env() | {"DET_CLUSTER_INFO": str(info)},
    )  # fmt: skip
    assert result.returncode == horovod.UNSUPPORTED_EXIT
    assert "should not run" not in result.stdout and "Horovod" in result.stderr
