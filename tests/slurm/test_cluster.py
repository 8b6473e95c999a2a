"""The test Slurm cluster itself: jobs run, queue when the node is full, and can be cancelled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_cluster
from slurm_cluster import FINAL_STATES, SBIN, WATCHDOG, SlurmCluster


def test_batch_job_runs_in_shared_dir(slurm: SlurmCluster) -> None:
    job = slurm.sbatch('echo "hello from $SLURM_JOB_ID" > hello.txt')
    assert slurm.wait_for_job(job, FINAL_STATES) == "COMPLETED"
    assert (slurm.shared_dir / "hello.txt").read_text().strip() == f"hello from {job}"


def test_squeue_shows_job_and_scancel_stops_it(slurm: SlurmCluster) -> None:
    marker = slurm.shared_dir / "started.txt"
    job = slurm.sbatch(f"touch {marker}; sleep 300")
    assert slurm.wait_for_job(job, ["RUNNING"]) == "RUNNING"
    # RUNNING comes before the script's first line on a busy machine: cancel once it ran
    slurm_cluster.wait_for(marker.exists, slurm, "the job's first line", timeout=120)
    out = slurm.run("squeue", "-h", "-o", "%i %T %P").stdout.split()
    assert out == [job, "RUNNING", slurm.default_partition]
    slurm.run("scancel", job)
    assert slurm.wait_for_job(job, FINAL_STATES) == "CANCELLED"


def test_job_beyond_free_cpus_pends_until_first_ends(slurm: SlurmCluster) -> None:
    """Two jobs of half the node's CPUs fill it; a third stays PENDING (Resources) until one ends."""
    half = slurm.cpus // 2
    release = slurm.shared_dir / "release"
    first = slurm.sbatch(f"while [ ! -e {release} ]; do sleep 0.1; done", cpus=half)
    second = slurm.sbatch("sleep 300", cpus=half)
    slurm.wait_for_job(first, ["RUNNING"])
    slurm.wait_for_job(second, ["RUNNING"])
    third = slurm.sbatch("true", cpus=half, partition="other")
    reason = slurm.run("squeue", "-h", "-j", third, "-o", "%T %r").stdout.split()
    assert reason[0] == "PENDING"
    assert slurm.job_state(third) == "PENDING"
    release.touch()
    assert slurm.wait_for_job(first, FINAL_STATES) == "COMPLETED"
    assert slurm.wait_for_job(third, FINAL_STATES) == "COMPLETED"
    assert slurm.job_state(second) == "RUNNING"


def test_signal_reaches_the_job(slurm: SlurmCluster) -> None:
    """``scancel --signal=TERM --batch`` delivers SIGTERM to the batch script, which can exit cleanly."""
    got = slurm.shared_dir / "got-term"
    ready = slurm.shared_dir / "trap-ready"
    job = slurm.sbatch(
        f"trap 'touch {got}; exit 0' TERM; touch {ready}; while true; do sleep 0.1; done"
    )
    slurm.wait_for_job(job, ["RUNNING"])
    _wait_path(ready)  # the trap is set once the marker exists
    slurm.run("scancel", "--signal=TERM", "--batch", job)
    assert slurm.wait_for_job(job, FINAL_STATES) == "COMPLETED"
    assert got.exists()


def test_srun_starts_ranks(slurm: SlurmCluster) -> None:
    """srun inside a batch job starts one task per rank with SLURM_PROCID set."""
    job = slurm.sbatch(
        "srun sh -c 'echo rank $SLURM_PROCID > rank-$SLURM_PROCID.txt'", "--ntasks=2"
    )
    assert slurm.wait_for_job(job, FINAL_STATES) == "COMPLETED"
    ranks = sorted(p.read_text().strip() for p in slurm.shared_dir.glob("rank-*.txt"))
    assert ranks == ["rank 0", "rank 1"]


def test_partitions_and_capacity(slurm: SlurmCluster) -> None:
    out = slurm.run("sinfo", "-h", "-o", "%R %C").stdout.split("\n")
    rows = dict(line.split() for line in out if line.strip())
    assert set(rows) == set(slurm.partitions)
    # allocated/idle/other/total CPUs
    assert rows[slurm.default_partition].split("/")[3] == str(slurm.cpus)


def _wait_path(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path} never appeared")
        time.sleep(0.05)


ORPHAN = """
import json, os, signal, slurm_cluster
cluster = slurm_cluster.start_cluster()
job = cluster.sbatch("sleep 300")
cluster.wait_for_job(job, ["RUNNING"])
pids = [p.pid for name, p in cluster._processes.items() if name != "watchdog"]
print(json.dumps({"root": str(cluster.root), "pids": pids}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_cluster_of_a_killed_process_is_cleaned_up(slurm_cluster: SlurmCluster) -> None:
    """A test process killed without teardown leaves no Slurm behind: the watchdog cancels the
    jobs, stops the daemons and removes the directory. (Needs ``slurm_cluster`` only for the skip.)"""
    tests = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", ORPHAN], cwd=tests, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    started = json.loads(result.stdout.strip().splitlines()[-1])
    root, pids = Path(started["root"]), started["pids"]
    deadline = time.monotonic() + 60
    while root.exists() or any(_alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"{root} or daemons {pids} still there"
        time.sleep(0.2)


def test_watchdog_kills_only_processes_of_its_cluster(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """A daemon pid the watchdog was given may, once that daemon is long gone, belong to a stranger:
    the watchdog ends the process group of a pid only while its command line names the cluster's
    directory. (The cluster only answers the watchdog's ``scancel`` for a user without jobs.)"""
    root = tmp_path / "cluster"
    root.mkdir()
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    stranger = subprocess.Popen(sleeper, start_new_session=True)
    daemon = subprocess.Popen([*sleeper, str(root)], start_new_session=True)
    owner = subprocess.Popen(sleeper)
    owner.kill()
    owner.wait()
    try:
        pids = [str(stranger.pid), str(daemon.pid)]
        env = slurm_cluster.environ()
        env["PATH"] = os.pathsep.join([env.get("PATH", ""), *SBIN])
        watchdog = subprocess.run(
            [sys.executable, "-c", WATCHDOG, str(owner.pid), str(root), "nobody", *pids],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert watchdog.returncode == 0, watchdog.stderr
        assert daemon.wait(timeout=30) == -signal.SIGTERM
        assert stranger.poll() is None, "the watchdog killed a process that was not its cluster's"
        assert not root.exists()
    finally:
        for process in (stranger, daemon):
            process.kill()
            process.wait()


def _alive(pid: int) -> bool:
    """The process runs (a zombie nobody reaped yet counts as gone: it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_missing_packages_give_the_skip_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where Slurm is not installed the fixtures skip, naming what is missing and how to install it."""
    monkeypatch.setattr(slurm_cluster, "_which", lambda name: None if name == "slurmd" else name)
    reason = slurm_cluster.missing_reason()
    assert reason is not None
    assert (
        "slurmd missing" in reason
        and "apt-get install slurmctld slurmd slurm-client munge" in reason
    )
