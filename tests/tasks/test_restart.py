"""A master restart keeps the records of commands: finished ones stay listable with their logs; one
that was running when the master died is reaped and ends with "the master restarted"."""

from __future__ import annotations

import os
import re
from typing import Any

from tasks.harness import log_text, wait_command, wait_for

from determined.client import Client


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_commands_survive_a_master_crash(db_url: str, make_master: Any) -> None:
    master = make_master(db_url, process=True)
    admin = Client(master.session("admin"))
    done = admin.commands.launch({"entrypoint": "echo finished-before", "description": "done"})
    done_id = done["command"]["id"]
    assert wait_command(admin, done_id) == "STATE_TERMINATED"
    running = admin.commands.launch({"entrypoint": "echo pid=$$; exec sleep 300"})
    running_id = running["command"]["id"]
    match = wait_for(
        lambda: re.search(r"pid=([0-9]+)", log_text(admin.session, running_id)),
        "the command's pid",
    )
    pid = int(match.group(1))
    assert _alive(pid)
    master.kill()  # no clean shutdown: the command's process group is left behind
    master.restart()
    admin = Client(master.session("admin"))
    listed = {c["id"]: c for c in admin.commands.list()["commands"]}
    assert listed[done_id]["exitStatus"] == "exited with code 0"
    assert listed[running_id]["state"] == "STATE_TERMINATED"
    assert listed[running_id]["exitStatus"] == "the master restarted"
    assert "finished-before" in log_text(admin.session, done_id)
    assert "the master restarted" in log_text(admin.session, running_id)
    wait_for(lambda: not _alive(pid), "the orphaned command to be reaped", timeout=30)
    assert admin.tasks.get(done_id)["task"]["endTime"]
