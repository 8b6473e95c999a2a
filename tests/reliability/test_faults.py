"""Fault injection with real processes: the master killed or stopped under reporting trials, a trial
killed, the SQLite file locked by another process, PostgreSQL restarted, the data dir's filesystem full.

Every test checks what the trials' clients saw acknowledged (their ledgers, see ``faults_harness``)
against what the master stored: each acknowledged metric and checkpoint exactly once, and the
experiments complete. Tests wait for states (ledger lines, experiment states), never for time; the
only deliberate waits are the outages themselves (a lock held 10 s, a master down a few seconds).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from master_process import MasterProcess
from reliability.faults_harness import (
    PrivatePostgres,
    check_stored_exactly_once,
    experiment_config,
    fill,
    hparam_x,
    kill_pid,
    read_ledger,
    tmpfs,
    trial_ids,
    wait_ledgers,
    write_context,
)

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def context_dir(workdir: pathlib.Path) -> pathlib.Path:
    return write_context(workdir / "context")


@pytest.fixture
def ledger_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """The ledgers of one test's trials (trial ids repeat across the module's masters)."""
    path = tmp_path / "ledgers"
    path.mkdir()
    return path


LIVE = {"STATE_ACTIVE", "STATE_RUNNING", "STATE_STARTING", "STATE_QUEUED"}
"""How an unfinished, unpaused experiment reads (ACTIVE, shown by its trials' allocations)."""


@pytest.fixture(scope="module")
def sqlite_master(workdir: pathlib.Path) -> Iterator[MasterProcess]:
    """One ``det-master up`` process on SQLite for the module, with a slot for each of 4 trials;
    tests kill and restart it (each looks only at its own experiments)."""
    config = workdir / "master.yaml"
    config.write_text("db_busy_timeout_s: 2\n")  # a locked database answers 503 after 2 s
    master = MasterProcess(workdir / "master", slots=4, config_file=config)
    yield master
    master.stop()


def _restart_after(master: MasterProcess, stopped: str, outage_s: float) -> None:
    """Start ``master`` again on its port ``outage_s`` seconds after it stopped (the outage)."""
    port = urllib.parse.urlsplit(master.url).port or 0
    assert not master.running, stopped
    time.sleep(outage_s)  # the fault itself: the master stays away this long
    master._launch(port)


def test_master_sigkill_while_four_trials_report(
    sqlite_master: MasterProcess, context_dir: pathlib.Path, ledger_dir: pathlib.Path
) -> None:
    """SIGKILL the master while 4 trials report metrics and checkpoints; after the restart every
    metric and checkpoint a trial saw acknowledged is stored exactly once, both experiments
    complete."""
    api = sqlite_master.api()
    exps = [
        api.create_experiment(experiment_config("kill-a", [0.1, 0.2], ledger_dir), context_dir),
        api.create_experiment(experiment_config("kill-b", [0.3, 0.4], ledger_dir), context_dir),
    ]
    trials = [t for e in exps for t in trial_ids(api, e, 2)]
    wait_ledgers(
        api,
        ledger_dir,
        trials,
        lambda ledger: ledger.checkpoints and len(ledger.metrics) >= 7,
        "every trial past its first checkpoint",
    )
    sqlite_master.kill()
    before = {t: len(read_ledger(ledger_dir, t).metrics) for t in trials}
    _restart_after(sqlite_master, "killed", 1.0)
    api = sqlite_master.api()
    for e in exps:
        assert api.wait_experiment(e, timeout=180) == "STATE_COMPLETED", api.debug(e)
    xs = {**hparam_x(api, exps[0]), **hparam_x(api, exps[1])}
    for t in trials:
        ledger = check_stored_exactly_once(api, ledger_dir, t, xs)
        assert len(ledger.metrics) > before[t] and ledger.done
        assert len(ledger.starts) >= 2, ledger.starts  # resumed by the restarted master
        assert ledger.starts[-1][2] >= 5, ledger.starts  # from a checkpoint, not from scratch


def test_master_sigterm_restart_keeps_trials_running(
    sqlite_master: MasterProcess, context_dir: pathlib.Path, ledger_dir: pathlib.Path
) -> None:
    """A master stopped with SIGTERM (an upgrade) and started again a few seconds later: its
    running trials are never failed (``max_restarts: 0``, so a failure would be final), they
    resume, the experiments complete with every report stored once. It used to end in ERROR ("an
    earlier metrics report failed: cannot reach the master"). Either side alone holds: one
    experiment's trials do not retry at all (window 0: the master must not fail them), the other's
    ride the outage out with the default retry."""
    api = sqlite_master.api()
    exps = [
        api.create_experiment(
            experiment_config(name, xs, ledger_dir, retry_window=window, max_restarts=0),
            context_dir,
        )
        for name, xs, window in (("term-a", [0.5, 0.6], 0.0), ("term-b", [0.55, 0.65], 120.0))
    ]
    trials = [t for e in exps for t in trial_ids(api, e, 2)]
    wait_ledgers(
        api,
        ledger_dir,
        trials,
        lambda ledger: ledger.checkpoints and len(ledger.metrics) >= 7,
        "every trial past its first checkpoint",
    )
    stopped_log = sqlite_master.log_path
    sqlite_master.stop()  # SIGTERM; waits for the exit
    # The trials' preemption long-polls were answered, not cancelled with a traceback each.
    assert "Exception in ASGI application" not in stopped_log.read_text()
    _restart_after(sqlite_master, "stopped", 3.0)
    api = sqlite_master.api()
    for exp in exps:
        assert "STATE_ERROR" not in {t["state"] for t in api.trials(exp)}, api.debug(exp)
    for exp in exps:
        assert api.wait_experiment(exp, timeout=180) == "STATE_COMPLETED", api.debug(exp)
        assert all(t["state"] == "STATE_COMPLETED" for t in api.trials(exp))
    xs = {**hparam_x(api, exps[0]), **hparam_x(api, exps[1])}
    for t in trials:
        ledger = check_stored_exactly_once(api, ledger_dir, t, xs)
        assert ledger.done and len(ledger.starts) >= 2


def test_trial_sigkill_restarts_from_its_checkpoint(
    sqlite_master: MasterProcess, context_dir: pathlib.Path, ledger_dir: pathlib.Path
) -> None:
    """A trial process SIGKILLed mid-run is restarted from its latest checkpoint; nothing it saw
    acknowledged is lost or stored twice."""
    api = sqlite_master.api()
    exp = api.create_experiment(experiment_config("trial-kill", [0.7], ledger_dir), context_dir)
    (trial,) = trial_ids(api, exp, 1)
    wait_ledgers(
        api,
        ledger_dir,
        [trial],
        lambda ledger: ledger.checkpoints and len(ledger.metrics) >= 7,
        "the trial past its first checkpoint",
    )
    first = read_ledger(ledger_dir, trial)
    kill_pid(first.starts[0][1])
    assert api.wait_experiment(exp, timeout=180) == "STATE_COMPLETED", api.debug(exp)
    ledger = check_stored_exactly_once(api, ledger_dir, trial, hparam_x(api, exp))
    assert len(ledger.starts) == 2, ledger.starts
    # From the latest checkpoint of the killed run: one the master stores, no older than the
    # latest the ledger showed before the kill (the run may checkpoint again before the kill
    # lands, and be killed before it notes that), and no later than the run trained.
    resumed_from = ledger.starts[1][2]
    trained = max(s for s, run in zip(ledger.metrics, ledger.metric_runs, strict=True) if run == 1)
    latest_seen = max(step for _, step in first.checkpoints)
    assert latest_seen <= resumed_from <= trained, (resumed_from, first, ledger)
    stored = api.get(f"/api/v1/trials/{trial}/checkpoints")["checkpoints"]
    assert resumed_from in {c["metadata"]["steps_completed"] for c in stored}, stored
    assert api.trials(exp)[0]["restarts"] == 1


LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
db.execute("BEGIN EXCLUSIVE")
locked_at = time.monotonic()
print("locked", flush=True)
sys.stdin.readline()  # held until the test has seen what it checks during the lock
time.sleep(max(0.0, float(sys.argv[2]) - (time.monotonic() - locked_at)))
db.execute("COMMIT")
"""
"""Holds ``BEGIN EXCLUSIVE`` on a SQLite file for at least ``argv[2]`` seconds and until a line
arrives on its stdin."""


def test_sqlite_locked_by_another_process(
    sqlite_master: MasterProcess, context_dir: pathlib.Path, ledger_dir: pathlib.Path
) -> None:
    """Another process holds the SQLite file with ``BEGIN EXCLUSIVE`` for at least 10 s while 2
    trials report. Reads are still served; a write waits the busy timeout (``db_busy_timeout_s``,
    2 s here; at most twice that behind the trials' own waiting writes) and then gets a 503 saying
    the database is locked, not a 500; the trials' reports get the same 503 and are retried; after
    the lock the same write succeeds and the experiment completes with every report stored once.
    The lock is released only after the test has its answers, so "during the lock" holds however
    slowly a loaded machine answers."""
    api = sqlite_master.api()
    exp = api.create_experiment(experiment_config("locked", [0.8, 0.9], ledger_dir), context_dir)
    trials = trial_ids(api, exp, 2)
    wait_ledgers(
        api,
        ledger_dir,
        trials,
        lambda ledger: ledger.checkpoints and len(ledger.metrics) >= 7,
        "both trials past their first checkpoint",
    )
    token = sqlite_master.login("determined")  # a login writes: before the lock
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(sqlite_master.data_dir / "det.sqlite"), "10"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert locker.stdout is not None
        assert locker.stdout.readline().strip() == "locked"
        response = requests.patch(
            f"{sqlite_master.url}/api/v1/experiments/{exp}",
            json={"description": "written after the lock"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert api.get("/api/v1/master")["clusterName"] is not None
        assert any(e["id"] == exp for e in api.get("/api/v1/experiments")["experiments"])
        assert api.experiment(exp)["state"] in LIVE
        assert locker.poll() is None  # all of the above was answered during the lock
        assert locker.stdin is not None
        locker.stdin.write("release\n")
        locker.stdin.flush()
        assert locker.wait(30) == 0
    finally:
        locker.kill()
    assert response.status_code == 503, response.text
    assert "database is locked" in _error(response), response.text
    assert response.headers.get("Retry-After")
    api.session.request(
        "PATCH", f"/api/v1/experiments/{exp}", body={"description": "written after the lock"}
    )
    assert api.experiment(exp)["description"] == "written after the lock"
    assert api.wait_experiment(exp, timeout=180) == "STATE_COMPLETED", api.debug(exp)
    xs = hparam_x(api, exp)
    for t in trials:
        assert check_stored_exactly_once(api, ledger_dir, t, xs).done


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    try:
        server = PrivatePostgres()
    except (FileNotFoundError, RuntimeError) as exc:
        pytest.skip(f"no private PostgreSQL server: {exc}")
    yield server
    server.close()


def _error(response: requests.Response) -> str:
    return str(response.json()["error"]["error"])


def test_postgres_restarted_mid_run(
    private_postgres: PrivatePostgres,
    workdir: pathlib.Path,
    context_dir: pathlib.Path,
    ledger_dir: pathlib.Path,
) -> None:
    """The PostgreSQL server stops (``pg_ctl stop -m fast``) while 2 trials report and starts
    again: meanwhile a client gets a 503 naming the database, not a 500, and a trial that dies
    during the outage is not lost (its exit is handled once the database is back: it restarts
    from its checkpoint); the pool reconnects, the other trial rides the outage out, and the
    experiment completes with every report stored once."""
    master = MasterProcess(workdir / "pg-master", slots=2, db=private_postgres.url)
    try:
        api = master.api()
        exp = api.create_experiment(experiment_config("pg", [1.0, 1.1], ledger_dir), context_dir)
        trials = trial_ids(api, exp, 2)
        wait_ledgers(
            api,
            ledger_dir,
            trials,
            lambda ledger: ledger.checkpoints and len(ledger.metrics) >= 7,
            "both trials past their first checkpoint",
        )
        token = master.login("determined")
        victim = trials[0]
        private_postgres.stop()
        try:
            kill_pid(read_ledger(ledger_dir, victim).starts[0][1])
            response = requests.get(
                f"{master.url}/api/v1/experiments/{exp}",
                headers={"Authorization": f"Bearer {token}"},
                timeout=60,
            )
            assert response.status_code == 503, response.text
            assert "database is unavailable" in _error(response), response.text
        finally:
            private_postgres.start()
        assert api.wait_experiment(exp, timeout=180) == "STATE_COMPLETED", api.debug(exp)
        xs = hparam_x(api, exp)
        for t in trials:
            assert check_stored_exactly_once(api, ledger_dir, t, xs).done
        resumed = read_ledger(ledger_dir, victim).starts
        assert len(resumed) == 2 and resumed[1][2] >= 5, resumed
    finally:
        master.stop()


def test_data_dir_filesystem_full(
    make_master: Any, workdir: pathlib.Path, context_dir: pathlib.Path, ledger_dir: pathlib.Path
) -> None:
    """The master's data dir lives on a 32 MiB tmpfs that fills up while a trial reports: writes
    get a 503 saying the disk is full (a client's PATCH, the trial's reports, which it retries),
    reads are still served, the database passes ``PRAGMA integrity_check`` and holds nothing half
    written; once space is freed the trial goes on and its experiment completes, every report
    stored once. (Checkpoints go to a directory off the full filesystem.)"""
    mount = workdir / "small-fs"
    try:
        filesystem = tmpfs(mount, "32m")
        fs = filesystem.__enter__()
    except PermissionError as exc:
        pytest.skip(str(exc))
    master = None
    try:
        master = make_master(
            data_dir=fs / "master", slots=2, checkpoint_storage=str(workdir / "full-ckpts")
        )
        api = master.api()
        exp = api.create_experiment(experiment_config("full", [1.2], ledger_dir), context_dir)
        (trial,) = trial_ids(api, exp, 1)
        wait_ledgers(
            api,
            ledger_dir,
            [trial],
            lambda ledger: ledger.checkpoints and len(ledger.metrics) >= 7,
            "the trial past its first checkpoint",
        )
        token = master.login("determined")  # a login writes a session row
        ballast = fill(fs)
        stalled = len(read_ledger(ledger_dir, trial).metrics)
        response = requests.patch(
            f"{master.url}/api/v1/experiments/{exp}",
            json={"description": "never stored"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert response.status_code == 503, response.text
        assert "full" in _error(response), response.text
        assert api.experiment(exp)["state"] in LIVE  # reads still served
        assert len(read_ledger(ledger_dir, trial).metrics) <= stalled + 1  # reports wait
        check = subprocess.run(
            [sys.executable, "-c", INTEGRITY, str(fs / "master" / "det.sqlite")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.stdout.strip() == "ok", check
        ballast.unlink()
        assert api.wait_experiment(exp, timeout=180) == "STATE_COMPLETED", api.debug(exp)
        assert api.experiment(exp)["description"] != "never stored"
        assert check_stored_exactly_once(api, ledger_dir, trial, hparam_x(api, exp)).done
    finally:
        if master is not None:
            master.stop()  # before the filesystem goes away
        filesystem.__exit__(None, None, None)


INTEGRITY = """
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(db.execute("PRAGMA integrity_check").fetchone()[0])
"""
