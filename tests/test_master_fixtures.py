"""The root conftest's master fixtures: handles, data directories, restarts, subprocess masters."""

from __future__ import annotations

from typing import Any

import pytest


def _users(handle: Any) -> set[str]:
    return {u["username"] for u in handle.session().request("GET", "/api/v1/users")["users"]}


def test_side_by_side_masters_get_their_own_data_dir(make_master: Any) -> None:
    first = make_master()
    second = make_master(slots=1)
    assert first.data_dir != second.data_dir
    assert first.url != second.url
    assert first.config.slots == 4 and second.config.slots == 1  # the Master's own attributes
    first.stop()
    first.stop()  # stopping twice is harmless (fixtures stop everything again at teardown)
    assert make_master().data_dir == first.data_dir  # started after it stopped: a restart


def test_in_process_restart_keeps_url_data_and_logins(make_master: Any) -> None:
    master = make_master()
    url = master.url
    master.session().request(
        "POST", "/api/v1/users", body={"user": {"username": "kept", "active": True}}
    )
    master.restart()
    assert master.url == url
    assert "kept" in _users(master)
    me = master.api().get("/api/v1/me")["user"]  # the end-to-end client's default user
    assert me["username"] == "determined"


def test_module_master_is_shared(module_master: Any, det_master: Any) -> None:
    assert det_master is module_master
    assert module_master.login("determined")


@pytest.mark.slow
def test_subprocess_master_has_the_same_interface(make_master: Any) -> None:
    master = make_master(process=True, slots=1)
    master.session().request(
        "POST", "/api/v1/users", body={"user": {"username": "survivor", "active": True}}
    )
    url = master.url
    master.kill()
    assert not master.running
    master.restart()
    assert master.url == url
    assert "survivor" in _users(master)
