"""The installed ``det`` script as a subprocess: create and follow a real trial, describe as JSON,
log in and out with the token cache in a private ``DET_CONFIG_DIR``, and ``det deploy local``."""

from __future__ import annotations

import json
import pathlib
import socket
from collections.abc import Callable

from cli.harness import DET, DET_CLI, Det, created_id, wait_for, wait_state

from determined.client import Session


def test_create_follow_and_describe_json(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    result = det.sh("e", "create", str(write_config()), str(context_dir), "-f")
    assert result.returncode == 0, result.stderr
    exp_id = created_id(result.stdout)
    lines = result.stdout.splitlines()
    assert lines.index("Waiting for first trial to begin...") < lines.index("step 1")
    assert "trial done" in lines
    assert "Trial log stream ended" in result.stderr
    assert wait_state(api, exp_id, timeout=10) == "STATE_COMPLETED"
    described = det.sh("experiment", "describe", str(exp_id), "--json")
    assert described.returncode == 0, described.stderr
    data = json.loads(described.stdout)
    assert data[0]["experiment"]["id"] == exp_id
    assert data[0]["experiment"]["state"] == "STATE_COMPLETED"
    assert data[0]["config"]["searcher"]["metric"] == "validation_loss"


def test_login_logout_whoami_token_cache(det: Det) -> None:
    assert det.sh("u", "whoami").stdout.strip() == "You are logged in as user 'determined'"
    wrong = det.sh("-u", "admin", "u", "whoami", input_text="")
    assert wrong.returncode == 0  # admin's password is empty on a fresh master
    bad = det.sh("user", "login", "nobody", input_text="secret\n")
    assert bad.returncode == 1
    assert bad.stderr.strip() == "invalid credentials for user 'nobody': check the password"
    good = det.sh("user", "login", "admin", input_text="\n")
    assert good.returncode == 0, good.stderr
    cache = json.loads((det.config_dir / "auth.json").read_text())
    assert cache["masters"][det.url]["active_user"] == "admin"
    assert det.sh("u", "whoami").stdout.strip() == "You are logged in as user 'admin'"
    assert det.sh("u", "logout").returncode == 0
    assert det.sh("u", "whoami").stdout.strip() == "You are logged in as user 'determined'"
    same = det.sh("u", "whoami", script=DET_CLI)
    assert same.returncode == 0 and "determined" in same.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_deploy_local_cluster_up_down(det: Det, tmp_path: pathlib.Path) -> None:
    port = _free_port()
    data_dir = tmp_path / "cluster"
    storage = tmp_path / "ckpts"
    address = f"localhost:{port}"
    up = det.sh(
        "deploy",
        "local",
        "cluster-up",
        "--master-port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--storage-host-path",
        str(storage),
        "--cluster-name",
        "laptop",
        "--no-gpu",
    )
    try:
        assert up.returncode == 0, up.stderr
        assert f"the master is at http://{address}" in up.stdout
        assert "ignored (det runs no containers): --no-gpu" in up.stderr
        info = det.sh("-m", address, "master", "info", "--json")
        assert info.returncode == 0, info.stderr
        assert json.loads(info.stdout)["clusterName"] == "laptop"
        config = json.loads(
            det.sh("-m", address, "-u", "admin", "master", "config", "show", "--json").stdout
        )
        assert config["checkpoint_storage"]["host_path"] == str(storage.resolve())
    finally:
        down = det.sh("deploy", "local", "cluster-down", "--data-dir", str(data_dir), "--delete-db")
    assert down.returncode == 0, down.stderr
    assert "stopped" in down.stdout and "Deleted the database" in down.stdout
    assert not list(data_dir.glob("det.sqlite*"))
    gone = det.sh("-m", address, "e", "list")
    assert gone.returncode == 1
    assert gone.stderr.startswith(f"no master at http://{address}")
    again = det.sh("deploy", "local", "cluster-down", "--data-dir", str(data_dir))
    assert again.returncode == 1 and "is it running?" in again.stderr


def test_script_master_down_is_one_line(det: Det) -> None:
    result = det.sh("-m", f"localhost:{_free_port()}", "experiment", "describe", "1")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert DET.exists()


def test_lifecycle_logs_download_and_model_as_scripts(
    det: Det,
    api: Session,
    write_config: Callable[..., pathlib.Path],
    context_dir: pathlib.Path,
    tmp_path: pathlib.Path,
) -> None:
    """The issue's subprocess list: pause, activate, kill, logs, checkpoint download and model
    registration, each through the installed ``det`` script."""
    finite = created_id(det.sh("e", "create", str(write_config()), str(context_dir)).stdout)
    forever = created_id(
        det.sh(
            "e", "create", str(write_config(hyperparameters={"forever": True})), str(context_dir)
        ).stdout
    )

    def batches() -> int:
        trials = api.request("GET", f"/api/v1/experiments/{forever}/trials")["trials"]
        return int(trials[0]["totalBatchesProcessed"]) if trials else 0

    wait_for(lambda: batches() > 0, "the trial to train")
    assert det.sh("e", "pause", str(forever)).returncode == 0
    wait_state(api, forever, "STATE_PAUSED")
    assert det.sh("e", "activate", str(forever)).returncode == 0
    paused_at = batches()
    wait_for(lambda: batches() > paused_at, "the trial to train again")
    assert det.sh("e", "kill", str(forever)).returncode == 0
    wait_state(api, forever, "STATE_CANCELED")

    assert wait_state(api, finite) == "STATE_COMPLETED"
    trial_id = api.request("GET", f"/api/v1/experiments/{finite}/trials")["trials"][0]["id"]
    logs = det.sh("t", "logs", str(trial_id), "--tail", "50")
    assert logs.returncode == 0 and "trial done" in logs.stdout, logs.stderr
    best = api.request("GET", f"/api/v1/experiments/{finite}/checkpoints")["checkpoints"]
    uuid = max(best, key=lambda c: c["metadata"]["steps_completed"])["uuid"]
    out = tmp_path / "downloaded"
    assert det.sh("c", "download", uuid, "-o", str(out)).returncode == 0
    assert (out / "weights.bin").read_bytes() == b"0" * 64

    assert det.sh("m", "create", "cli-script-model").returncode == 0
    registered = det.sh("m", "register-version", "cli-script-model", uuid)
    assert registered.returncode == 0, registered.stderr
    described = det.sh("m", "describe", "cli-script-model")
    assert described.returncode == 0 and uuid in described.stdout, described.stdout
