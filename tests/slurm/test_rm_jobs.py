"""The Slurm resource manager's jobs against other users' jobs on the real single-node cluster: a
request Slurm holds back stays unassigned until the job runs, a job cancelled while still pending
is submitted again, one that cannot start the trial fails its launch, and ``reap_orphan``
cancels only det's jobs."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from determined.master.rm.slurm import SlurmResourceManager, job_name, parse_config
from determined.master.testing.rm_suite import EventsRecorder, make_request

pytestmark = pytest.mark.slow

WAIT_S = 60.0


@pytest.fixture
def events() -> EventsRecorder:
    return EventsRecorder(WAIT_S)


@pytest.fixture
def rm(slurm: Any, events: EventsRecorder) -> Iterator[SlurmResourceManager]:
    config = {
        "type": "slurm",
        "slurm_conf": str(slurm.conf),
        "job_storage_root": str(slurm.shared_dir / "rm-jobs"),
        "poll_interval": 0.3,
    }
    manager = SlurmResourceManager(parse_config(config))
    manager.start(events)
    try:
        yield manager
    finally:
        manager.close()


def _wait(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(what)


def _job_of(rm: SlurmResourceManager, allocation_id: str) -> dict[str, Any] | None:
    jobs = [j for j in rm.describe()["jobs"] if j["allocation_id"] == allocation_id]
    return jobs[0] if jobs else None


def test_a_job_slurm_holds_back_is_assigned_once_it_runs(
    slurm: Any, rm: SlurmResourceManager, events: EventsRecorder
) -> None:
    blocker = slurm.sbatch("sleep 600", cpus=slurm.cpus)  # another user's job fills the node
    slurm.wait_for_job(blocker, {"RUNNING"})
    rm.submit(make_request("3.held.1", 1))
    _wait(lambda: (_job_of(rm, "3.held.1") or {}).get("state") == "PENDING", "job PENDING")
    assert "3.held.1" not in events.assigned
    assert rm.queue_state()["debug"]["running"][0]["allocation_id"] == "3.held.1"
    slurm.run("scancel", blocker)
    assignment = events.wait_assigned("3.held.1")
    assert sum(assignment.container_slot_counts) == 1


def test_a_job_cancelled_while_pending_is_submitted_again(
    slurm: Any, rm: SlurmResourceManager, events: EventsRecorder
) -> None:
    blocker = slurm.sbatch("sleep 600", cpus=slurm.cpus)
    slurm.wait_for_job(blocker, {"RUNNING"})
    rm.submit(make_request("3.again.1", 1))
    first = _wait(lambda: (_job_of(rm, "3.again.1") or {}).get("job_id"), "first job id")
    slurm.wait_for_job(first, {"PENDING"})
    slurm.run("scancel", first)

    def resubmitted() -> str | None:
        job_id = (_job_of(rm, "3.again.1") or {}).get("job_id")
        return job_id if job_id not in (None, first) else None

    second = _wait(resubmitted, "a second job")
    slurm.run("scancel", blocker)
    events.wait_assigned("3.again.1")
    assert slurm.job_state(first) == "CANCELLED" and second != first


def test_reap_orphan_cancels_only_det_jobs(slurm: Any, rm: SlurmResourceManager) -> None:
    ours = slurm.sbatch("sleep 600", f"--job-name={job_name('4.old.1')}")
    theirs = slurm.sbatch("sleep 600", "--job-name=someone-else")
    for job in (ours, theirs):
        slurm.wait_for_job(job, {"RUNNING", "PENDING"})
    assert not rm.reap_orphan(int(theirs))
    assert not rm.reap_orphan(int(ours), allocation_id="4.other.1")
    assert rm.reap_orphan(int(ours), allocation_id="4.old.1")
    slurm.wait_for_job(ours, {"CANCELLED"})
    assert slurm.job_state(theirs) in ("RUNNING", "PENDING")
    assert not rm.reap_orphan(int(ours))  # gone already
    assert not rm.reap_orphan(999999)


def test_job_directories_are_removed_once_released(
    slurm: Any, rm: SlurmResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
) -> None:
    from determined.master.testing.rm_suite import python_spec

    rm.submit(make_request("5.clean.1", 1))
    assignment = events.wait_assigned("5.clean.1")
    job_dir = slurm.shared_dir / "rm-jobs" / "5.clean.1"
    assert (job_dir / "nodes.json").is_file()
    rm.launch(python_spec(tmp_path, assignment, "print('bye')\n"))
    assert events.wait_exited("5.clean.1") == (0, None)
    assert events.messages("5.clean.1") == ["bye"]
    rm.release("5.clean.1")
    _wait(lambda: not job_dir.exists(), "job directory removed")


def test_a_job_that_cannot_start_the_trial_fails_the_launch(
    slurm: Any, events: EventsRecorder, tmp_path: pathlib.Path
) -> None:
    """A misconfigured cluster (here a PATH without the Slurm commands, so the job's helper finds
    no scontrol): the job fails before it describes its nodes; the launch reports the error with
    the job's stderr instead of submitting the job again and again."""
    from determined.master.testing.rm_suite import python_spec

    config = {
        "type": "slurm",
        "slurm_conf": str(slurm.conf),
        "job_storage_root": str(slurm.shared_dir / "rm-broken"),
        "poll_interval": 0.3,
        "sbatch_args": ["--export=PATH=/nonexistent"],
    }
    manager = SlurmResourceManager(parse_config(config))
    manager.start(events)
    try:
        manager.submit(make_request("6.broken.1", 1))
        assignment = events.wait_assigned("6.broken.1")
        manager.launch(python_spec(tmp_path, assignment, "print('never')\n"))
        exit_code, error = events.wait_exited("6.broken.1")
        assert exit_code is None and error is not None
        assert "before it could start the trial" in error, error
        assert "scontrol" in error, error  # the job's own stderr says why
    finally:
        manager.close()


def test_experiment_sbatch_args_reach_the_job_and_bad_ones_fail_the_launch(
    slurm: Any, rm: SlurmResourceManager, events: EventsRecorder, tmp_path: pathlib.Path
) -> None:
    """The experiment's ``slurm.sbatch_args`` (upstream's spelling) are added to its jobs; an
    option sbatch refuses fails the trial's launch with sbatch's message (no retry loop)."""
    from determined.master.testing.rm_suite import python_spec

    options = {"slurm": {"sbatch_args": ["--time=7", "--comment=from-the-experiment"]}}
    rm.submit(make_request("7.args.1", 1, options=options))
    events.wait_assigned("7.args.1")
    job_id = (_job_of(rm, "7.args.1") or {})["job_id"]
    shown = slurm.run("scontrol", "show", "job", str(job_id)).stdout
    assert "TimeLimit=00:07:00" in shown and "Comment=from-the-experiment" in shown, shown
    rm.release("7.args.1")

    bad = {"slurm": {"sbatch_args": ["--no-such-sbatch-option"]}}
    rm.submit(make_request("7.bad.1", 1, options=bad))
    assignment = events.wait_assigned("7.bad.1")
    rm.launch(python_spec(tmp_path, assignment, "print('never')\n"))
    exit_code, error = events.wait_exited("7.bad.1")
    assert exit_code is None and "sbatch refused the job" in str(error), error
