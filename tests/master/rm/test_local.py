"""The local resource manager with real process groups."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from determined.master.rm import LaunchSpec, LocalResourceManager, resource_manager

PY = sys.executable


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(*pids: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(gone(pid) for pid in pids):
        assert time.monotonic() < deadline, f"still alive: {[p for p in pids if not gone(p)]}"
        time.sleep(0.01)


def wait_file(path: pathlib.Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.01)
    return path.read_text().strip()


def run(
    rm: LocalResourceManager,
    events: Any,
    make_request: Callable[..., Any],
    launch_spec: LaunchSpec,
    slots: int = 1,
) -> None:
    rm.submit(make_request(launch_spec.allocation_id, slots))
    events.wait_assigned(launch_spec.allocation_id)
    rm.launch(launch_spec)


def python_code(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


# A child that starts a grandchild (writing its pid), reports "ready", then sleeps.
FAMILY = """
import subprocess, sys, time, pathlib
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pathlib.Path(sys.argv[1]).write_text(str(grandchild.pid))
print("ready", flush=True)
time.sleep(600)
"""


def test_log_lines_are_parsed_in_order(local_rm, events, make_request, make_spec, tmp_path):
    code = """
        import sys
        print("plain line")
        print("[rank=1] from rank one")
        print("INFO: [123] det.core: hello")
        print("[rank=2] WARNING: careful")
        print("DEBUG: details")
        print("ERROR: on stderr", file=sys.stderr)
        print("[rank=0] CRITICAL: very bad", file=sys.stderr)
        print("INFORMATION: not a level", file=sys.stderr)
        sys.stdout.write("bar 1\\rbar 2\\r\\nlast without newline")
    """
    run(local_rm, events, make_request, make_spec("1.a.1", python_code(code), tmp_path))
    assert events.wait_exited("1.a.1") == (0, None)
    lines = events.logs["1.a.1"]
    stdout = [(x.rank_id, x.level, x.message) for x in lines if x.stdtype == "stdout"]
    stderr = [(x.rank_id, x.level, x.message) for x in lines if x.stdtype == "stderr"]
    assert stdout == [
        (None, None, "plain line"),
        (1, None, "from rank one"),
        (None, "LOG_LEVEL_INFO", "[123] det.core: hello"),
        (2, "LOG_LEVEL_WARNING", "careful"),
        (None, "LOG_LEVEL_DEBUG", "details"),
        (None, None, "bar 1"),
        (None, None, "bar 2"),
        (None, None, "last without newline"),
    ]
    assert stderr == [
        (None, "LOG_LEVEL_ERROR", "on stderr"),
        (0, "LOG_LEVEL_CRITICAL", "very bad"),
        (None, None, "INFORMATION: not a level"),
    ]
    assert all(line.timestamp > 0 for line in lines)
    # started, logs, then exactly one exit, last.
    names = [name for name, allocation_id in events.calls if allocation_id == "1.a.1"]
    assert names[:2] == ["assigned", "started"]
    assert names[-1] == "exited" and names.count("exited") == 1


def test_logs_are_batched(local_rm, events, make_request, make_spec, tmp_path):
    code = "for i in range(1200): print(i)"
    run(local_rm, events, make_request, make_spec("1.b.1", python_code(code), tmp_path))
    events.wait_exited("1.b.1")
    assert events.messages("1.b.1") == [str(i) for i in range(1200)]
    assert 3 <= events.batches["1.b.1"] < 1200


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("pass", 0),
        ("raise SystemExit(3)", 3),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    ],
    ids=["zero", "three", "sigkill"],
)
def test_exit_codes(local_rm, events, make_request, make_spec, tmp_path, code, expected):
    run(local_rm, events, make_request, make_spec("1.c.1", python_code(code), tmp_path))
    assert events.wait_exited("1.c.1") == (expected, None)
    assert events.exit_counts["1.c.1"] == 1


def test_missing_interpreter(local_rm, events, make_request, make_spec, tmp_path):
    run(local_rm, events, make_request, make_spec("1.d.1", ["no-such-python3", "x.py"], tmp_path))
    exit_code, error = events.wait_exited("1.d.1")
    assert exit_code is None
    assert error is not None and "no-such-python3" in error
    assert "1.d.1" not in events.started
    assert events.logs["1.d.1"][0].level == "LOG_LEVEL_ERROR"
    # The slots stay taken until the master releases them.
    assert local_rm.describe()["used"] == 1
    local_rm.release("1.d.1")
    assert local_rm.describe()["used"] == 0


def test_startup_hook_runs_first(local_rm, events, make_request, make_spec, tmp_path):
    (tmp_path / "startup-hook.sh").write_text("echo hook ran\ntouch hook-marker\n")
    code = "import os; print('marker' if os.path.exists('hook-marker') else 'no marker')"
    launch_spec = make_spec("1.e.1", python_code(code), tmp_path, startup_hook="startup-hook.sh")
    run(local_rm, events, make_request, launch_spec)
    assert events.wait_exited("1.e.1") == (0, None)
    assert events.messages("1.e.1") == ["hook ran", "marker"]


def test_failing_startup_hook_fails_the_launch(local_rm, events, make_request, make_spec, tmp_path):
    (tmp_path / "my hook.sh").write_text("echo hook failing >&2\nexit 5\n")
    launch_spec = make_spec(
        "1.f.1", python_code("print('should not run')"), tmp_path, startup_hook="my hook.sh"
    )
    run(local_rm, events, make_request, launch_spec)
    assert events.wait_exited("1.f.1") == (5, None)
    assert events.messages("1.f.1") == ["hook failing"]


def test_env_marks_the_allocation(local_rm, events, make_request, make_spec, tmp_path):
    code = "import os; print(os.environ['DET_ALLOCATION_ID'], os.environ['MY_VAR'], os.getcwd())"
    launch_spec = make_spec("1.g.1", python_code(code), tmp_path, env={"MY_VAR": "x y"})
    run(local_rm, events, make_request, launch_spec)
    events.wait_exited("1.g.1")
    assert events.messages("1.g.1") == [f"1.g.1 x y {tmp_path}"]


@pytest.mark.parametrize("method", ["terminate", "kill"])
def test_stop_reaches_grandchildren(local_rm, events, make_request, make_spec, tmp_path, method):
    pid_file = tmp_path / "grandchild.pid"
    argv = [PY, "-c", FAMILY, str(pid_file)]
    run(local_rm, events, make_request, make_spec("1.h.1", argv, tmp_path))
    child = events.wait_started("1.h.1")
    grandchild = int(wait_file(pid_file))
    events.wait_for(lambda: "ready" in events.messages("1.h.1"))
    getattr(local_rm, method)("1.h.1")
    expected = -signal.SIGTERM if method == "terminate" else -signal.SIGKILL
    assert events.wait_exited("1.h.1") == (expected, None)
    wait_gone(child, grandchild)


def test_leftovers_are_killed_when_the_leader_exits(
    local_rm, events, make_request, make_spec, tmp_path
):
    code = """
        import subprocess, sys, pathlib
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pathlib.Path("left.pid").write_text(str(p.pid))
    """
    run(local_rm, events, make_request, make_spec("1.i.1", python_code(code), tmp_path))
    assert events.wait_exited("1.i.1") == (0, None)
    wait_gone(int((tmp_path / "left.pid").read_text()))


def test_gang_two_slots_three_requests(events, make_request, make_spec, tmp_path):
    rm = LocalResourceManager(slots=2, slot_type="cpu")
    rm.start(events)
    try:
        for name in ("2.a.1", "2.b.1", "2.c.1"):
            rm.submit(make_request(name, 1, job_id="exp-2"))
        events.wait_for(lambda: len(events.assigned) == 2)
        assert set(events.assigned) == {"2.a.1", "2.b.1"}
        assert sorted(s for a in events.assigned.values() for s in a.slot_ids) == [0, 1]
        assert rm.describe() | {"gpus": []} == {
            "type": "local",
            "slots": 2,
            "slot_type": "cpu",
            "used": 2,
            "queued": 1,
            "running": 0,
            "gpus": [],
        }
        assignment = events.assigned["2.a.1"]
        assert assignment.container_addrs == ["127.0.0.1"]
        assert assignment.container_slot_counts == [1]
        assert assignment.gpu_uuids == []
        rm.launch(make_spec("2.a.1", python_code("pass"), tmp_path))
        events.wait_exited("2.a.1")
        assert "2.c.1" not in events.assigned  # exit alone frees nothing
        rm.release("2.a.1")
        assert events.wait_assigned("2.c.1").slot_ids == assignment.slot_ids
    finally:
        rm.close()


def test_zero_slot_requests_start_on_a_full_machine(local_rm, events, make_request):
    local_rm.submit(make_request("3.a.1", 2))
    local_rm.submit(make_request("3.b.1", 2))
    local_rm.submit(make_request("3.c.1", 0))
    events.wait_for(lambda: {"3.a.1", "3.c.1"} <= set(events.assigned))
    assert events.assigned["3.c.1"].slot_ids == []
    assert "3.b.1" not in events.assigned
    local_rm.withdraw("3.b.1")
    local_rm.withdraw("unknown")
    assert local_rm.describe()["queued"] == 0


def test_withdraw_of_an_assigned_allocation_frees_it(local_rm, events, make_request):
    local_rm.submit(make_request("4.a.1", 2))
    local_rm.submit(make_request("4.b.1", 2))
    events.wait_assigned("4.a.1")
    local_rm.withdraw("4.a.1")
    events.wait_assigned("4.b.1")


def test_release_of_a_running_allocation_kills_it(
    local_rm, events, make_request, make_spec, tmp_path
):
    argv = python_code("import time; print('up', flush=True); time.sleep(600)")
    run(local_rm, events, make_request, make_spec("5.a.1", argv, tmp_path))
    events.wait_for(lambda: "up" in events.messages("5.a.1"))
    local_rm.release("5.a.1")
    assert events.wait_exited("5.a.1") == (-signal.SIGKILL, None)


def test_close_leaves_no_process_behind(events, make_request, make_spec, tmp_path):
    rm = LocalResourceManager(slots=2, slot_type="cpu")
    rm.start(events)
    pids = []
    for name in ("6.a.1", "6.b.1"):
        pid_file = tmp_path / f"{name}.pid"
        run(rm, events, make_request, make_spec(name, [PY, "-c", FAMILY, str(pid_file)], tmp_path))
        pids += [events.wait_started(name), int(wait_file(pid_file))]
    rm.submit(make_request("6.c.1", 1))  # stays queued
    rm.close()
    assert set(events.exited) == {"6.a.1", "6.b.1"}  # delivered before close returned
    wait_gone(*pids)
    with pytest.raises(RuntimeError, match="closed"):
        rm.launch(make_spec("6.c.1", ["true"], tmp_path))


def test_launch_and_submit_errors(local_rm, events, make_request, make_spec, tmp_path):
    with pytest.raises(ValueError, match="is not assigned"):
        local_rm.launch(make_spec("7.a.1", ["true"], tmp_path))
    with pytest.raises(ValueError, match="slots_per_trial 3 exceeds the 2 slots of this machine"):
        local_rm.submit(make_request("7.b.1", 3))
    with pytest.raises(ValueError, match="resource_pool"):
        local_rm.submit(make_request("7.c.1", 1, resource_pool="gpu-pool"))
    run(local_rm, events, make_request, make_spec("7.d.1", python_code("pass"), tmp_path))
    with pytest.raises(ValueError, match="launched already"):
        local_rm.launch(make_spec("7.d.1", ["true"], tmp_path))
    with pytest.raises(ValueError, match="submitted already"):
        local_rm.submit(make_request("7.d.1", 1))
    events.wait_exited("7.d.1")


def test_validate_and_describe():
    rm = LocalResourceManager(slots=4, slot_type="cpu")
    assert rm.slot_count() == 4
    assert rm.validate(4) is None
    assert rm.validate(0) is None
    assert rm.validate(8) == "slots_per_trial 8 exceeds the 4 slots of this machine"
    assert rm.validate(-1) == "slots_per_trial must be an int >= 0, got -1"
    assert rm.validate(3, max_slots=2) == "slots_per_trial 3 exceeds resources.max_slots 2"
    assert rm.describe()["slot_type"] == "cpu"
    assert LocalResourceManager(slot_type="cpu").slot_count() >= 1
    with pytest.raises(ValueError, match="slot_type"):
        LocalResourceManager(slot_type="tpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="slots"):
        LocalResourceManager(slots=-2, slot_type="cpu")
    rm.close()


def test_set_job_limits_wakes_the_scheduler(local_rm, events, make_request):
    local_rm.set_job_limits("exp-9", max_slots=1)
    local_rm.submit(make_request("9.a.1", 1, job_id="exp-9"))
    local_rm.submit(make_request("9.b.1", 1, job_id="exp-9"))
    events.wait_assigned("9.a.1")
    assert local_rm.describe()["queued"] == 1
    local_rm.set_job_limits("exp-9", max_slots=None)
    events.wait_assigned("9.b.1")


def _detached(tmp_path: pathlib.Path, marker: str | None) -> subprocess.Popen[bytes]:
    env = {"PATH": os.environ.get("PATH", "")}
    if marker is not None:
        env["DET_ALLOCATION_ID"] = marker
    return subprocess.Popen(
        [PY, "-c", FAMILY, str(tmp_path / f"{marker}.pid")],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )


def test_reap_orphan(tmp_path):
    rm = LocalResourceManager(slots=1, slot_type="cpu")
    ours = _detached(tmp_path, "8.a.1")
    unrelated = _detached(tmp_path, None)
    try:
        grandchild = int(wait_file(tmp_path / "8.a.1.pid"))
        wait_file(tmp_path / "None.pid")
        assert rm.reap_orphan(unrelated.pid) is False
        assert rm.reap_orphan(ours.pid, allocation_id="8.b.1") is False
        assert rm.reap_orphan(os.getpid()) is False
        assert unrelated.poll() is None and ours.poll() is None
        assert rm.reap_orphan(ours.pid) is True
        assert ours.wait(10) == -signal.SIGKILL
        wait_gone(grandchild)
        assert rm.reap_orphan(ours.pid) is False  # nothing left
        assert unrelated.poll() is None
    finally:
        for popen in (ours, unrelated):
            if popen.poll() is None:
                os.killpg(popen.pid, signal.SIGKILL)
                popen.wait(10)


def test_resource_manager_facade():
    rm = resource_manager({"type": "local", "slots": 3, "slot_type": "cpu"})
    assert isinstance(rm, LocalResourceManager)
    assert rm.describe()["slots"] == 3
    assert isinstance(resource_manager({}), LocalResourceManager)  # idempotent set-up
    with pytest.raises(ValueError, match=r"resource_manager\.type: no resource manager plugin"):
        resource_manager({"type": "kubernetes"})
    with pytest.raises(ValueError, match=r"resource_manager\.slots"):
        resource_manager({"slots": "8"})
    with pytest.raises(ValueError, match=r"resource_manager\.slot_type"):
        resource_manager({"slot_type": "gpu"})
    with pytest.raises(ValueError, match=r"resource_manager\.bogus"):
        resource_manager({"bogus": 1})
    with pytest.raises(ValueError, match=r"resource_manager\.scheduler\.type"):
        resource_manager({"scheduler": {"type": "fair_share"}})


@pytest.mark.skipif(LocalResourceManager(slot_type="auto").slot_type != "cuda", reason="no GPU")
def test_gpu_slots_set_cuda_visible_devices(events, make_request, make_spec, tmp_path):
    rm = LocalResourceManager(slots=1, slot_type="cuda")
    rm.start(events)
    try:
        code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
        run(rm, events, make_request, make_spec("10.a.1", python_code(code), tmp_path))
        events.wait_exited("10.a.1")
        assignment = events.assigned["10.a.1"]
        assert events.messages("10.a.1") == [",".join(map(str, assignment.slot_ids))]
        assert len(assignment.gpu_uuids) == 1
    finally:
        rm.close()


def test_startup_hook_exports_reach_the_trial(local_rm, events, make_request, make_spec, tmp_path):
    # Upstream sources startup-hook.sh, so what it exports is in the trial's environment.
    (tmp_path / "startup-hook.sh").write_text("export FROM_HOOK=hello-from-hook\n")
    code = "import os; print(os.environ.get('FROM_HOOK', 'missing'))"
    launch_spec = make_spec("1.h.1", python_code(code), tmp_path, startup_hook="startup-hook.sh")
    run(local_rm, events, make_request, launch_spec)
    assert events.wait_exited("1.h.1") == (0, None)
    assert events.messages("1.h.1") == ["hello-from-hook"]
