"""A trial's exit is noticed by process wait, also when a process outside its group holds its pipes.

A launcher (``determined.launch.torch_distributed``) starts torchrun in a session of its own, so a
process of the trial may hold the trial's stdout and stderr after the trial's process group is gone.
The master used to wait 5 s for the pipes, then report the exit and leave that process running; now
it kills every process carrying the allocation's ``DET_ALLOCATION_ID`` and reports the exit at once.

The test proves "at once" by cause, not by a clock: the pipe grace is made far longer than the
test's wait, so the experiment completes in time only if the kill closed the pipes (a wall-clock
bound failed once in CI on a loaded machine, 8.7 s from the trial's last line to its end time).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from process_tree import alive

from determined.master._core._trial_exits import UNSENT_SIGKILL
from determined.master.rm import _process

ESCAPED = """
import subprocess, time
child = subprocess.Popen(["sleep", "300"], start_new_session=True)  # inherits stdout/stderr
print("escaped", child.pid, "done at", time.time(), flush=True)
"""


def _single_trial(api: Any, tmp_path: pathlib.Path, name: str, script: str) -> int:
    """An experiment of one trial running ``script`` (never restarted); its id."""
    context = tmp_path / "context"
    context.mkdir(exist_ok=True)
    (context / f"{name}.py").write_text(script)
    config = {
        "name": name,
        "entrypoint": f"python3 {name}.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": 0,
    }
    return int(api.create_experiment(config, context))


def test_an_escaped_process_does_not_delay_the_exit(
    api: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the master runs in this process: waiting out the pipes would outlast the wait below
    monkeypatch.setattr(_process, "PIPE_GRACE_S", 3600.0)
    exp_id = _single_trial(api, tmp_path, "escape", ESCAPED)
    assert api.wait_experiment(exp_id, timeout=120) == "STATE_COMPLETED", api.debug(exp_id)
    trial = api.trials(exp_id)[0]
    logs = "".join(api.logs(trial["id"]))
    pid = int(logs.split("escaped ", 1)[1].split()[0])
    api.wait_for(lambda: not alive(pid), 30, f"the escaped process {pid} to be killed")


def test_a_sigkill_the_master_did_not_send_is_named(api: Any, tmp_path: pathlib.Path) -> None:
    """A trial killed from outside (the kernel's out-of-memory killer, say) ends in ERROR with an
    exit message that says the master did not send the signal; a kill the master sent does not."""
    die = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    exp_id = _single_trial(api, tmp_path, "die", die)
    assert api.wait_experiment(exp_id, timeout=120) == "STATE_ERROR", api.debug(exp_id)
    logs = "".join(api.logs(api.trials(exp_id)[0]["id"]))
    assert "exited with code -9" in logs and UNSENT_SIGKILL in logs, logs

    wait = "print('waiting', flush=True)\nimport time\ntime.sleep(300)\n"
    exp_id = _single_trial(api, tmp_path, "wait", wait)
    trial_id = api.wait_for(lambda: api.trials(exp_id) and api.trials(exp_id)[0]["id"], 60)
    api.wait_for(lambda: "waiting" in "".join(api.logs(trial_id)), 120, "the trial to run")
    api.post(f"/api/v1/experiments/{exp_id}/kill")
    assert api.wait_experiment(exp_id, timeout=120) == "STATE_CANCELED", api.debug(exp_id)
    logs = "".join(api.logs(trial_id))
    assert "exited with code -9" in logs and UNSENT_SIGKILL not in logs, logs


def test_an_escaped_process_is_killed_only_for_its_own_master() -> None:
    """``kill_marked`` looks for the allocation id and the master's cluster id: another master's
    allocation of the same id (experiment 1 of two masters created in the same second) is not
    its business."""
    import os
    import subprocess
    import sys

    env = {**os.environ, _process.ALLOCATION_ENV: "1.same.1", _process.CLUSTER_ENV: "cluster-b"}
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True
    )
    try:
        assert _process.kill_marked("1.same.1", "cluster-a") == 0
        assert stranger.poll() is None
        assert _process.kill_marked("1.same.1", "cluster-b") == 1
        assert stranger.wait(timeout=10) == -9
    finally:
        stranger.kill()
        stranger.wait()
