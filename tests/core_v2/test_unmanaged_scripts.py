"""core_v2 end to end: det's copies of upstream's examples/features/unmanaged scripts run as plain
subprocesses with DET_MASTER set, against a real master; what they report is read back through the
SDK and the ``det`` command line."""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys
import uuid
from typing import Any

import pytest

SCRIPTS = pathlib.Path(__file__).parent / "scripts"
DET = pathlib.Path(sys.executable).parent / "det"
TIMEOUT = 120


@pytest.fixture
def env(module_master: Any, tmp_path: pathlib.Path) -> dict[str, str]:
    """A script's environment: the module's master, a private login cache and data dir."""
    env = dict(os.environ)
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "DET_CLUSTER_INFO", "DET_TASK_ID"):
        env.pop(name, None)
    env.update(
        {
            "DET_MASTER": str(module_master.url),
            "DET_CONFIG_DIR": str(tmp_path / "det-config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


@pytest.fixture
def sdk(module_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from determined.experimental import Determined

    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "sdk-config"))
    return Determined(str(module_master.url), "determined", "")


def run_script(env: dict[str, str], script: str, *args: str, ok: bool = True) -> str:
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    output = proc.stdout + proc.stderr
    if ok:
        assert proc.returncode == 0, output
    else:
        assert proc.returncode != 0, output
    return output


def printed(output: str, label: str) -> int:
    match = re.search(rf"^{re.escape(label)}:? +(\d+)", output, re.MULTILINE)
    assert match, f"no {label!r} line in:\n{output}"
    return int(match.group(1))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_singleton_reports_to_sdk_and_cli(env: dict[str, str], sdk: Any) -> None:
    name = unique("unmanaged-singleton")
    output = run_script(env, "singleton.py", name, "20")
    exp_id = printed(output, "experiment id")
    assert f"/experiments/{exp_id}" in output  # url_reverse_webui_exp_view()

    exp = sdk.get_experiment(exp_id)
    assert exp.name == name
    assert exp.state.name == "COMPLETED"
    assert exp.labels == {"unmanaged", "singleton"}
    assert exp.config["searcher"]["name"] == "single"
    (trial,) = exp.list_trials()
    assert trial.state.name == "COMPLETED"
    training = list(trial.iter_metrics("training"))
    validation = list(trial.iter_metrics("validation"))
    assert [m.steps_completed for m in training] == list(range(20))
    assert [m.steps_completed for m in validation] == [4, 9, 14, 19]
    assert validation[-1].metrics["loss"] == pytest.approx(1 / 20)
    raw = sdk._api.experiments.get(exp_id)["experiment"]
    assert raw["unmanaged"] is True
    # What the script printed after init() reached the trial's logs.
    assert any(f"experiment id: {exp_id}" in line for line in trial.iter_logs())

    listing = subprocess.run(
        [str(DET), "experiment", "list", "--all"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert listing.returncode == 0, listing.stderr
    row = next((line for line in listing.stdout.splitlines() if name in line), None)
    assert row is not None, listing.stdout
    assert "COMPLETED" in row


def test_rerun_with_same_external_ids_resumes_from_latest_checkpoint(
    env: dict[str, str], sdk: Any, tmp_path: pathlib.Path
) -> None:
    external_id = unique("unmanaged-ckpt")
    storage = str(tmp_path / "checkpoints")
    first = run_script(env, "checkpoints.py", external_id, "10", storage)
    assert printed(first, "initial step") == 0
    second = run_script(env, "checkpoints.py", external_id, "10", storage)
    exp_id = printed(first, "experiment id")
    assert printed(second, "experiment id") == exp_id
    assert printed(second, "trial id") == printed(first, "trial id")
    # The first run's last checkpoint was taken at step 9; the second run starts there.
    assert printed(second, "initial step") == 9

    exp = sdk.get_experiment(exp_id)
    assert exp.state.name == "COMPLETED"
    (trial,) = exp.list_trials()
    steps = sorted(c.metadata["steps_completed"] for c in trial.list_checkpoints())
    assert steps == [4, 9, 9, 14]  # the second run redoes step 9, as upstream's example does
    # The second run's reports from step 9 on replace the first run's (a rollback).
    validation = list(trial.iter_metrics("validation"))
    assert [(m.trial_run_id, m.steps_completed) for m in validation] == [(1, 4), (2, 9), (2, 14)]
    training = list(trial.iter_metrics("training"))
    assert [m.steps_completed for m in training] == list(range(19))
    assert {m.trial_run_id for m in training if m.steps_completed >= 9} == {2}
    latest = max(exp.list_checkpoints(), key=lambda c: c.metadata["steps_completed"])
    assert latest.metadata["steps_completed"] == 14
    assert (pathlib.Path(storage) / latest.uuid / "state").read_text().startswith("14,")


def test_hp_search_trials_share_one_experiment(env: dict[str, str], sdk: Any) -> None:
    experiment = unique("unmanaged-search")
    for trial, hp in (("t0", "0.5"), ("t1", "0.1"), ("t2", "0.9")):
        run_script(env, "hp_search.py", experiment, trial, hp)
    # A trial run again under its external id is the same trial, not a fourth one.
    run_script(env, "hp_search.py", experiment, "t1", "0.1")
    (exp,) = [e for e in sdk.list_experiments() if e.name == experiment]
    assert exp.config["searcher"]["name"] == "random"
    trials = exp.list_trials()
    assert sorted(t.hparams["hp"] for t in trials) == [0.1, 0.5, 0.9]
    assert all(t.state.name == "COMPLETED" for t in trials)
    raw = sdk._api.experiments.get(exp.id)["experiment"]
    best = next(t for t in trials if t.hparams["hp"] == 0.1)
    assert raw["bestTrialId"] == best.id
    assert raw["numTrials"] == 3


def test_context_manager_and_failures_set_the_trial_state(env: dict[str, str], sdk: Any) -> None:
    ok = run_script(env, "context_manager.py", unique("unmanaged-ctx"))
    exp = sdk.get_experiment(printed(ok, "experiment id"))
    assert exp.state.name == "COMPLETED"

    failed = run_script(env, "context_manager.py", unique("unmanaged-ctx-fail"), "1", ok=False)
    assert "failed on purpose" in failed
    exp = sdk.get_experiment(printed(failed, "experiment id"))
    assert exp.state.name == "ERROR"
    (trial,) = exp.list_trials()
    assert trial.state.name == "ERROR"
    assert [m.steps_completed for m in trial.iter_metrics("training")] == [0, 1, 2, 3, 4]

    clean_exit = run_script(env, "context_manager.py", unique("unmanaged-exit0"), "exit0")
    assert sdk.get_experiment(printed(clean_exit, "experiment id")).state.name == "COMPLETED"
    bad_exit = run_script(env, "context_manager.py", unique("unmanaged-exit3"), "exit3", ok=False)
    assert sdk.get_experiment(printed(bad_exit, "experiment id")).state.name == "ERROR"

    uncaught = run_script(env, "uncaught_error.py", unique("unmanaged-uncaught"), ok=False)
    assert "boom" in uncaught
    exp = sdk.get_experiment(printed(uncaught, "experiment id"))
    assert exp.state.name == "ERROR"


def test_without_a_master_init_fails_as_upstream(env: dict[str, str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**env, "DET_MASTER": f"http://127.0.0.1:{port}"}
    output = run_script(env, "singleton.py", unique("no-master"), "3", ok=False)
    assert "MasterNotFoundError" in output or "master" in output.lower()
    assert "Traceback" in output


def test_init_without_config_off_cluster_is_refused(env: dict[str, str]) -> None:
    code = (
        "from determined.experimental import core_v2\n"
        "try:\n"
        "    core_v2.init()\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr
    assert "refused:" in proc.stdout and "Config" in proc.stdout


def test_torch_distributed_ranks_report_as_one_trial(
    env: dict[str, str], sdk: Any, tmp_path: pathlib.Path
) -> None:
    pytest.importorskip("torch.distributed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    name = unique("unmanaged-torch")
    storage = tmp_path / "checkpoints"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes=1",
            "--nproc_per_node=2",
            "--master_addr=127.0.0.1",
            f"--master_port={port}",
            "--max_restarts=0",
            str(SCRIPTS / "torch_distributed.py"),
            name,
            str(storage),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    exp = sdk.get_experiment(printed(output, "experiment id"))
    assert exp.state.name == "COMPLETED"
    (trial,) = exp.list_trials()
    steps = sorted(m.steps_completed for m in trial.iter_metrics("training"))
    assert steps == list(range(10))  # rank 0 reported the even steps, rank 1 the odd ones
    checkpoints = sorted(trial.list_checkpoints(), key=lambda c: c.metadata["steps_completed"])
    assert [c.metadata["steps_completed"] for c in checkpoints] == [4, 9]
    for ckpt in checkpoints:
        assert ckpt.metadata["rank_0"] == ckpt.metadata["rank_1"] == "ok"
        files = sorted(p.name for p in (storage / ckpt.uuid).iterdir())
        assert "state_0" in files and "state_1" in files


def test_launched_by_the_master_the_same_script_joins_its_trial(
    sdk: Any, tmp_path: pathlib.Path
) -> None:
    """Upstream's 1.yaml: the master runs the script; core_v2.init() ignores Config and reports
    to the trial the master started (no unmanaged experiment is created)."""
    context = tmp_path / "context"
    context.mkdir()
    (context / "singleton.py").write_text((SCRIPTS / "singleton.py").read_text())
    config = {
        "name": "core-v2-managed",
        "entrypoint": "python3 singleton.py ignored-name 10",
        "searcher": {"name": "single", "metric": "x"},
        "max_restarts": 0,
    }
    exp = sdk.create_experiment(config, str(context))
    assert exp.wait(interval=0.1, timeout=TIMEOUT).name == "COMPLETED"
    (trial,) = exp.list_trials()
    assert len(list(trial.iter_metrics("training"))) == 10
    raw = sdk._api.experiments.get(exp.id)["experiment"]
    assert raw["unmanaged"] is False and raw["name"] == "core-v2-managed"
    assert not [e for e in sdk.list_experiments(name="ignored-name")]


def test_init_again_in_one_process_finishes_the_first_run(env: dict[str, str], sdk: Any) -> None:
    """A process that runs several trials one after the other (a Ray worker, a notebook): each
    init() closes the run before it; the last one is closed at exit."""
    names = [unique("unmanaged-again"), unique("unmanaged-again")]
    code = (
        "from determined.experimental import core_v2\n"
        f"for name in {names!r}:\n"
        "    core_v2.init(config=core_v2.Config(name=name))\n"
        "    print('experiment id:', core_v2.info.trial.experiment_id, flush=True)\n"
        "    core_v2.train.report_training_metrics(steps_completed=1, metrics={'loss': 1.0})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = [int(n) for n in re.findall(r"experiment id: (\d+)", proc.stdout)]
    assert len(ids) == 2 and ids[0] != ids[1]
    for exp_id in ids:
        exp = sdk.get_experiment(exp_id)
        assert exp.state.name == "COMPLETED"
        (trial,) = exp.list_trials()
        assert [m.steps_completed for m in trial.iter_metrics("training")] == [1]
