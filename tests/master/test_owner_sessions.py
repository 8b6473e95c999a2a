"""The owner's session an experiment's trials get as ``DET_USER_TOKEN``: one per experiment (as
upstream), revoked when the experiment ends or the master restarts, and made again when a trial
logged out with it."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import requests
from master.conftest import Client
from master.gate_trials import three_waiting_trials
from sqlalchemy import select

from determined.master.db import UserSession

LOG_OUT_FIRST = """
import json, os, pathlib, urllib.error, urllib.request

def call(method, path):
    request = urllib.request.Request(
        os.environ["DET_MASTER"] + path,
        method=method,
        headers={"Authorization": "Bearer " + os.environ["DET_USER_TOKEN"]},
        data=b"{}" if method == "POST" else None,
    )
    try:
        return urllib.request.urlopen(request, timeout=30).status
    except urllib.error.HTTPError as e:
        return e.code

out = pathlib.Path(os.environ["OUT_DIR"])
report = {"token": os.environ["DET_USER_TOKEN"], "me": call("GET", "/api/v1/me")}
if not list(out.glob("trial-*.json")):  # the first trial to run (they run one at a time)
    report["logout"] = call("POST", "/api/v1/auth/logout")
(out / ("trial-" + os.environ["DET_TRIAL_ID"] + ".json")).write_text(json.dumps(report))
"""


def _me(master: Any, token: str) -> int:
    got = requests.get(
        master.url + "/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    return got.status_code


def _sessions_of(master: Any, exp_id: int) -> list[UserSession]:
    with master.db.read() as session:
        rows = session.scalars(
            select(UserSession)
            .where(UserSession.description == f"trials of experiment {exp_id}")
            .order_by(UserSession.id)
        )
        return list(rows)


def _owner_tokens(master: Any, trials: list[int]) -> set[str]:
    return {master.manager.allocations.live(t).user_token for t in trials}


def test_an_experiments_trials_share_one_session_revoked_at_its_end(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    client, exp_id, trials = three_waiting_trials(sqlite_master, tmp_path, "owner-session")
    tokens = _owner_tokens(sqlite_master, trials)
    assert len(tokens) == 1
    token = tokens.pop()
    assert _me(sqlite_master, token) == 200
    rows = _sessions_of(sqlite_master, exp_id)
    assert len(rows) == 1 and rows[0].revoked_at is None
    (tmp_path / "go").touch()
    client.wait_state(exp_id, "STATE_COMPLETED")
    assert _me(sqlite_master, token) == 401
    assert _sessions_of(sqlite_master, exp_id)[0].revoked_at is not None


def test_a_trial_that_logs_out_leaves_the_next_trial_a_working_session(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    client = Client(sqlite_master.url).login()
    config = {
        "name": "owner-logout",
        "entrypoint": "python3 probe.py",
        "searcher": {"name": "grid", "metric": "x", "max_length": 1, "max_concurrent_trials": 1},
        "hyperparameters": {"n": {"type": "categorical", "vals": [1, 2]}},
        "environment": {"environment_variables": [f"OUT_DIR={tmp_path}"]},
        "max_restarts": 0,
    }
    exp_id = client.create(config, {"probe.py": LOG_OUT_FIRST})
    client.wait_state(exp_id, "STATE_COMPLETED")
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("trial-*.json")]
    first, second = sorted(reports, key=lambda r: "logout" not in r)
    assert (first["me"], first["logout"]) == (200, 200), first
    assert second["me"] == 200 and second["token"] != first["token"], second
    assert len(_sessions_of(sqlite_master, exp_id)) == 1  # the logged-out one was deleted


def test_a_restart_revokes_the_sessions_the_earlier_master_made(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    _, exp_id, trials = three_waiting_trials(sqlite_master, tmp_path, "owner-restart")
    (token,) = _owner_tokens(sqlite_master, trials)
    assert _me(sqlite_master, token) == 200
    sqlite_master.restart()
    (tmp_path / "go").touch()
    assert _me(sqlite_master, token) == 401
    # start-up recovery revoked it before the master served anything
    assert _sessions_of(sqlite_master, exp_id)[0].revoked_at is not None
