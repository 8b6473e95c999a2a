"""Running a test script in another interpreter (a Keras backend, the legacy venv, a fresh venv)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
LEGACY_PYTHON = ROOT / ".venv-legacy" / "bin" / "python"


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without det's trial variables, quiet TensorFlow, autoload of plugins on."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DET_", "KERAS_", "TF_CONFIG", "PYTHON", "VIRTUAL_ENV"))
    }
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def run_script(
    script: str | pathlib.Path,
    *args: str,
    python: str | pathlib.Path = sys.executable,
    env: dict[str, str] | None = None,
    cwd: pathlib.Path | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """Run ``python script args...``; AssertionError with its output when it fails."""
    result = subprocess.run(
        [str(python), str(script), *args],
        capture_output=True,
        text=True,
        env=env if env is not None else clean_env(),
        cwd=cwd,
        timeout=timeout,
    )
    assert result.returncode == 0, (
        f"{script} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
        f"\n--- stderr\n{result.stderr[-8000:]}"
    )
    return result


def launch_two_cpu_workers(
    python: str | pathlib.Path, script: pathlib.Path, workdir: pathlib.Path, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """``python -m determined.launch.tensorflow -- python script workdir/ckpt`` for a task with two
    CPU slots in one container (a ClusterInfo like det's local resource manager writes)."""
    from determined import ClusterInfo, RendezvousInfo

    info = ClusterInfo(
        master_url="http://127.0.0.1:1",
        cluster_id="test",
        agent_id="local",
        slot_ids=[0, 1],
        task_id="task",
        allocation_id="alloc",
        session_token="",
        task_type="COMMAND",
        rendezvous_info=RendezvousInfo(["127.0.0.1"], 0, [2]),
    )
    info_path = workdir / "cluster.json"
    info.write(str(info_path))
    env = clean_env(DET_CLUSTER_INFO=str(info_path))
    result = subprocess.run(
        [str(python), "-m", "determined.launch.tensorflow", "--", str(python), str(script),
         str(workdir / "ckpt")],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-8000:]}"
    return result
