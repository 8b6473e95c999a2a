"""The Slurm commands the resource manager runs, and parsers of what they print.

Every call goes through :func:`run_command` (a timeout, the configured environment, errors with
Slurm's own message). The parsers are pure functions over the text of ``squeue``/``sinfo`` in the
fixed ``--format`` strings below, so they are tested without a cluster.
"""

from __future__ import annotations

import getpass
import logging
import queue
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

SQUEUE_FORMAT = "%i|%T|%r|%j"
"""Job id, long state, reason, job name."""
SINFO_FORMAT = "%P|%a|%D|%c|%G|%t"
"""Partition (``*`` marks the default), availability, node count, CPUs per node, GRES, state."""
COMMAND_TIMEOUT_S = 60.0

FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
"""States after which a job never runs again."""
LOST_STATES = FINAL_STATES - {"COMPLETED", "FAILED"}
"""Final states in which Slurm, not the job's own program, ended the job."""
USABLE_NODE_STATES = frozenset({"idle", "mix", "mixed", "alloc", "allocated", "comp", "completing"})
"""Node states (``sinfo %t``, less flags) whose CPUs and GPUs count as a pool's capacity."""
_NODE_FLAGS = "*~#%$@!^-+"


logger = logging.getLogger("determined.master.rm")


class SlurmError(RuntimeError):
    """A Slurm command failed; the message carries its stderr."""


def run_command(argv: list[str], env: dict[str, str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run a Slurm command; its stdout, or SlurmError with what it printed on stderr."""
    try:
        result = subprocess.run(
            argv,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise SlurmError(f"{argv[0]}: not found on PATH (set resource_manager.path)") from exc
    except subprocess.TimeoutExpired as exc:
        raise SlurmError(f"{argv[0]}: no answer within {timeout:.0f}s") from exc
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise SlurmError(
            f"{' '.join(argv[:2])} exited {result.returncode}: {message[-1] if message else ''}"
        )
    return result.stdout


_TRANSIENT = re.compile(
    r"timed out|no answer|unable to contact|try again|temporarily|not responding|connection",
    re.IGNORECASE,
)


def is_transient(error: BaseException) -> bool:
    """Whether a failed command may succeed when tried again (slurmctld busy or unreachable),
    rather than being refused for good (an invalid option, account or partition)."""
    return isinstance(error, OSError) or (
        isinstance(error, SlurmError) and bool(_TRANSIENT.search(str(error)))
    )


@dataclass(frozen=True)
class JobStatus:
    """One job as ``squeue`` shows it."""

    job_id: str
    state: str
    reason: str
    name: str


def parse_squeue(text: str) -> dict[str, JobStatus]:
    """Job id → :class:`JobStatus`, from ``squeue --noheader --format=`` :data:`SQUEUE_FORMAT`."""
    jobs: dict[str, JobStatus] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) != 4 or not parts[0]:
            continue
        job_id, state, reason, name = (p.strip() for p in parts)
        # A state may carry a suffix ("CANCELLED by 1000" in some versions): keep the word.
        jobs[job_id] = JobStatus(job_id, state.split()[0] if state else "", reason, name)
    return jobs


def squeue_argv() -> list[str]:
    """One ``squeue`` for every job of this user that slurmctld still knows (finished ones too)."""
    return [
        "squeue",
        "--noheader",
        "--states=all",
        f"--user={getpass.getuser()}",
        f"--format={SQUEUE_FORMAT}",
    ]


@dataclass
class Partition:
    """A partition's capacity over its usable nodes, as ``sinfo`` shows it."""

    name: str
    default: bool = False
    up: bool = True
    nodes: int = 0
    cpus: int = 0
    gpus: int = 0
    max_cpus_per_node: int = 0
    max_gpus_per_node: int = 0
    all_nodes: int = 0


def gres_gpus(gres: str) -> int:
    """GPUs per node in a GRES string: ``gpu:4``, ``gpu:a100:2(S:0-1),shard:8``, ``(null)``."""
    total = 0
    for item in re.split(r",(?![^()]*\))", gres):
        item = re.sub(r"\(.*?\)", "", item).strip()
        fields = item.split(":")
        if fields[0] != "gpu" or len(fields) < 2:
            continue
        count = fields[-1]
        if count.isdigit():
            total += int(count)
        elif len(fields) == 2:
            total += 1  # "gpu:a100" names one GPU of a type
    return total


def _int(text: str) -> int:
    match = re.match(r"\d+", text.strip())
    return int(match.group(0)) if match else 0


def parse_sinfo(text: str) -> dict[str, Partition]:
    """Partition name → :class:`Partition`, from ``sinfo --noheader --format=``
    :data:`SINFO_FORMAT` (one line per partition, node configuration and state)."""
    partitions: dict[str, Partition] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 6 or not parts[0]:
            continue
        raw_name, avail, count, cpus, gres, state = (p.strip() for p in parts)
        name = raw_name.rstrip("*")
        partition = partitions.setdefault(name, Partition(name))
        partition.default = partition.default or raw_name.endswith("*")
        partition.up = avail.lower() == "up"
        nodes = _int(count)
        partition.all_nodes += nodes
        flags_stripped = state.rstrip(_NODE_FLAGS)
        if state.endswith("*") or flags_stripped.lower() not in USABLE_NODE_STATES:
            continue
        per_node_cpus, per_node_gpus = _int(cpus), gres_gpus(gres)
        partition.nodes += nodes
        partition.cpus += nodes * per_node_cpus
        partition.gpus += nodes * per_node_gpus
        partition.max_cpus_per_node = max(partition.max_cpus_per_node, per_node_cpus)
        partition.max_gpus_per_node = max(partition.max_gpus_per_node, per_node_gpus)
    return partitions


def sinfo_argv() -> list[str]:
    return ["sinfo", "--noheader", f"--format={SINFO_FORMAT}"]


def parse_sbatch(text: str) -> str:
    """The job id from ``sbatch --parsable`` (``"123"`` or ``"123;cluster"``)."""
    job_id = text.strip().splitlines()[-1].split(";")[0].strip() if text.strip() else ""
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed no job id: {text.strip()!r}")
    return job_id


class Background:
    """One thread that runs Slurm commands (and other slow chores) in order, off the caller's
    lock; a failing command is logged."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._steps: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="det-rm-slurm-cmd", daemon=True)
        self._thread.start()

    def command(self, *argv: str) -> None:
        """Run ``argv`` (``"scancel", ...``) later."""

        def step() -> None:
            try:
                run_command(list(argv), self._env)
            except SlurmError as exc:
                logger.warning("slurm: %s", exc)

        self._steps.put(step)

    def call(self, step: Callable[[], None]) -> None:
        """Run ``step()`` later."""
        self._steps.put(step)

    def stop(self, timeout: float) -> None:
        """Finish what is queued, then end the thread."""
        self._steps.put(None)
        if self._thread is not None:
            self._thread.join(timeout)

    def _work(self) -> None:
        while True:
            step = self._steps.get()
            if step is None:
                return
            try:
                step()
            except Exception:
                logger.exception("slurm: a background step failed")
