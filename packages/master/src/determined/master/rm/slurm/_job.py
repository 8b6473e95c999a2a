"""What runs inside a det Slurm job: the batch step's helper and each node's rank launcher.

This module uses the standard library only: the master copies its source into every job's
directory (``det_slurm_job.py``) and the job runs it with the master's interpreter path, so a
compute node needs the Python environment of the trials but never needs det-master itself.

The job directory (on the shared filesystem, ``job_storage_root/<allocation id>``) is how the
master and the job talk:

- ``batch`` mode (the batch script ``exec``s it on the first node of the allocation) writes
  ``nodes.json`` — the allocation's hosts, their addresses and slots — which the master reads as
  the allocation's assignment; it then waits for the master's ``launch.json`` (the argv,
  environment and ClusterInfo of the trial), starts one ``node`` task per node with ``srun``,
  and at the end writes ``exit.json``: the first failing rank's exit code (negative for a
  signal) and the sizes of the two output files, so the master knows when it has read them all.
- ``node`` mode (one ``srun`` task per node) writes that node's ClusterInfo
  (``container_rank`` = ``SLURM_NODEID``, its slot ids), sets the ``DET_*`` variables the local
  resource manager sets, runs the startup hook and the entrypoint in ``work/``, and records the
  entrypoint's exit code in ``exit/<rank>``.

A node task lets Slurm's signals reach the entrypoint (both are in one process group, which
every Slurm process tracker signals) and only waits; ``scancel --signal=TERM`` is thus the
trial's preemption signal, as SIGTERM is under the local resource manager.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from typing import Any

NODES_FILE = "nodes.json"
LAUNCH_FILE = "launch.json"
EXIT_FILE = "exit.json"
PORTS_FILE = "ports.json"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"
WORK_DIR = "work"

LAUNCH_WAIT_S = 600.0
"""How long a started job waits for the master's launch file before it gives up."""
PORTS_WAIT_S = 120.0
FILE_POLL_S = 0.05
C10D_PORT_ENV = "DET_C10D_PORT"
COLLECTIVE_PORT_ENV = "DET_COLLECTIVE_PORT"
RESERVED_PORT_ENV = "DET_COLLECTIVE_PORT_RESERVED"
_DROPPED_ENV = ("OMP_NUM_THREADS",)


def expand_counts(spec: str) -> list[int]:
    """``SLURM_TASKS_PER_NODE`` (``"2(x3),1"``) as one count per node (``[2, 2, 2, 1]``)."""
    counts: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if match is None:
            raise ValueError(f"cannot read a task count from {spec!r}")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def write_json(path: str, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` atomically (a reader sees all of it or nothing)."""
    partial = f"{path}.{os.getpid()}.part"
    with open(partial, "w") as f:
        json.dump(value, f)
    os.replace(partial, path)


def read_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)


def wait_for_file(path: str, timeout: float) -> bool:
    """Whether ``path`` appeared within ``timeout`` seconds (polled: it lives on a shared fs)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(FILE_POLL_S)
    return True


def _hostnames(nodelist: str) -> list[str]:
    out = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def _addresses(nodelist: str, hosts: list[str]) -> list[str]:
    """An IP address for each Slurm node: its NodeAddr (one ``scontrol`` call for all), else
    what the resolver says, else the name itself."""
    node_addrs: dict[str, str] = {}
    try:
        out = subprocess.run(
            ["scontrol", "show", "node", "-o", nodelist], capture_output=True, text=True, timeout=60
        ).stdout
        for line in out.splitlines():
            name = re.search(r"\bNodeName=(\S+)", line)
            addr = re.search(r"\bNodeAddr=(\S+)", line)
            if name and addr:
                node_addrs[name.group(1)] = addr.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    addresses = []
    for host in hosts:
        try:
            addresses.append(socket.gethostbyname(node_addrs.get(host, host)))
        except OSError:
            addresses.append(node_addrs.get(host, host))
    return addresses


def _gpu_ids(env: dict[str, str] | os._Environ[str]) -> list[int]:
    raw = env.get("CUDA_VISIBLE_DEVICES") or env.get("SLURM_STEP_GPUS") or ""
    return [int(x) for x in raw.split(",") if x.strip().isdigit()]


def describe_nodes(env: dict[str, str] | os._Environ[str], cuda: bool) -> dict[str, Any]:
    """The allocation as the batch step sees it: hosts, addresses, slots per node."""
    nodelist = env["SLURM_JOB_NODELIST"]
    hosts = _hostnames(nodelist)
    counts = expand_counts(env.get("SLURM_TASKS_PER_NODE", "1"))
    if len(counts) != len(hosts):
        counts = (counts + [counts[-1] if counts else 1] * len(hosts))[: len(hosts)]
    first = _gpu_ids(env) if cuda else list(range(counts[0]))
    return {
        "job_id": env.get("SLURM_JOB_ID", ""),
        "hosts": hosts,
        "addrs": _addresses(nodelist, hosts),
        "slots": counts,
        "slot_ids": first,
    }


_HELD: list[socket.socket] = []
"""The sockets holding the chief node's rendezvous ports while its ranks run."""


def hold_rendezvous_ports() -> dict[str, str]:
    """The chief node's c10d and collective ports, held bound (never listening) until this process
    exits, and the variables naming them: what ``determined.core.plugins.hold_rendezvous_ports``
    does, written again here because this module runs with the standard library only. torchrun's
    c10d store binds beside an ``SO_REUSEADDR`` hold; det's hub, told by
    ``DET_COLLECTIVE_PORT_RESERVED``, beside an ``SO_REUSEPORT`` one; nothing else on the node is
    given either port meanwhile."""
    env = {}
    reuse_port = getattr(socket, "SO_REUSEPORT", None)
    for name, option in ((C10D_PORT_ENV, socket.SO_REUSEADDR), (COLLECTIVE_PORT_ENV, reuse_port)):
        sock = socket.socket()
        if option is not None:
            sock.setsockopt(socket.SOL_SOCKET, option, 1)
        sock.bind(("", 0))
        env[name] = str(sock.getsockname()[1])
        if option is None:
            sock.close()  # no way to share it: a port that was free a moment ago
        else:
            _HELD.append(sock)
    if reuse_port is not None:
        env[RESERVED_PORT_ENV] = env[COLLECTIVE_PORT_ENV]
    return env


def run_batch(job_dir: str) -> int:
    """The batch step: describe the nodes, wait for the launch, run one node task per node."""
    launch_path = os.path.join(job_dir, LAUNCH_FILE)
    cuda = os.environ.get("DET_SLURM_CUDA") == "1"
    nodes = describe_nodes(os.environ, cuda)
    write_json(os.path.join(job_dir, NODES_FILE), nodes)
    if not wait_for_file(launch_path, LAUNCH_WAIT_S):
        print("det: the master did not launch this job in time; giving up", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(job_dir, "exit"), exist_ok=True)
    count = len(nodes["hosts"])
    srun = [
        "srun",
        f"--ntasks={count}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--whole",
        sys.executable,
        os.path.abspath(__file__),
        "node",
        job_dir,
    ]
    env = dict(os.environ, DET_SLURM_HOSTS=",".join(nodes["hosts"]))
    code = subprocess.call(srun, env=env)
    codes = []
    for rank in range(count):
        try:
            with open(os.path.join(job_dir, "exit", str(rank))) as f:
                codes.append(int(f.read().strip()))
        except (OSError, ValueError):
            codes.append(code if code != 0 else 1)
    failed = [c for c in codes if c != 0]
    result = failed[0] if failed else 0
    sys.stdout.flush()
    sys.stderr.flush()
    sizes = {}
    for name in (STDOUT_FILE, STDERR_FILE):
        try:
            sizes[name] = os.path.getsize(os.path.join(job_dir, name))
        except OSError:
            sizes[name] = 0
    write_json(os.path.join(job_dir, EXIT_FILE), {"exit_code": result, "sizes": sizes})
    return 0 if result == 0 else 1


def node_environment(task_env: dict[str, str], path_prefix: str) -> dict[str, str]:
    """This node's environment less stale ``DET_*``, the task's variables over it, PATH prefixed."""
    base = dict(os.environ)
    env = {k: v for k, v in base.items() if not k.startswith("DET_") and k not in _DROPPED_ENV}
    env.update(task_env)
    if path_prefix:
        env["PATH"] = path_prefix + os.pathsep + base.get("PATH", "")
    return env


def _ports(job_dir: str, rank: int, multi_node: bool) -> dict[str, str]:
    if not multi_node:
        return {}
    path = os.path.join(job_dir, PORTS_FILE)
    if rank == 0:
        write_json(path, hold_rendezvous_ports())
    elif not wait_for_file(path, PORTS_WAIT_S):
        raise RuntimeError("the chief node did not publish its rendezvous ports")
    return dict(read_json(path))


def run_node(job_dir: str) -> int:
    """One node's share: its ClusterInfo and environment, then the entrypoint; its exit code."""
    rank = int(os.environ.get("SLURM_NODEID", "0"))
    launch = read_json(os.path.join(job_dir, LAUNCH_FILE))
    nodes = read_json(os.path.join(job_dir, NODES_FILE))
    cuda = bool(launch.get("cuda"))
    slots = int(nodes["slots"][rank])
    if int(launch.get("slots", 1)) == 0:
        slot_ids: list[int] = []  # a task that takes no slot (it still runs on one CPU)
    else:
        slot_ids = _gpu_ids(os.environ) if cuda else list(range(slots))
    host = socket.gethostname()
    info = dict(launch["cluster_info"])
    info["slot_ids"] = slot_ids
    info["agent_id"] = host
    info["rendezvous_info"] = {
        "container_addrs": list(nodes["addrs"]),
        "container_rank": rank,
        "container_slot_counts": [int(c) for c in nodes["slots"]],
    }
    run_dir = os.path.join(job_dir, "info", str(rank))
    os.makedirs(run_dir, exist_ok=True)
    info_path = os.path.join(run_dir, "cluster.json")
    write_json(info_path, info)
    work = os.path.join(job_dir, WORK_DIR)
    env = node_environment(dict(launch["env"]), str(launch.get("path_prefix") or ""))
    env.update(_ports(job_dir, rank, len(nodes["hosts"]) > 1))
    env.update(
        {
            "DET_CLUSTER_INFO": info_path,
            "DET_WORKDIR": work,
            "DET_RUN_DIR": run_dir,
            "DET_AGENT_ID": host,
            "DET_SLOT_IDS": json.dumps(slot_ids),
            "DET_CONTAINER_ID": f"{info.get('allocation_id', '')}.{rank}",
        }
    )
    argv = [str(a) for a in launch["argv"]]
    hook = launch.get("startup_hook")
    if hook:
        hook = hook if "/" in hook else f"./{hook}"
        argv = ["bash", "-c", f". {shlex.quote(hook)} && exec {shlex.join(argv)}"]
    # Slurm signals the whole process group: the entrypoint gets it; this process only waits.
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, lambda *_: None)
    try:
        code = subprocess.call(argv, cwd=work, env=env, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"det: could not start {argv[0]!r} in {work!r}: {exc}", file=sys.stderr)
        code = 127
    write_json_text(os.path.join(job_dir, "exit", str(rank)), str(code))
    return 0 if code == 0 else 1


def write_json_text(path: str, text: str) -> None:
    partial = f"{path}.part"
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, path)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("batch", "node"):
        print("usage: det_slurm_job.py batch|node JOB_DIR", file=sys.stderr)
        return 2
    mode, job_dir = argv
    return run_batch(job_dir) if mode == "batch" else run_node(job_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
