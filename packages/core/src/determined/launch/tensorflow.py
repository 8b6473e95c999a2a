"""``python -m determined.launch.tensorflow [--port N] [--] SCRIPT...``

Runs SCRIPT once per container. With several containers it sets ``TF_CONFIG`` (every container as a
worker on ``--port``, default 29400; this one's index is its container rank) and ``DET_USE_TF_CONFIG=1``
so ``core.init()`` builds its DistributedContext from it, and prefixes output with the rank
(``wrap_rank``). ``DET_CHIEF_IP`` is always set. The exit status of SCRIPT is propagated.

One container with several CPU slots (det's local resource manager; no GPU) starts one worker per
slot on this machine, each with its own port in ``TF_CONFIG`` (held reserved by this launcher until
the job ends), so MultiWorkerMirroredStrategy trains on CPU slots too. If one worker fails, the
others are stopped and its status is returned. With GPUs a single process uses them all
(``MirroredStrategy``).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import types
from collections.abc import Sequence

import determined as det
from determined.core._collective import KEY_ENV
from determined.launch import _util

DEFAULT_PORT = 29400
USAGE = "usage: python -m determined.launch.tensorflow [--port N] [--] SCRIPT..."


def parse_args(args: Sequence[str]) -> tuple[int, list[str]]:
    """(port, script)."""
    args = list(args)
    port = DEFAULT_PORT
    if args and args[0].startswith("--port"):
        if args[0] == "--port":
            if len(args) < 2:
                raise ValueError("--port needs a value")
            value, args = args[1], args[2:]
        else:
            value, args = args[0].split("=", 1)[1], args[1:]
        try:
            port = int(value)
        except ValueError:
            raise ValueError(f"--port must be an integer, not {value!r}") from None
    if args and args[0] == "--":
        args = args[1:]
    return port, args


def create_launch_cmd(
    port: int, script: Sequence[str], env: dict[str, str], cluster_info: det.ClusterInfo | None
) -> list[str]:
    """The command to run; also sets the launcher's variables in ``env``."""
    addrs = cluster_info.container_addrs if cluster_info is not None else ["127.0.0.1"]
    rank = cluster_info.container_rank if cluster_info is not None else 0
    env["DET_CHIEF_IP"] = addrs[0]
    if len(addrs) < 2:
        return list(script)
    env["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"worker": [f"{addr}:{port}" for addr in addrs]},
            "task": {"type": "worker", "index": rank},
        }
    )
    env["DET_USE_TF_CONFIG"] = "1"
    return [sys.executable, "-m", "determined.launch.wrap_rank", str(rank), "--", *script]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        port, script = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"{USAGE}\n{exc}", file=sys.stderr)
        return 2
    if not script:
        print(USAGE, file=sys.stderr)
        return 2
    env = dict(os.environ)
    info = det.get_cluster_info()
    workers = local_worker_count(info)
    if workers > 1:
        return run_local_workers(create_local_workers(workers, script, env))
    cmd = create_launch_cmd(port, script, env, info)
    return _util.exit_code(_util.run_forwarding_signals(cmd, env=env).returncode)


def local_worker_count(cluster_info: det.ClusterInfo | None) -> int:
    """How many workers to start here: one per slot of a single container with CPU slots only."""
    if cluster_info is None or len(cluster_info.container_addrs) > 1 or cluster_info.gpu_uuids:
        return 1
    return max(len(cluster_info.slot_ids), 1)


def create_local_workers(
    count: int, script: Sequence[str], env: dict[str, str]
) -> list[tuple[list[str], dict[str, str]]]:
    """``(command, environment)`` of each of ``count`` workers on this machine (their ports, and
    det's collective port, held reserved by this launcher until the job ends)."""
    ports = _util.reserve_server_ports(count)  # each worker's gRPC server binds its own
    env["DET_CHIEF_IP"] = "127.0.0.1"
    env["DET_USE_TF_CONFIG"] = "1"
    _util.reserve_collective_port(env)
    env.setdefault(KEY_ENV, secrets.token_hex(16))  # every worker is our child
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports[:count]]}
    workers = []
    for rank in range(count):
        worker_env = dict(env)
        worker_env["TF_CONFIG"] = json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": rank}}
        )
        cmd = [sys.executable, "-m", "determined.launch.wrap_rank", str(rank), "--", *script]
        workers.append((cmd, worker_env))
    return workers


def run_local_workers(
    workers: Sequence[tuple[list[str], dict[str, str]]], grace_period: float = 10.0
) -> int:
    """Run the workers, forwarding SIGTERM/SIGINT; the first failure stops the others."""
    procs: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, _frame: types.FrameType | None) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in _util.FORWARDED_SIGNALS}
    try:
        for cmd, env in workers:
            procs.append(subprocess.Popen(cmd, env=env))
        failed: int | None = None
        while any(proc.poll() is None for proc in procs):
            codes = [proc.returncode for proc in procs if proc.returncode]
            if codes and failed is None:
                failed = codes[0]
                print(
                    f"determined.launch.tensorflow: a worker exited {_util.exit_code(failed)}: "
                    "stopping the others",
                    file=sys.stderr,
                )
                _stop(procs, grace_period)
            time.sleep(0.05)
        codes = [proc.returncode for proc in procs if proc.returncode]
        return _util.exit_code(failed if failed is not None else (codes[0] if codes else 0))
    finally:
        _stop(procs, grace_period)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stop(procs: Sequence[subprocess.Popen[bytes]], grace_period: float) -> None:
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        proc.terminate()
    deadline = time.monotonic() + grace_period
    for proc in running:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
