"""A trial's life on the slurm RM: pause and resume, a job cancelled from outside det, det's kill,
and a crash of det-master while the trial's job runs.

A real master on the session's Slurm cluster (``slurm_master``) runs ``trials/steps.py``, a Core
API trial of 40 short steps that checkpoints every 5 and resumes from its latest checkpoint.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from e2e.harness import MasterAPI
from slurm_cluster import FINAL_STATES, SlurmCluster

pytestmark = pytest.mark.slow

TRIALS = pathlib.Path(__file__).resolve().parent / "trials"
TIMEOUT = 240
CONFIG = {
    "entrypoint": "python3 steps.py",
    "resources": {"slots_per_trial": 1},
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": 40},
    "max_restarts": 2,
}


def _det_jobs(slurm: SlurmCluster, since: set[str], exp: int) -> dict[str, tuple[str, str]]:
    """The Slurm jobs of experiment ``exp``'s trials (name ``det-<exp>.<uuid>.<n>``, the trial's
    allocation id) that are not in ``since`` (the jobs earlier tests on this cluster left): job id →
    (name, state). The experiment's checkpoint GC task is a job too (``det-<uuid>.1``), not
    counted here: it runs when the experiment ends, whatever the trial's jobs did."""
    out = slurm.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T").stdout
    jobs = {}
    for line in out.splitlines():
        job_id, name, state = line.split("|")
        if name.startswith(f"det-{exp}.") and job_id not in since:
            jobs[job_id] = (name, state)
    return jobs


def _running_job(api: MasterAPI, slurm: SlurmCluster, since: set[str], exp: int) -> str:
    def running() -> str | None:
        ids = [i for i, (_, state) in _det_jobs(slurm, since, exp).items() if state == "RUNNING"]
        return ids[0] if len(ids) == 1 else None

    return str(api.wait_for(running, 60, "det's job RUNNING in Slurm"))


def _checkpointed(api: MasterAPI, trial_id: int, at_least: int = 1) -> None:
    api.wait_for(
        lambda: len(api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]) >= at_least,
        TIMEOUT,
        f"{at_least} checkpoint(s) of trial {trial_id}",
    )


def _resumed_step(logs: str) -> int:
    found = re.search(r"resumed from checkpoint \S+ at step (\d+)", logs)
    assert found, logs
    return int(found.group(1))


def test_job_scancelled_from_outside_restarts_from_checkpoint(
    slurm_master: Callable[..., Any], slurm: SlurmCluster
) -> None:
    before = set(slurm.job_states())
    api = MasterAPI(slurm_master().url)
    exp = api.create_experiment({**CONFIG, "name": "scancel-me"}, TRIALS)
    trial_id = api.wait_for(lambda: [t["id"] for t in api.trials(exp)], 60, "the trial")[0]
    job_id = _running_job(api, slurm, before, exp)
    _checkpointed(api, trial_id)

    slurm.run("scancel", job_id)  # an admin, a time limit or a node failure: not det's doing
    assert slurm.wait_for_job(job_id, FINAL_STATES) == "CANCELLED"

    assert api.wait_experiment(exp, timeout=TIMEOUT) == "STATE_COMPLETED", api.debug(exp)
    (trial,) = api.trials(exp)
    assert trial["state"] == "STATE_COMPLETED", api.debug(exp)
    assert trial["restarts"] == 1, api.debug(exp)
    logs = "\n".join(api.logs(trial_id))
    # the master says why the trial restarted
    assert f"Slurm job {job_id} was ended by Slurm (CANCELLED" in logs, logs
    assert _resumed_step(logs) >= 5
    assert api.steps(api.metrics(trial_id, "training"))[-1] == 40
    jobs = _det_jobs(slurm, before, exp)
    assert len(jobs) == 2 and jobs[job_id][1] == "CANCELLED", jobs  # the restart was a new job


def test_pause_ends_the_job_and_activate_resumes_from_checkpoint(
    slurm_master: Callable[..., Any], slurm: SlurmCluster
) -> None:
    before = set(slurm.job_states())
    api = MasterAPI(slurm_master().url)
    # 80 steps (20 s): the pause lands long before the trial could finish on a loaded machine
    config = {**CONFIG, "name": "pause-me", "hyperparameters": {"steps": 80}}
    exp = api.create_experiment(config, TRIALS)
    trial_id = api.wait_for(lambda: [t["id"] for t in api.trials(exp)], 60, "the trial")[0]
    job_id = _running_job(api, slurm, before, exp)
    _checkpointed(api, trial_id)

    api.post(f"/api/v1/experiments/{exp}/pause")
    assert api.wait_experiment(exp, {"STATE_PAUSED"}, timeout=60) == "STATE_PAUSED"
    # the trial saw the preemption (scancel --signal=TERM), checkpointed and exited with code 0;
    # its job ended by itself
    api.wait_exited(trial_id)
    assert slurm.wait_for_job(job_id, FINAL_STATES, timeout=120) == "COMPLETED"
    paused_at = len(api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"])
    assert not [j for j, (_, s) in _det_jobs(slurm, before, exp).items() if s not in FINAL_STATES]

    api.post(f"/api/v1/experiments/{exp}/activate")
    assert api.wait_experiment(exp, timeout=TIMEOUT) == "STATE_COMPLETED", api.debug(exp)
    (trial,) = api.trials(exp)
    assert trial["restarts"] == 0, api.debug(exp)  # a pause is not a failure
    logs = "\n".join(api.logs(trial_id))
    assert "preempted at step" in logs, logs
    assert _resumed_step(logs) >= 5
    steps = api.steps(api.metrics(trial_id, "training"))
    assert steps[-1] == 80 and steps == sorted(set(steps)), steps  # no step trained twice
    assert len(api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]) > paused_at
    assert len(_det_jobs(slurm, before, exp)) == 2  # one job before the pause, one after


def test_kill_cancels_the_job(slurm_master: Callable[..., Any], slurm: SlurmCluster) -> None:
    before = set(slurm.job_states())
    api = MasterAPI(slurm_master().url)
    config = {**CONFIG, "name": "kill-me", "hyperparameters": {"steps": 400}}
    exp = api.create_experiment(config, TRIALS)
    job_id = _running_job(api, slurm, before, exp)

    api.post(f"/api/v1/experiments/{exp}/kill")
    assert api.wait_experiment(exp, timeout=120) == "STATE_CANCELED", api.debug(exp)
    assert slurm.wait_for_job(job_id, FINAL_STATES) == "CANCELLED"
    (trial,) = api.trials(exp)
    assert trial["restarts"] == 0, api.debug(exp)  # det's own kill is not a lost allocation
    assert len(_det_jobs(slurm, before, exp)) == 1


def test_master_crash_cancels_the_orphan_job_and_resumes_from_checkpoint(
    slurm: SlurmCluster, make_master: Any, tmp_path: pathlib.Path
) -> None:
    """det-master dies (SIGKILL) while its trial's job runs; the restarted master cancels that
    job (it can no longer follow it) and runs the trial again from its latest checkpoint."""
    before = set(slurm.job_states())
    shared = slurm.shared_dir / tmp_path.name
    config_file = tmp_path / "master.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "checkpoint_storage": str(shared / "checkpoints"),
                "resource_manager": {
                    "type": "slurm",
                    "slurm_conf": str(slurm.conf),
                    "job_storage_root": str(shared / "jobs"),
                    "slot_type": "cpu",
                    "poll_interval": 0.5,
                },
            }
        )
    )
    master = make_master(process=True, slots=None, config_file=config_file)
    api = MasterAPI(master.url)
    config = {**CONFIG, "name": "crash-the-master", "hyperparameters": {"steps": 80}}
    exp = api.create_experiment(config, TRIALS)
    trial_id = api.wait_for(lambda: [t["id"] for t in api.trials(exp)], 60, "the trial")[0]
    job_id = _running_job(api, slurm, before, exp)
    _checkpointed(api, trial_id)

    master.kill()
    # Slurm does not know det-master died; the job runs on until the trial gives up on the master
    # (how soon depends on the machine's load, so its state here is not asserted).
    master.restart()
    # the old job ends: cancelled by the new master (or failed, its trial cut off from the master)
    assert slurm.wait_for_job(job_id, FINAL_STATES) in ("CANCELLED", "FAILED")
    api = MasterAPI(master.url)
    assert api.wait_experiment(exp, timeout=TIMEOUT) == "STATE_COMPLETED", api.debug(exp)
    logs = "\n".join(api.logs(trial_id))
    assert _resumed_step(logs) >= 5
    assert api.steps(api.metrics(trial_id, "training"))[-1] == 80
    assert len(_det_jobs(slurm, before, exp)) == 2
