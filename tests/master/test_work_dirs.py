"""Allocations' work directories (``<data_dir>/work/<allocation id>`` and a trial's ``.info``
beside it) are removed once the allocations end, and the ones an earlier master left behind when
the next one starts; a running allocation keeps its own."""

from __future__ import annotations

import pathlib
from typing import Any

from master.conftest import Client, wait_for
from master.gate_trials import three_waiting_trials


def _work_root(master: Any) -> pathlib.Path:
    return master.manager.work_dirs.root  # type: ignore[no-any-return]


def _entries(master: Any) -> set[str]:
    root = _work_root(master)
    return {p.name for p in root.iterdir()} if root.exists() else set()


def test_a_trials_directories_live_while_it_runs_and_go_when_it_ends(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    client, exp_id, trials = three_waiting_trials(sqlite_master, tmp_path, "work-dirs")
    allocations = [sqlite_master.manager.allocations.live(t).allocation_id for t in trials]
    running = _entries(sqlite_master)
    for aid in allocations:
        assert aid in running and f"{aid}.info" in running
        assert (_work_root(sqlite_master) / aid / "gate.py").is_file()  # its context
    (tmp_path / "go").touch()
    client.wait_state(exp_id, "STATE_COMPLETED")
    sqlite_master.manager.wait_idle()
    assert sqlite_master.manager.work_dirs.wait_idle()
    assert _entries(sqlite_master) == set()


def test_a_commands_directory_goes_when_it_exits(sqlite_master: Any) -> None:
    client = Client(sqlite_master.url).login()
    task = client.post(
        "/api/v1/commands", {"config": {"entrypoint": "true", "resources": {"slots": 0}}}
    )["command"]
    aid = f"{task['id']}.1"
    wait_for(
        lambda: (
            client.get(f"/api/v1/commands/{task['id']}")["command"]["state"] == "STATE_TERMINATED"
        ),
        120,
        "the command to end",
    )
    sqlite_master.manager.wait_idle()
    assert sqlite_master.manager.work_dirs.wait_idle()
    assert aid not in _entries(sqlite_master)


def test_a_new_master_removes_what_an_earlier_one_left(make_master: Any) -> None:
    master = make_master()
    root = _work_root(master)
    master.stop()
    (root / "1.left-behind.1" / "sub").mkdir(parents=True)
    (root / "1.left-behind.1" / "sub" / "model.py").write_text("x = 1\n")
    (root / "1.left-behind.1.info").mkdir()
    (root / "1.left-behind.1.info" / "cluster.json").write_text("{}")
    master.restart()
    assert master.manager.work_dirs.wait_idle()
    assert _entries(master) == set()
