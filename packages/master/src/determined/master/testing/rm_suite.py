"""The conformance suite for resource managers.

Subclass it in a test module with a name pytest collects, and provide a ``resource_manager``
fixture that returns a fresh, not yet started ``ResourceManager`` whose ``default`` pool has at
least 2 slots and fits a gang of 2 slots on one node; the suite starts it with an
:class:`EventsRecorder` and closes it after each test::

    from determined.master.testing.rm_suite import ResourceManagerSuite

    class TestMyResourceManager(ResourceManagerSuite):
        wait_s = 60.0  # a slow cluster

        @pytest.fixture
        def resource_manager(self):
            return MyResourceManager(address=...)

Every test runs real processes (``sys.executable`` with a small script) and waits for the events
the resource manager reports; none sleeps.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from determined.master.rm import (
    AllocationRequest,
    Assignment,
    LaunchSpec,
    LogLine,
    ResourceManager,
)

WAIT_S = 30.0
"""Default longest wait for one event."""


class EventsRecorder:
    """A ``ResourceManagerEvents`` that records every call; tests wait on conditions over it."""

    def __init__(self, wait_s: float = WAIT_S) -> None:
        self.wait_s = wait_s
        self.cond = threading.Condition()
        self.calls: list[tuple[str, str]] = []
        self.assigned: dict[str, Assignment] = {}
        self.started: dict[str, int] = {}
        self.logs: dict[str, list[LogLine]] = {}
        self.batches: dict[str, int] = {}
        self.exited: dict[str, tuple[int | None, str | None]] = {}
        self.exit_counts: dict[str, int] = {}
        self.on_assigned: Callable[[AllocationRequest, Assignment], None] | None = None

    def _record(self, name: str, allocation_id: str) -> None:
        with self.cond:
            self.calls.append((name, allocation_id))
            self.cond.notify_all()

    def allocation_assigned(self, request: AllocationRequest, assignment: Assignment) -> None:
        with self.cond:
            self.assigned[request.allocation_id] = assignment
        self._record("assigned", request.allocation_id)
        if self.on_assigned is not None:
            self.on_assigned(request, assignment)

    def allocation_started(self, allocation_id: str, pid: int) -> None:
        with self.cond:
            self.started[allocation_id] = pid
        self._record("started", allocation_id)

    def allocation_log(self, allocation_id: str, lines: list[LogLine]) -> None:
        with self.cond:
            self.logs.setdefault(allocation_id, []).extend(lines)
            self.batches[allocation_id] = self.batches.get(allocation_id, 0) + 1
        self._record("log", allocation_id)

    def allocation_exited(
        self, allocation_id: str, exit_code: int | None, error: str | None
    ) -> None:
        with self.cond:
            self.exited[allocation_id] = (exit_code, error)
            self.exit_counts[allocation_id] = self.exit_counts.get(allocation_id, 0) + 1
        self._record("exited", allocation_id)

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> None:
        """Wait until ``predicate()`` (evaluated under the lock) holds; fail after ``timeout``."""
        with self.cond:
            if not self.cond.wait_for(predicate, self.wait_s if timeout is None else timeout):
                raise AssertionError(f"timed out; calls so far: {self.calls}")

    def wait_assigned(self, allocation_id: str) -> Assignment:
        self.wait_for(lambda: allocation_id in self.assigned)
        return self.assigned[allocation_id]

    def wait_started(self, allocation_id: str) -> int:
        self.wait_for(lambda: allocation_id in self.started)
        return self.started[allocation_id]

    def wait_exited(self, allocation_id: str) -> tuple[int | None, str | None]:
        self.wait_for(lambda: allocation_id in self.exited)
        return self.exited[allocation_id]

    def wait_logged(self, allocation_id: str, message: str) -> None:
        """Wait until the allocation wrote a line ``message``."""
        self.wait_for(lambda: message in self._messages_locked(allocation_id))

    def messages(self, allocation_id: str) -> list[str]:
        with self.cond:
            return self._messages_locked(allocation_id)

    def _messages_locked(self, allocation_id: str) -> list[str]:
        return [line.message for line in self.logs.get(allocation_id, [])]


def make_request(allocation_id: str, slots: int = 1, **kwargs: Any) -> AllocationRequest:
    """``make_request("1.a.1", slots=2, priority=10)``: an AllocationRequest with defaults."""
    kwargs.setdefault("task_id", allocation_id.split(".")[0])
    kwargs.setdefault("job_id", "exp-1")
    kwargs.setdefault("submitted_at", time.time())
    return AllocationRequest(allocation_id=allocation_id, slots=slots, **kwargs)


def python_spec(work: pathlib.Path, assignment: Assignment, code: str, **env: str) -> LaunchSpec:
    """A LaunchSpec running ``code`` with this interpreter in ``work/<allocation id>``, with a
    ClusterInfo file (``DET_CLUSTER_INFO``) that describes ``assignment``."""
    aid = assignment.allocation_id
    cwd = work / aid
    cwd.mkdir(parents=True)
    (cwd / "main.py").write_text(code)
    info = {
        "master_url": "http://127.0.0.1:1",
        "cluster_id": "conformance",
        "agent_id": "agent",
        "slot_ids": list(assignment.slot_ids),
        "task_id": aid.split(".")[0],
        "allocation_id": aid,
        "session_token": "",
        "task_type": "TRIAL",
        "rendezvous_info": {
            "container_addrs": list(assignment.container_addrs),
            "container_rank": 0,
            "container_slot_counts": list(assignment.container_slot_counts),
        },
    }
    info_path = work / f"{aid}.cluster-info.json"
    info_path.write_text(json.dumps(info))
    child_env = dict(os.environ, DET_CLUSTER_INFO=str(info_path), PYTHONUNBUFFERED="1", **env)
    return LaunchSpec(aid, [sys.executable, "main.py"], str(cwd), child_env)


REPORT = """\
import json, os, sys
info = json.load(open(os.environ["DET_CLUSTER_INFO"]))
rank = info["rendezvous_info"]["container_rank"]
print("cluster-info", info["allocation_id"], "rank", rank, "slots", len(info["slot_ids"]))
for i in range(5):
    print("line", i)
print("on stderr", file=sys.stderr)
"""

SLEEPER = """\
import signal
print("ready", flush=True)
while True:
    signal.pause()
"""

PREEMPTIBLE = """\
import signal
def on_term(signum, frame):
    print("preempted", flush=True)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    signal.pause()
"""


class ResourceManagerSuite:
    """Tests every ResourceManager must pass.

    The subclass provides the ``resource_manager`` fixture (a fresh, not yet started RM); ``rm``
    is that RM, started with ``events`` and closed after the test.
    """

    wait_s = WAIT_S
    """Longest wait for one event; raise it for slow clusters."""

    @pytest.fixture
    def events(self) -> EventsRecorder:
        return EventsRecorder(self.wait_s)

    @pytest.fixture
    def rm(
        self, resource_manager: ResourceManager, events: EventsRecorder
    ) -> Iterator[ResourceManager]:
        resource_manager.start(events)
        try:
            yield resource_manager
        finally:
            resource_manager.close()

    def launch(
        self,
        rm: ResourceManager,
        events: EventsRecorder,
        tmp_path: pathlib.Path,
        aid: str,
        code: str,
        slots: int = 1,
    ) -> Assignment:
        """Submit, wait for the assignment, launch ``code`` and wait until it started."""
        rm.submit(make_request(aid, slots))
        assignment = events.wait_assigned(aid)
        rm.launch(python_spec(tmp_path, assignment, code))
        events.wait_started(aid)
        return assignment

    # ------------------------------------------------------------------------------ capacity

    def test_describes_its_slots(self, rm: ResourceManager) -> None:
        assert isinstance(rm, ResourceManager)
        slots = rm.slot_count()
        assert slots >= 2
        described = rm.describe()
        assert {"type", "slots", "slot_type", "used", "queued"} <= set(described)
        assert described["slots"] == slots
        assert described["slot_type"] in ("cpu", "cuda")
        assert (described["used"], described["queued"]) == (0, 0)
        json.dumps(described)

    def test_gang_is_assigned_together(self, rm: ResourceManager, events: EventsRecorder) -> None:
        rm.submit(make_request("1.gang.1", 2))
        assignment = events.wait_assigned("1.gang.1")
        assert assignment.allocation_id == "1.gang.1"
        assert sum(assignment.container_slot_counts) == 2
        assert len(assignment.container_addrs) == len(assignment.container_slot_counts)
        assert rm.describe()["used"] == 2
        rm.release("1.gang.1")
        assert rm.describe()["used"] == 0

    def test_queueing_when_full(self, rm: ResourceManager, events: EventsRecorder) -> None:
        total = rm.slot_count()
        rm.submit(make_request("1.all.1", total))
        rm.submit(make_request("1.next.1", 1))
        assignment = events.wait_assigned("1.all.1")
        assert sum(assignment.container_slot_counts) == total
        assert rm.describe()["queued"] == 1
        assert "1.next.1" not in events.assigned
        rm.release("1.all.1")
        events.wait_assigned("1.next.1")
        assert rm.describe()["queued"] == 0

    def test_withdrawn_request_is_never_assigned(
        self, rm: ResourceManager, events: EventsRecorder
    ) -> None:
        rm.submit(make_request("1.all.1", rm.slot_count()))
        events.wait_assigned("1.all.1")
        rm.submit(make_request("1.gone.1", 1))
        rm.withdraw("1.gone.1")
        rm.withdraw("no-such-allocation")
        assert rm.describe()["queued"] == 0
        rm.release("1.all.1")
        rm.submit(make_request("1.later.1", 1))
        events.wait_assigned("1.later.1")
        assert "1.gone.1" not in events.assigned

    def test_job_max_slots_holds_requests_back_until_raised(
        self, rm: ResourceManager, events: EventsRecorder
    ) -> None:
        rm.submit(make_request("1.a.1", 1, job_id="capped", max_slots=1))
        rm.submit(make_request("1.b.1", 1, job_id="capped", max_slots=1))
        events.wait_assigned("1.a.1")
        assert rm.describe()["queued"] == 1
        rm.set_job_limits("capped", max_slots=None)
        events.wait_assigned("1.b.1")

    def test_unknown_resource_pool_is_refused(self, rm: ResourceManager) -> None:
        problem = rm.validate(1, resource_pool="no-such-pool")
        assert problem is not None and "no-such-pool" in problem
        with pytest.raises(ValueError):
            rm.submit(make_request("1.pool.1", 1, resource_pool="no-such-pool"))
        assert rm.describe()["queued"] == 0

    def test_requests_that_can_never_fit_are_refused(self, rm: ResourceManager) -> None:
        total = rm.slot_count()
        assert rm.validate(1) is None
        assert rm.validate(total) is None
        assert rm.validate(total + 1) is not None
        assert rm.validate(-1) is not None

    def test_duplicate_allocation_id_is_refused(
        self, rm: ResourceManager, events: EventsRecorder
    ) -> None:
        rm.submit(make_request("1.dup.1", 1))
        with pytest.raises(ValueError):
            rm.submit(make_request("1.dup.1", 1))
        events.wait_assigned("1.dup.1")
        with pytest.raises(ValueError):
            rm.submit(make_request("1.dup.1", 1))

    def test_launch_of_an_unassigned_allocation_is_refused(
        self, rm: ResourceManager, tmp_path: pathlib.Path
    ) -> None:
        assignment = Assignment("9.none.1", [0], ["127.0.0.1"], [1])
        with pytest.raises(ValueError):
            rm.launch(python_spec(tmp_path, assignment, "print('never')\n"))

    # ------------------------------------------------------------------------------ processes

    def test_process_reads_its_cluster_info_and_its_logs_come_back(
        self, rm: ResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
    ) -> None:
        self.launch(rm, events, tmp_path, "2.info.1", REPORT, slots=2)
        assert events.wait_exited("2.info.1") == (0, None)
        assert events.exit_counts["2.info.1"] == 1
        assert events.started["2.info.1"] > 0
        lines = events.logs["2.info.1"]
        stdout = [line.message for line in lines if line.stdtype == "stdout"]
        assert stdout == ["cluster-info 2.info.1 rank 0 slots 2"] + [f"line {i}" for i in range(5)]
        assert [line.message for line in lines if line.stdtype == "stderr"] == ["on stderr"]
        order = [name for name, aid in events.calls if aid == "2.info.1"]
        assert order[:2] == ["assigned", "started"] and order[-1] == "exited", order

    def test_exit_code_is_reported(
        self, rm: ResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
    ) -> None:
        self.launch(rm, events, tmp_path, "2.code.1", "import sys\nsys.exit(3)\n")
        assert events.wait_exited("2.code.1") == (3, None)
        rm.release("2.code.1")
        assert rm.describe()["used"] == 0

    def test_kill(
        self, rm: ResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
    ) -> None:
        self.launch(rm, events, tmp_path, "2.kill.1", SLEEPER)
        events.wait_logged("2.kill.1", "ready")
        rm.kill("2.kill.1")
        assert events.wait_exited("2.kill.1") == (-signal.SIGKILL, None)

    def test_terminate_ends_a_process_that_does_not_handle_it(
        self, rm: ResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
    ) -> None:
        self.launch(rm, events, tmp_path, "2.term.1", SLEEPER)
        events.wait_logged("2.term.1", "ready")
        rm.terminate("2.term.1")
        assert events.wait_exited("2.term.1") == (-signal.SIGTERM, None)

    def test_preemption_signal_reaches_the_process_then_kill_ends_it(
        self, rm: ResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
    ) -> None:
        self.launch(rm, events, tmp_path, "2.preempt.1", PREEMPTIBLE)
        events.wait_logged("2.preempt.1", "ready")
        rm.terminate("2.preempt.1")
        events.wait_logged("2.preempt.1", "preempted")
        assert "2.preempt.1" not in events.exited  # it handled the signal and runs on
        rm.kill("2.preempt.1")  # what the master does when the preemption timeout passes
        assert events.wait_exited("2.preempt.1") == (-signal.SIGKILL, None)

    def test_release_of_a_running_allocation_kills_it(
        self, rm: ResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
    ) -> None:
        self.launch(rm, events, tmp_path, "2.release.1", SLEEPER)
        events.wait_logged("2.release.1", "ready")
        rm.release("2.release.1")
        exit_code, _ = events.wait_exited("2.release.1")
        assert exit_code == -signal.SIGKILL
        assert rm.describe()["used"] == 0

    def test_close_ends_every_running_allocation(
        self, rm: ResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
    ) -> None:
        self.launch(rm, events, tmp_path, "2.close.1", SLEEPER)
        events.wait_logged("2.close.1", "ready")
        rm.close()
        with events.cond:
            assert events.exit_counts.get("2.close.1") == 1, events.calls
        with pytest.raises(RuntimeError):
            rm.launch(python_spec(tmp_path / "late", events.assigned["2.close.1"], "print(1)\n"))
