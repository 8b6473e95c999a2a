"""A trial's allocation token is resolved from memory once its experiment's owner is known: a new
trial's first request reads no database row and crosses no thread, and what it may reach is the
same. An ended allocation's token is refused at once; a change to the owner's row drops the owner
kept in memory."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator
from typing import Any

import requests
from master.conftest import Client
from master.gate_trials import three_waiting_trials
from sqlalchemy import event


def _as_trial(master: Any, token: str, path: str) -> requests.Response:
    return requests.get(
        master.url + path,
        headers={"Grpc-Metadata-x-allocation-token": f"Bearer {token}"},
        timeout=30,
    )


@contextlib.contextmanager
def _token_reads(master: Any) -> Iterator[list[str]]:
    """The statements that look an allocation token up, as the master runs them meanwhile."""
    reads: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "token_hash" in statement and "allocations" in statement:
            reads.append(statement)

    event.listen(master.db.engine, "before_cursor_execute", seen)
    try:
        yield reads
    finally:
        event.remove(master.db.engine, "before_cursor_execute", seen)


def _auth_cache(master: Any) -> Any:
    return master._server.config.app.state.auth_cache


def _waiting_trials(
    master: Any, tmp_path: pathlib.Path
) -> tuple[Client, int, list[int], list[str]]:
    """Three trials waiting at their gate: the client, experiment, trial ids and the trials'
    allocation tokens."""
    client, exp_id, trials = three_waiting_trials(master, tmp_path, "alloc-auth")
    allocations = master.manager.allocations
    return client, exp_id, trials, [allocations.live(t).token for t in trials]


def test_a_new_trials_token_is_resolved_in_memory_with_the_same_reach(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    _, _, trials, tokens = _waiting_trials(sqlite_master, tmp_path)
    _auth_cache(sqlite_master).clear()
    with _token_reads(sqlite_master) as reads:
        # The first token of the experiment: its owner is not known yet, the database answers.
        assert _as_trial(sqlite_master, tokens[0], f"/api/v1/trials/{trials[0]}").status_code == 200
        assert len(reads) == 1
        # The others: no read, and each reaches its own trial only.
        got = _as_trial(sqlite_master, tokens[1], f"/api/v1/trials/{trials[1]}")
        assert got.status_code == 200, got.text
        other = _as_trial(sqlite_master, tokens[2], f"/api/v1/trials/{trials[1]}")
        assert other.status_code == 403 and "allocation token" in other.text
        assert len(reads) == 1, reads
    (tmp_path / "go").touch()


def test_an_ended_allocations_token_is_refused_though_its_owner_is_known(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    client, exp_id, trials, tokens = _waiting_trials(sqlite_master, tmp_path)
    assert _as_trial(sqlite_master, tokens[0], f"/api/v1/trials/{trials[0]}").status_code == 200
    cache = _auth_cache(sqlite_master)
    owner_id = sqlite_master.manager.allocations.live(trials[0]).owner_id
    assert cache.owner(owner_id) is not None
    (tmp_path / "go").touch()
    client.wait_state(exp_id, "STATE_COMPLETED")
    assert cache.owner(owner_id) is not None  # still known: only the allocations ended
    for trial, token in zip(trials, tokens, strict=True):
        got = _as_trial(sqlite_master, token, f"/api/v1/trials/{trial}")
        assert got.status_code == 401, got.text


def test_a_change_to_the_owner_drops_the_owner_kept_in_memory(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    client, _, trials, tokens = _waiting_trials(sqlite_master, tmp_path)
    assert _as_trial(sqlite_master, tokens[0], f"/api/v1/trials/{trials[0]}").status_code == 200
    cache = _auth_cache(sqlite_master)
    owner_id = sqlite_master.manager.allocations.live(trials[0]).owner_id
    assert cache.owner(owner_id) is not None
    me = client.get("/api/v1/me")["user"]
    assert int(me["id"]) == owner_id
    client.request(
        "PATCH", f"/api/v1/users/{owner_id}", json={"displayName": "changed"}
    ).raise_for_status()
    assert cache.owner(owner_id) is None
    (tmp_path / "go").touch()
