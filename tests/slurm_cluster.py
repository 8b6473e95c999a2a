"""A real single-host Slurm cluster for tests: munged, slurmctld and slurmd in a temporary directory.

``start_cluster()`` writes a munge key and a ``slurm.conf`` into a fresh directory under /tmp, starts
the three daemons in the foreground as children of the test process (each on its own free ports, with
its own node and cluster name, so several clusters — one per pytest-xdist worker — run side by side),
and returns once the node is idle. ``SlurmCluster.stop()`` cancels every job, stops the daemons and
removes the directory; a small watchdog process does the same if the test process dies first.

The node reports ``cpus`` CPUs (4 by default, whatever the machine has: ``SlurmdParameters=
config_overrides``), shared by CPU between jobs (``select/cons_tres`` with ``CR_CPU``), so a test can
fill a partition with two 2-CPU jobs and see a third stay PENDING. Two partitions over that node,
``debug`` (the default) and ``other``, stand for two resource pools. No cgroups, no accounting.

Slurm commands find the cluster through ``SLURM_CONF`` (``SlurmCluster.env``); munge's socket is named
in the config (``AuthInfo=socket=...``), so nothing under /etc or /run is touched. Jobs inherit
``SLURM_CONF`` from the submitting environment (sbatch's default ``--export=ALL``).

The packages are Debian's ``slurmctld slurmd slurm-client munge`` (the Makefile installs them);
``missing_reason()`` says why a cluster cannot start where they are absent.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo", "srun", "scontrol")
PARTITIONS = ("debug", "other")
# Job states after which a job never runs again (squeue's long names).
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)


# The watchdog (one small process per cluster): when the test process that owns the cluster is gone
# without stopping it (killed, interrupted xdist worker), cancel the jobs, stop the daemons and
# remove the directory, so no Slurm is left running. Argv: owner pid, root, slurm user, daemon pids.
WATCHDOG = """
import os, shutil, signal, subprocess, sys, time
owner, root, user, pids = int(sys.argv[1]), sys.argv[2], sys.argv[3], [int(p) for p in sys.argv[4:]]
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        break
    time.sleep(1)
def slurm(*args):
    # A controller that no longer answers must not keep the daemons from being stopped below.
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
slurm("scancel", "--user", user)
deadline = time.monotonic() + 15
while time.monotonic() < deadline and slurm("squeue", "-h").strip():
    time.sleep(0.5)
def ours(pid):
    # A daemon that died long ago leaves a pid the system may have given to a stranger: only a
    # process whose command line names this cluster's directory is still one of ours.
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return root.encode() in f.read()
    except OSError:
        return False
for sig in (signal.SIGTERM, signal.SIGKILL):
    for pid in pids:
        if ours(pid):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(map(ours, pids)):
        time.sleep(0.1)
shutil.rmtree(root, ignore_errors=True)
"""


class SlurmClusterError(RuntimeError):
    """The cluster did not start or a Slurm command failed; the message carries the daemons' logs."""


def _which(name: str) -> str | None:
    """``name`` on PATH or in the sbin directories (not on a non-root PATH)."""
    found = shutil.which(name)
    if found:
        return found
    for directory in SBIN:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def missing_reason() -> str | None:
    """Why no cluster can start here (the Slurm/munge binaries are absent), or None."""
    missing = [name for name in DAEMONS + CLIENTS if _which(name) is None]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): install Debian's packages "
            "`apt-get install slurmctld slurmd slurm-client munge` (`make install` does)"
        )
    return None


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SlurmCluster:
    """A running single-node Slurm cluster; see the module docstring.

    ``env`` holds only the variables Slurm commands need (``SLURM_CONF``): merge it into a process's
    environment (``environ()`` does) or ``monkeypatch.setenv`` it for an in-process det-master.
    ``shared_dir`` stands for the cluster's shared filesystem (context staging, checkpoints).
    """

    root: Path
    name: str
    node: str
    cpus: int
    partitions: tuple[str, ...]
    default_partition: str
    ctld_port: int
    slurmd_port: int
    env: dict[str, str]
    shared_dir: Path
    extra_nodes: tuple[tuple[str, int], ...] = ()
    """More slurmd daemons on this host (``start_cluster(nodes=N)``): (node name, slurmd port)."""
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node's name, ``node`` first."""
        return (self.node, *(name for name, _ in self.extra_nodes))

    @property
    def conf(self) -> Path:
        """The cluster's slurm.conf."""
        return self.root / "slurm.conf"

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment with the cluster's variables (and ``extra``) added."""
        return {**os.environ, **self.env, **(extra or {})}

    def run(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run one Slurm command (``run("squeue", "-h")``) against this cluster."""
        command = [_which(args[0]) or args[0], *args[1:]]
        result = subprocess.run(
            command, env=self.environ(), capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise SlurmClusterError(
                f"{' '.join(args)} exited {result.returncode}: {result.stderr.strip()}"
            )
        return result

    def sbatch(
        self, script: str, *options: str, cpus: int = 1, partition: str | None = None
    ) -> str:
        """Submit ``script`` (a shell script body) as a batch job running in ``shared_dir``; its
        job id. Output goes to ``shared_dir/slurm-<id>.out``."""
        args = [
            "sbatch",
            "--parsable",
            f"--cpus-per-task={cpus}",
            f"--chdir={self.shared_dir}",
            f"--output={self.shared_dir}/slurm-%j.out",
        ]
        if partition:
            args.append(f"--partition={partition}")
        args.extend(options)
        command = [_which("sbatch") or "sbatch", *args[1:]]
        result = subprocess.run(
            command,
            input="#!/bin/sh\n" + script + "\n",
            env=self.environ(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise SlurmClusterError(f"sbatch exited {result.returncode}: {result.stderr.strip()}")
        return result.stdout.strip().split(";")[0]

    def job_states(self) -> dict[str, str]:
        """Every job slurmctld still knows (finished ones for MinJobAge), id → state."""
        out = self.run("squeue", "-h", "-t", "all", "-o", "%i %T").stdout
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def job_state(self, job_id: str) -> str | None:
        """One job's state (``PENDING``, ``RUNNING``, ``COMPLETED``...), None once it is forgotten."""
        return self.job_states().get(str(job_id))

    def wait_for_job(
        self, job_id: str, states: Sequence[str] | frozenset[str], timeout: float = 60
    ) -> str:
        """Poll until the job is in one of ``states``; the state. Raises with the logs on timeout."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.job_state(job_id)
            if state in wanted:
                return state
            time.sleep(0.2)
        raise SlurmClusterError(
            f"job {job_id} is {state}, not {sorted(wanted)} after {timeout}s\n{self.logs_tail()}"
        )

    def node_info(self) -> dict[str, str]:
        """``scontrol show node``'s fields of the node (``State``, ``CPUAlloc``, ``CPUTot``...)."""
        out = self.run("scontrol", "show", "node", self.node, "-o").stdout
        return dict(f.split("=", 1) for f in out.split() if "=" in f)

    def node_state(self) -> str:
        """The node's state as slurmctld has it (``IDLE``, ``MIXED``, ``ALLOCATED``, with flags
        such as ``+COMPLETING`` or ``+DRAIN``)."""
        return self.node_info().get("State", "UNKNOWN")

    def wait_idle(self, timeout: float = 60) -> None:
        """Poll until no job is pending or running and no CPU of the node is allocated.

        (``scontrol``'s ``CPUAlloc``, not sinfo's state: sinfo can show a node ``mixed`` for
        a while after a job was cancelled just as it started, with every CPU already free.)
        """
        deadline = time.monotonic() + timeout
        active: dict[str, str] = {}
        node: dict[str, str] = {}
        while time.monotonic() < deadline:
            self._check_alive()
            active = {i: s for i, s in self.job_states().items() if s not in FINAL_STATES}
            node = self.node_info()
            state = node.get("State", "")
            if (
                not active
                and node.get("CPUAlloc") == "0"
                and state.split("+")[0] in ("IDLE", "MIXED")
                and "COMPLETING" not in state
            ):
                return
            time.sleep(0.2)
        raise SlurmClusterError(
            f"cluster not idle after {timeout}s (node {node.get('State')} CPUAlloc "
            f"{node.get('CPUAlloc')}, jobs {active})\n{self.logs_tail()}"
        )

    def cancel_all(self, timeout: float = 60) -> None:
        """Cancel every job of the cluster and wait until the node is idle again."""
        active = [i for i, s in self.job_states().items() if s not in FINAL_STATES]
        if active:
            self.run("scancel", *active, check=False)
        self.wait_idle(timeout)

    def logs_tail(self, lines: int = 30) -> str:
        """The last lines of each daemon's log, for failure messages."""
        parts = []
        for path in sorted((self.root / "log").glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def _check_alive(self) -> None:
        for name, process in self._processes.items():
            if process.poll() is not None:
                raise SlurmClusterError(f"{name} exited {process.returncode}\n{self.logs_tail()}")

    def stop(self, *, remove: bool = True) -> None:
        """Cancel all jobs, stop slurmd, slurmctld and munged (in that order), remove the directory."""
        watchdog = self._processes.pop("watchdog", None)
        if watchdog is not None:
            _terminate(watchdog)
        try:
            if all(p.poll() is None for p in self._processes.values()):
                self.cancel_all(timeout=30)
        except (SlurmClusterError, subprocess.SubprocessError):
            pass  # stopping anyway: the daemons go below, and with them their jobs
        slurmds = [name for name in self._processes if name.startswith("slurmd")]
        for name in (*slurmds, "slurmctld", "munged"):
            process = self._processes.pop(name, None)
            if process is not None:
                _terminate(process)
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)


def _terminate(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM the daemon (its own process group), SIGKILL it if it lingers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout)


def _slurm_conf(cluster: SlurmCluster, user: str, munge_socket: Path) -> str:
    root = cluster.root
    # slurmctld compares the short host name with SlurmctldHost; it is reached on 127.0.0.1
    host = socket.gethostname().split(".")[0]
    partitions = "\n".join(
        f"PartitionName={p} Nodes={','.join(cluster.nodes)} Default={'YES' if p == cluster.default_partition else 'NO'}"
        " MaxTime=INFINITE State=UP OverSubscribe=NO"
        for p in cluster.partitions
    )
    # Several slurmd on one host: each node its own port (and %n-named spool, pid and log files).
    extra = f" Port={cluster.slurmd_port}" if cluster.extra_nodes else ""
    for name, port in cluster.extra_nodes:
        extra += (
            f"\nNodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cluster.cpus}"
            f" State=UNKNOWN Port={port}"
        )
    return f"""\
# Written by tests/slurm_cluster.py for one test session; removed when the cluster stops.
ClusterName={cluster.name}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={cluster.ctld_port}
SlurmdPort={cluster.slurmd_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool{"/%n" if cluster.extra_nodes else ""}
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd{"-%n" if cluster.extra_nodes else ""}.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd{"-%n" if cluster.extra_nodes else ""}.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# Start a pending job within a couple of seconds of resources freeing up.
SchedulerParameters=sched_interval=2,bf_interval=2,sched_min_interval=200000
SlurmdParameters=config_overrides
ReturnToService=2
# scancel/time limit: SIGTERM, then SIGKILL after KillWait seconds.
KillWait=5
MinJobAge=300
InactiveLimit=0
MessageTimeout=30
MailProg=/bin/true
NodeName={cluster.node} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cluster.cpus} State=UNKNOWN{extra}
{partitions}
"""


def start_cluster(
    *,
    cpus: int = 4,
    nodes: int = 1,
    partitions: Sequence[str] = PARTITIONS,
    timeout: float = 90,
    attempts: int = 3,
) -> SlurmCluster:
    """Configure and start a fresh cluster; returns once its node is idle.

    ``nodes`` > 1 starts that many slurmd daemons on this host, each a node of ``cpus`` CPUs
    (``cluster.nodes``), so jobs can span nodes. ``partitions[0]`` is the default partition. A
    start that fails (a daemon exits: say another process took one of the free ports in between)
    is retried on new ports and names, up to ``attempts`` times; then ``SlurmClusterError`` with
    the daemons' logs.
    """
    reason = missing_reason()
    if reason:
        raise SlurmClusterError(reason)
    for attempt in range(1, attempts + 1):
        try:
            return _start_once(cpus, partitions, timeout, nodes)
        except SlurmClusterError:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start_once(
    cpus: int, partitions: Sequence[str], timeout: float, nodes: int = 1
) -> SlurmCluster:
    suffix = uuid.uuid4().hex[:8]
    # Not pytest's tmp_path: munged wants every directory above its socket world-executable.
    root = Path(tempfile.mkdtemp(prefix="detslurm-", dir="/tmp"))
    root.chmod(0o755)
    for sub in ("munge", "state", "spool", "log", "run", "shared"):
        (root / sub).mkdir(mode=0o755)
    (root / "shared").chmod(0o777)
    cluster = SlurmCluster(
        root=root,
        name=f"det{suffix}",
        node=f"det{suffix}n0",
        cpus=cpus,
        partitions=tuple(partitions),
        default_partition=partitions[0],
        ctld_port=free_port(),
        slurmd_port=free_port(),
        env={"SLURM_CONF": str(root / "slurm.conf")},
        shared_dir=root / "shared",
        extra_nodes=tuple((f"det{suffix}n{i}", free_port()) for i in range(1, nodes)),
    )
    try:
        _start_daemons(cluster)
        _start_watchdog(cluster)
        cluster.wait_idle(timeout)
        for name, _ in cluster.extra_nodes:
            wait_for(
                lambda name=name: (
                    "State=IDLE"
                    in cluster.run(  # type: ignore[misc]
                        "scontrol", "show", "node", "-o", name, check=False
                    ).stdout
                ),
                cluster,
                f"node {name} to be idle",
                timeout,
            )
    except BaseException:
        cluster.stop()  # the error carries the daemons' logs; nothing is left running
        raise
    return cluster


def _start_watchdog(cluster: SlurmCluster) -> None:
    """The watchdog that stops the cluster if this process dies first (see ``WATCHDOG``)."""
    pids = [str(p.pid) for p in cluster._processes.values()]
    user = pwd.getpwuid(os.geteuid()).pw_name
    cluster._processes["watchdog"] = subprocess.Popen(
        [sys.executable, "-c", WATCHDOG, str(os.getpid()), str(cluster.root), user, *pids],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**cluster.environ(), "PATH": os.pathsep.join([os.environ.get("PATH", ""), *SBIN])},
        start_new_session=True,
    )


def _start_daemons(cluster: SlurmCluster) -> None:
    root = cluster.root
    user = pwd.getpwuid(os.geteuid()).pw_name
    munge = root / "munge"
    socket_path = munge / "munge.sock"
    key = munge / "munge.key"
    subprocess.run(
        [_which("mungekey"), "--create", f"--keyfile={key}"],  # type: ignore[list-item]
        check=True,
        capture_output=True,
    )
    key.chmod(0o400)
    cluster.conf.write_text(_slurm_conf(cluster, user, socket_path))

    def spawn(name: str, *args: str, key: str | None = None) -> None:
        key = key or name
        log = open(root / "log" / f"{key}.stdout.log", "wb")  # noqa: SIM115 (the child owns it)
        with log:
            cluster._processes[key] = subprocess.Popen(
                [_which(name), *args],  # type: ignore[list-item]
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=cluster.environ(),
                start_new_session=True,
            )

    spawn(
        "munged",
        "--foreground",
        f"--socket={socket_path}",
        f"--key-file={key}",
        f"--pid-file={munge / 'munged.pid'}",
        f"--log-file={root / 'log' / 'munged.log'}",
        f"--seed-file={munge / 'munged.seed'}",
    )
    wait_for(lambda: socket_path.exists(), cluster, "munged's socket", 30)
    spawn("slurmctld", "-D", "-i", "-f", str(cluster.conf))
    wait_for(
        lambda: "UP" in cluster.run("scontrol", "ping", check=False).stdout,
        cluster,
        "slurmctld to answer",
        60,
    )
    if cluster.extra_nodes:
        for name in cluster.nodes:
            (root / "spool" / name).mkdir(mode=0o755, exist_ok=True)
    spawn("slurmd", "-D", "-N", cluster.node, "-f", str(cluster.conf))
    for name, _ in cluster.extra_nodes:
        spawn("slurmd", "-D", "-N", name, "-f", str(cluster.conf), key=f"slurmd-{name}")


def wait_for(ready: Callable[[], bool], cluster: SlurmCluster, what: str, timeout: float) -> None:
    """Poll ``ready`` until it holds; raises with the daemons' logs after ``timeout`` seconds or
    when a daemon died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cluster._check_alive()
        if ready():
            return
        time.sleep(0.1)
    raise SlurmClusterError(f"timed out waiting for {what}\n{cluster.logs_tail()}")
