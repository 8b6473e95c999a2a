"""How a task beyond trials is prepared for launch: work directory, environment and command line.

The same conventions as a trial's (``_launch``): the context is extracted into
``<data dir>/work/<allocation id>``, a ``startup-hook.sh`` at its root runs first, the master's
interpreter (or ``environment.python``/``venv``) comes first on PATH, and
``environment.environment_variables`` are applied. A proxied task also learns the port it must
listen on and the URL path it is served under.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import socket
from typing import Any

from determined.master._core._context import extract
from determined.master._core._launch import interpreter_bin_dir
from determined.master._core._tls_env import tls_env

PLACEHOLDERS = ("port", "base_path", "task_id", "work_dir")
"""The names an argv item may use as ``{name}``."""


def free_port(host: str) -> int:
    """A TCP port nobody listens on at ``host`` now (the task binds it moments later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as sock:
        bind_host = host if host not in ("localhost",) else "127.0.0.1"
        try:
            sock.bind((bind_host, 0))
        except OSError:
            sock.bind(("", 0))
        return int(sock.getsockname()[1])


def config_env(config: dict[str, Any], slot_type: str) -> dict[str, str]:
    """``environment.environment_variables`` of ``config`` (a list of ``K=V``, or per device)."""
    env_vars = (config.get("environment") or {}).get("environment_variables") or {}
    if isinstance(env_vars, str):
        entries = [env_vars]
    elif isinstance(env_vars, dict):
        entries = list(env_vars.get("cuda" if slot_type == "cuda" else "cpu") or [])
    else:
        entries = list(env_vars)
    out: dict[str, str] = {}
    for entry in entries:
        key, _, value = str(entry).partition("=")
        if key:
            out[key] = value
    return out


def substitute(argv: list[str], values: dict[str, str]) -> list[str]:
    """Replace ``{name}`` placeholders of :data:`PLACEHOLDERS` in each item (nothing else)."""
    out = []
    for item in argv:
        for name in PLACEHOLDERS:
            item = item.replace("{" + name + "}", values.get(name, ""))
        out.append(item)
    return out


def prepare_task(
    *,
    work_dir: pathlib.Path,
    context: bytes | None,
    kind: str,
    task_id: str,
    allocation_id: str,
    argv: list[str],
    config: dict[str, Any],
    extra_env: dict[str, str],
    master_url: str,
    cluster_id: str,
    user: str,
    token: str,
    slot_ids: list[int],
    gpu_uuids: list[str],
    slot_type: str,
    port: int | None,
) -> tuple[list[str], dict[str, str], str | None]:
    """Extract the context and build the environment and the command line.

    Returns:
        ``(argv, env, startup_hook_path_or_None)``.

    Raises:
        ValueError: ``environment.python``/``venv`` name no interpreter, or the context is bad.
    """
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    extract(context, work_dir)
    bin_dir = interpreter_bin_dir(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    base_path = f"/proxy/{task_id}/"
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "DET_MASTER": master_url,
            "DET_CLUSTER_ID": cluster_id,
            "DET_AGENT_ID": "local",
            "DET_SLOT_IDS": json.dumps(slot_ids),
            "DET_TASK_ID": task_id,
            "DET_TASK_TYPE": kind,
            "DET_ALLOCATION_ID": allocation_id,
            "DET_RESOURCES_ID": allocation_id,
            "DET_CONTAINER_ID": allocation_id,
            "DET_SESSION_TOKEN": token,
            "DET_USER": user,
            "DET_USER_TOKEN": token,
            "DET_WORKDIR": str(work_dir),
            **tls_env(master_url),
        }
    )
    if slot_type == "cuda" and slot_ids:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_uuids or [str(s) for s in slot_ids])
    if port is not None:
        env["DET_TASK_PORT"] = str(port)
        env["DET_TASK_BASE_PATH"] = base_path
    env.update(config_env(config, slot_type))
    env.update({str(k): str(v) for k, v in extra_env.items()})
    values = {
        "port": str(port or ""),
        "base_path": base_path,
        "task_id": task_id,
        "work_dir": str(work_dir),
    }
    hook = work_dir / "startup-hook.sh"
    return substitute(argv, values), env, (str(hook) if hook.is_file() else None)
