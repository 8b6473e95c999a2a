"""How a trial process is prepared: its work directory, ClusterInfo file and environment."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import shutil
import sys
from typing import Any

from determined import ClusterInfo, RendezvousInfo, ResourcesInfo, TrialInfo
from determined.master._core._context import extract
from determined.master._core._tls_env import tls_env


def entrypoint_argv(entrypoint: str | list[str]) -> list[str]:
    """The argv of an entrypoint: a command string (split like a shell), a list, or a legacy
    ``module:TrialClass`` that runs through ``python3 -m determined.launch.trial``."""
    if isinstance(entrypoint, list):
        argv = [str(a) for a in entrypoint]
    else:
        argv = shlex.split(str(entrypoint))
    if len(argv) == 1 and ":" in argv[0] and "/" not in argv[0] and not argv[0].endswith(".py"):
        return ["python3", "-m", "determined.launch.trial", argv[0]]
    if not argv:
        raise ValueError("entrypoint: must not be empty")
    return argv


def _config_env_vars(config: dict[str, Any], slot_type: str) -> dict[str, str]:
    env_vars = (config.get("environment") or {}).get("environment_variables") or {}
    if isinstance(env_vars, dict):
        entries = list(env_vars.get("cpu" if slot_type != "cuda" else "cuda") or [])
    else:
        entries = list(env_vars)
    out: dict[str, str] = {}
    for entry in entries:
        key, _, value = str(entry).partition("=")
        if key:
            out[key] = value
    return out


def interpreter_bin_dir(config: dict[str, Any]) -> str:
    """The bin directory to put first on PATH: ``environment.venv``'s, ``environment.python``'s,
    else the master's own interpreter's."""
    env = config.get("environment") or {}
    venv = env.get("venv")
    python = env.get("python")
    if venv:
        venv_bin = pathlib.Path(venv) / "bin"
        if not venv_bin.is_dir():
            raise ValueError(f"environment.venv: {venv!r} has no bin/ directory")
        return str(venv_bin)
    if python:
        found = shutil.which(python) if os.sep not in python else python
        if not found or not os.path.exists(found):
            raise ValueError(f"environment.python: interpreter {python!r} not found")
        return str(pathlib.Path(found).parent)
    return str(pathlib.Path(sys.executable).parent)


def prepare_trial(
    *,
    work_dir: pathlib.Path,
    info_dir: pathlib.Path,
    model_definition: bytes | None,
    master_url: str,
    cluster_id: str,
    task_id: str,
    allocation_id: str,
    token: str,
    experiment_id: int,
    trial_id: int,
    trial_seed: int,
    hparams: dict[str, Any],
    config: dict[str, Any],
    config_json: str,
    run_id: int,
    steps_completed: int,
    latest_checkpoint: str | None,
    slot_ids: list[int],
    container_addrs: list[str],
    container_slot_counts: list[int],
    gpu_uuids: list[str],
    slot_type: str,
    collective_key: str,
    user: str,
    user_token: str,
) -> tuple[dict[str, str], str | None]:
    """Extract the context into ``work_dir``, write the ClusterInfo file into ``info_dir``, build
    the environment (``config_json``: ``config`` encoded, shared by the trials of an experiment).

    Returns:
        ``(env, startup_hook_path_or_None)``.
    """
    _fresh_dir(work_dir)
    if model_definition:
        extract(model_definition, work_dir)
    info_dir.mkdir(exist_ok=True)
    info = ClusterInfo(
        master_url=master_url,
        cluster_id=cluster_id,
        agent_id="local",
        slot_ids=slot_ids,
        task_id=task_id,
        allocation_id=allocation_id,
        session_token=token,
        task_type="TRIAL",
        latest_checkpoint=latest_checkpoint,
        trial_info=TrialInfo(
            trial_id=trial_id,
            experiment_id=experiment_id,
            trial_seed=trial_seed,
            hparams=hparams,
            config=config,
            steps_completed=steps_completed,
            trial_run_id=run_id,
            debug=bool(config.get("debug")),
            inter_node_network_interface=None,
        ),
        rendezvous_info=RendezvousInfo(container_addrs, 0, container_slot_counts),
        resources_info=ResourcesInfo(gpu_uuids),
    )
    info_path = info_dir / "cluster.json"
    info.write(info_path, config_json=config_json)
    bin_dir = interpreter_bin_dir(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "DET_CLUSTER_INFO": str(info_path),
            "DET_MASTER": master_url,
            "DET_CLUSTER_ID": cluster_id,
            "DET_AGENT_ID": "local",
            "DET_SLOT_IDS": json.dumps(slot_ids),
            "DET_TASK_ID": task_id,
            "DET_ALLOCATION_ID": allocation_id,
            "DET_RESOURCES_ID": allocation_id,
            "DET_CONTAINER_ID": allocation_id,
            "DET_SESSION_TOKEN": token,
            "DET_USER": user,
            "DET_USER_TOKEN": user_token,
            "DET_TASK_TYPE": "TRIAL",
            "DET_WORKDIR": str(work_dir),
            "DET_RUN_DIR": str(info_dir),
            **tls_env(master_url),
            "DET_EXPERIMENT_ID": str(experiment_id),
            "DET_TRIAL_ID": str(trial_id),
            "DET_TRIAL_RUN_ID": str(run_id),
            "DET_TRIAL_SEED": str(trial_seed),
            "DET_EXPERIMENT_CONFIG": config_json,
            "DET_HPARAMS": json.dumps(hparams),
            "DET_STEPS_COMPLETED": str(steps_completed),
            "DET_COLLECTIVE_KEY": collective_key,
        }
    )
    if latest_checkpoint:
        env["DET_LATEST_CHECKPOINT"] = latest_checkpoint
    env.update(_config_env_vars(config, slot_type))
    hook = work_dir / "startup-hook.sh"  # only a context can hold one
    return env, (str(hook) if model_definition and hook.is_file() else None)


def _fresh_dir(path: pathlib.Path) -> None:
    """Make ``path`` an empty directory (what an earlier launch left there is removed): one
    ``mkdir`` when, as for nearly every launch, there is nothing there yet."""
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        shutil.rmtree(path)
        path.mkdir()
