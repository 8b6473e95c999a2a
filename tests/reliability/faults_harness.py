"""Shared pieces of the fault-injection tests: a trial that keeps a ledger of what the master
acknowledged, the exactly-once check against what the master stored, a private PostgreSQL server
that a test may stop and start, and a small tmpfs to fill up.

The trial (``TRAIN``) reports a training metric every step and flushes it, so a ``metric N`` line in
its ledger means the master acknowledged step N; every 5 steps it stores a checkpoint and notes
``ckpt UUID N`` once the master acknowledged that. A restarted run resumes from its latest checkpoint
and notes ``start RUN PID STEP``. The ledger lives outside the master's data dir, one file per trial,
appended with O_APPEND by every run of the trial.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from e2e.harness import MasterAPI

TRAIN = '''
"""A trial whose ledger records every metric and checkpoint the master acknowledged."""
import os
import pathlib
import time

import determined as det

info = det.get_cluster_info()
trial_id = info.trial.trial_id
hp = info.trial.hparams
ledger = pathlib.Path(os.environ["FAULTS_LEDGER_DIR"]) / f"trial-{trial_id}.log"


def note(line):
    with open(ledger, "a") as f:
        f.write(line + "\\n")


def loss(step):
    return float(hp["x"]) + 1.0 / step


with det.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = int((path / "steps").read_text())
    note(f"start {info.trial._trial_run_id} {os.getpid()} {step}")
    for op in core.searcher.operations():
        while step < op.length:
            step += 1
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": loss(step)})
            core.train._shipper.flush()  # returns once the master acknowledged the report
            note(f"metric {step}")
            if step % 5 == 0:
                with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                    (path / "steps").write_text(str(step))
                note(f"ckpt {uuid} {step}")
            time.sleep(float(hp["pause"]))
        core.train.report_validation_metrics(steps_completed=step, metrics={"loss": loss(step)})
        op.report_completed(loss(step))
note("done")
'''

STEPS = 30
"""Steps every fault-test trial trains (checkpoints at every 5th)."""


def write_context(directory: pathlib.Path) -> pathlib.Path:
    """A model-definition directory holding ``train.py``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.py").write_text(TRAIN)
    return directory


def experiment_config(
    name: str,
    xs: list[float],
    ledger_dir: pathlib.Path,
    *,
    steps: int = STEPS,
    pause: float = 0.05,
    retry_window: float = 120.0,
    max_restarts: int = 3,
) -> dict[str, Any]:
    """A grid experiment with one trial per value of ``xs``, all running at once; checkpoints are
    all kept (no garbage collection), so every acknowledged one can be looked up afterwards."""
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "hyperparameters": {
            "x": {"type": "categorical", "vals": xs},
            "pause": pause,
        },
        "searcher": {
            "name": "grid",
            "metric": "loss",
            "smaller_is_better": True,
            "max_length": {"batches": steps},
            "max_concurrent_trials": 0,
        },
        "checkpoint_storage": {
            "save_experiment_best": 100,
            "save_trial_best": 100,
            "save_trial_latest": 100,
        },
        "environment": {
            "environment_variables": [
                f"FAULTS_LEDGER_DIR={ledger_dir}",
                f"DET_MASTER_RETRY_WINDOW={retry_window}",
            ]
        },
        "max_restarts": max_restarts,
    }


@dataclass
class Ledger:
    """What one trial's runs noted: acknowledged metric steps, checkpoints, and run starts."""

    metrics: list[int] = field(default_factory=list)
    metric_runs: list[int] = field(default_factory=list)
    """For each of ``metrics``, how many starts the ledger had noted by then (1: the first run)."""
    checkpoints: list[tuple[str, int]] = field(default_factory=list)
    starts: list[tuple[int, int, int]] = field(default_factory=list)  # (run id, pid, from step)
    done: bool = False


def read_ledger(ledger_dir: pathlib.Path, trial_id: int) -> Ledger:
    """The ledger of ``trial_id`` (empty when it has not started yet)."""
    path = ledger_dir / f"trial-{trial_id}.log"
    out = Ledger()
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        parts = line.split()
        if not parts or (parts[0] != "done" and len(parts) < 2):
            continue  # a line cut short by a kill
        if parts[0] == "metric":
            out.metrics.append(int(parts[1]))
            out.metric_runs.append(len(out.starts))
        elif parts[0] == "ckpt" and len(parts) == 3:
            out.checkpoints.append((parts[1], int(parts[2])))
        elif parts[0] == "start" and len(parts) == 4:
            out.starts.append((int(parts[1]), int(parts[2]), int(parts[3])))
        elif parts[0] == "done":
            out.done = True
    return out


def trial_ids(api: MasterAPI, experiment_id: int, count: int) -> list[int]:
    """The ids of the experiment's ``count`` trials, once all exist."""
    api.wait_for(
        lambda: len(api.trials(experiment_id)) == count, 120, f"{count} trials of {experiment_id}"
    )
    return sorted(int(t["id"]) for t in api.trials(experiment_id))


def wait_ledgers(
    api: MasterAPI,
    ledger_dir: pathlib.Path,
    trials: list[int],
    predicate: Callable[[Ledger], bool],
    what: str,
    timeout: float = 120,
) -> None:
    """Wait until every trial's ledger satisfies ``predicate``."""
    api.wait_for(lambda: all(predicate(read_ledger(ledger_dir, t)) for t in trials), timeout, what)


def check_stored_exactly_once(
    api: MasterAPI, ledger_dir: pathlib.Path, trial_id: int, xs_by_trial: dict[int, float]
) -> Ledger:
    """Every step the trial's runs saw acknowledged is stored once with the value reported (the
    live, unarchived series is exactly steps 1..STEPS), and every acknowledged checkpoint is stored
    once."""
    ledger = read_ledger(ledger_dir, trial_id)
    reports = api.metrics(trial_id, "training")
    steps = api.steps(reports)
    assert sorted(steps) == list(range(1, STEPS + 1)), (trial_id, steps)
    x = xs_by_trial[trial_id]
    for report in reports:
        value = api.values(report)["loss"]
        assert abs(value - (x + 1.0 / int(report["totalBatches"]))) < 1e-9, report
    assert set(ledger.metrics) <= set(steps), (trial_id, ledger.metrics)
    stored = [c["uuid"] for c in api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]]
    assert len(stored) == len(set(stored)), stored
    for uuid, _step in ledger.checkpoints:
        assert stored.count(uuid) == 1, (trial_id, uuid, stored)
    return ledger


def hparam_x(api: MasterAPI, experiment_id: int) -> dict[int, float]:
    """Trial id -> its ``x`` hyperparameter."""
    return {int(t["id"]): float(t["hparams"]["x"]) for t in api.trials(experiment_id)}


# --- a private PostgreSQL server ---------------------------------------------------------------


def _pg_bin() -> pathlib.Path | None:
    for candidate in ("/usr/lib/postgresql/15/bin", "/usr/local/bin"):
        if (pathlib.Path(candidate) / "initdb").exists():
            return pathlib.Path(candidate)
    found = shutil.which("initdb")
    return pathlib.Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivatePostgres:
    """A PostgreSQL cluster of this test alone (initdb in a temporary directory, its own port), so
    stopping it disturbs no other test. Runs as the ``postgres`` user when this process is root."""

    def __init__(self) -> None:
        bindir = _pg_bin()
        if bindir is None:
            raise FileNotFoundError("PostgreSQL's initdb is not installed")
        self.bindir = bindir
        # Not under pytest's tmp dir: the postgres user cannot enter root's 0700 directories.
        directory = pathlib.Path(tempfile.mkdtemp(prefix="det-faults-pg-"))
        self.directory = directory
        self.data = directory / "pgdata"
        self.port = _free_port()
        directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        self._as_pg(
            [str(bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"],
        )
        self.start()
        self._as_pg([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "det"])
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/det"

    def _as_pg(self, argv: list[str]) -> None:
        if os.geteuid() == 0:
            argv = ["su", "postgres", "-c", " ".join(argv)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{argv} failed:\n{result.stdout}\n{result.stderr}")

    def _pg_ctl(self, *args: str) -> None:
        self._as_pg(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", *args],
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl("-l", str(self.directory / "server.log"), "-o", f"'{options}'", "start")

    def stop(self) -> None:
        """Stop the server (fast mode: open connections are closed)."""
        self._pg_ctl("-m", "fast", "stop")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


# --- a small filesystem to fill ------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(mount_point: pathlib.Path, size: str) -> Iterator[pathlib.Path]:
    """A tmpfs of ``size`` (``"24m"``) mounted at ``mount_point`` for the block (needs root and a
    container that allows ``mount``; raises PermissionError otherwise)."""
    mount_point.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise PermissionError(f"cannot mount a tmpfs: {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(directory: pathlib.Path) -> pathlib.Path:
    """Fill the filesystem of ``directory`` with one file until even a one-byte write fails
    (ENOSPC); unbuffered, so nothing is left to fail later on close."""
    ballast = directory / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 1 << 14, 1 << 10, 1):
            chunk = b"\0" * size
            try:
                while True:
                    os.write(fd, chunk)
            except OSError:
                continue
    finally:
        os.close(fd)
    return ballast


def kill_pid(pid: int) -> None:
    """SIGKILL one process (it may already be gone)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
