"""The metrics writer's helper processes: a batch built there stores the same tiles as one built
in the writer's thread (tests/master/test_metric_tiles.py runs both ways; prepared requests:
tests/master/test_prepared_reports.py); a helper that dies costs nothing but a warning; and a
helper never outlives the process that started it."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from typing import Any

import pytest
from master.conftest import wait_for
from master.test_metric_tiles import _report, _unmanaged_trial, tile_mismatches
from process_tree import alive

from determined.client import Client
from determined.master._core import _writer_helpers
from determined.master._core._tile_build import Work, build
from determined.master._core._tile_columns import series_columns

TESTS = pathlib.Path(__file__).resolve().parents[1]


def _work(start: int, count: int) -> Work:
    xs = list(range(start, start + count))
    series = series_columns(xs, [{"loss": 1.0 / x, "acc": x % 7} for x in xs])
    return Work(1, "training", 1, series, len(xs), {})


def test_a_helper_builds_what_the_writer_builds() -> None:
    helpers = _writer_helpers.WriterHelpers()
    try:
        works = [_work(1, 300), _work(5, 40)]
        assert helpers.start(works).result() == [build(work) for work in works]  # below MIN_ROWS
        works = [_work(1, 3000), _work(2, 50)]
        assert helpers.start(works).result() == [build(work) for work in works]
        assert len(helpers.pids()) == 1 and helpers.failures == 0
    finally:
        helpers.close()
    assert helpers.pids() == []


def test_helpers_that_cannot_start_are_given_up_after_a_few_tries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    helpers = _writer_helpers.WriterHelpers()
    works = [_work(1, 3000)]
    for _ in range(_writer_helpers.MAX_FAILURES_IN_A_ROW + 3):
        assert helpers.start(works).result() == [build(work) for work in works]
    assert helpers.failures == _writer_helpers.MAX_FAILURES_IN_A_ROW  # then no more attempts
    assert helpers.pids() == []


def _trial_and_its_helper(master: Any) -> tuple[Client, int, int]:
    """A trial whose first batch was built by the one helper the pool then holds."""
    _writer_helpers.HELPERS.close()  # helpers earlier tests of this process left idle
    client = Client(master.session("determined"))
    trial_id = _unmanaged_trial(client)
    _report(client, trial_id, 1, list(range(1, 200)))
    (pid,) = _writer_helpers.HELPERS.pids()
    return client, trial_id, pid


def test_a_dead_helper_is_replaced_and_loses_no_tiles(
    module_master: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper that died while idle is dropped (a failure) and a new one builds the batch; one
    that dies with a batch on its way is the stuck test's path (its answer never comes)."""
    monkeypatch.setattr(_writer_helpers, "MIN_ROWS", 0)
    client, trial_id, pid = _trial_and_its_helper(module_master)
    failures = _writer_helpers.HELPERS.failures
    os.kill(pid, signal.SIGKILL)
    _wait_until_gone(pid)
    _report(client, trial_id, 1, list(range(200, 3000, 3)))  # a promotion
    assert _writer_helpers.HELPERS.failures == failures + 1
    fresh = _writer_helpers.HELPERS.pids()
    assert fresh and pid not in fresh
    assert tile_mismatches(module_master.db, trial_id) == []


def test_a_stuck_helper_is_stopped_and_the_batch_built_by_the_writer(
    module_master: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_writer_helpers, "MIN_ROWS", 0)
    monkeypatch.setattr(_writer_helpers, "TIMEOUT_S", 0.5)
    client, trial_id, pid = _trial_and_its_helper(module_master)
    failures = _writer_helpers.HELPERS.failures
    os.kill(pid, signal.SIGSTOP)
    _report(client, trial_id, 1, list(range(200, 400)))
    assert _writer_helpers.HELPERS.failures == failures + 1
    assert tile_mismatches(module_master.db, trial_id) == []
    assert not alive(pid)


def _wait_until_gone(pid: int) -> None:
    wait_for(lambda: not alive(pid), 30, f"process {pid} to end")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_helper_exits_when_the_process_that_started_it_is_killed() -> None:
    script = (
        "from determined.master._core import _writer_helpers as h\n"
        "from master.test_writer_helpers import _work\n"
        "h.HELPERS.start([_work(1, 3000)]).result()\n"
        "print(h.HELPERS.pids()[0], flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), *sys.path]))
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        assert parent.stdout is not None
        helper = int(parent.stdout.readline())
        assert alive(helper)
    finally:
        parent.kill()
        parent.wait()
    _wait_until_gone(helper)  # it outlived the process that started it, if this fails


def test_a_helper_imports_nothing_heavy() -> None:
    """What a helper process runs (the tile arithmetic, the plain-batch preparation) imports
    neither SQLAlchemy and the models nor FastAPI: each helper is a process of its own, and its
    start-up and memory are paid once per lane."""
    code = (
        "import sys\n"
        "import determined.master._core._writer_helpers, determined.master._api._plain_reports\n"
        "heavy = ('sqlalchemy', 'fastapi', 'starlette', 'determined.master.db')\n"
        "print([name for name in heavy if name in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_helpers_pipes_hold_a_whole_job() -> None:
    """The writer's sends do not wait for the helper to be scheduled: its pipes hold 1 MiB where
    the system allows it (Linux's default limit for a process)."""
    import fcntl

    limit = int(pathlib.Path("/proc/sys/fs/pipe-max-size").read_text())
    helper = _writer_helpers._Helper()
    try:
        for stream in (helper.process.stdin, helper.process.stdout):
            assert stream is not None
            size = fcntl.fcntl(stream.fileno(), fcntl.F_GETPIPE_SZ)
            assert size >= min(limit, _writer_helpers.PIPE_BYTES)
    finally:
        helper.close()


def test_a_helper_runs_at_a_lower_cpu_priority_than_the_master() -> None:
    """A helper's throughput work yields the cores to the master's request handling."""
    helper = _writer_helpers._Helper()
    try:
        helper.send(os.getpid, [()])
        (pid,) = helper.receive()
        assert pid == helper.process.pid
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(
            19, os.getpriority(os.PRIO_PROCESS, 0) + _writer_helpers.HELPER_NICE
        )
    finally:
        helper.close()
