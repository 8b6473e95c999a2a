"""Commands end to end: ``det cmd run`` through the installed script against a real master, the
config's environment variables, the startup hook and the context directory reaching the command,
``list``/``logs -f``/``kill`` with prefix ids, owners, and clear 4xx errors for bad requests."""

from __future__ import annotations

import pathlib
import subprocess

import pytest
import yaml
from cli.harness import DET, Det
from tasks.harness import command_state, log_text, wait_command, wait_for

from determined.client import APIError, Client, ForbiddenError, NotFoundError


def test_cmd_run_streams_output_through_the_script(det: Det, user: Client) -> None:
    result = det.sh("cmd", "run", 'python -c "print(42)"', timeout=120)
    assert result.returncode == 0, result.stderr
    assert "42" in result.stdout.splitlines()
    assert "Task log stream ended" in result.stderr
    ids = [c["id"] for c in user.commands.list(["determined"])["commands"]]
    finished = user.commands.get(ids[-1])["command"]
    assert finished["state"] == "STATE_TERMINATED"
    assert finished["exitStatus"] == "exited with code 0"


def test_env_startup_hook_and_context_reach_the_command(
    det: Det, user: Client, tmp_path: pathlib.Path
) -> None:
    context = tmp_path / "ctx"
    (context / "sub").mkdir(parents=True)
    (context / "sub" / "data.txt").write_text("from the context\n")
    (context / "startup-hook.sh").write_text("echo hook ran > hook.txt\n")
    config = tmp_path / "cmd.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "description": "env check",
                "environment": {"environment_variables": ["GREETING=hello there"]},
            }
        )
    )
    code, out, err = det.run(
        "cmd", "run", "--config-file", str(config), "--config", "resources.slots=1",
        "-c", str(context),
        "cat sub/data.txt; cat hook.txt; echo \"$GREETING|$DET_TASK_TYPE|$DET_USER\"",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert "from the context" in lines
    assert "hook ran" in lines
    assert "hello there|COMMAND|determined" in lines
    listed = user.commands.list(["determined"])["commands"]
    mine = [c for c in listed if c["description"] == "env check"]
    assert mine and mine[-1]["state"] == "STATE_TERMINATED"
    config_out = det.ok("cmd", "config", mine[-1]["id"][:8])
    assert yaml.safe_load(config_out)["resources"] == {"slots": 1}


def test_detach_list_logs_follow_and_kill(det: Det, user: Client, admin: Client) -> None:
    command_id = det.ok("cmd", "run", "-d", "echo started; sleep 120").strip()
    wait_for(lambda: "started" in log_text(user.session, command_id), "the command's first line")
    wait_command(user, command_id, "STATE_RUNNING")  # its start may be recorded after its output
    assert command_id in det.ok("cmd", "list", "-q").split()
    assert command_id in det.ok("cmd", "list", "-q", "-a").split()
    listed = det.ok("task", "list")
    assert command_id in listed and "Command (echo started; sleep 120)" in listed
    jobs = det.ok("job", "list")
    assert "TYPE_COMMAND" in jobs and "Command (echo started; sleep 120)" in jobs
    summary = user.tasks.get(command_id)["task"]
    assert summary["taskType"] == "TASK_TYPE_COMMAND"
    assert summary["allocations"][0]["state"] == "STATE_RUNNING"
    assert user.tasks.count()["commands"] >= 1
    assert admin.commands.get(command_id)["command"]["username"] == "determined"
    follower = subprocess.Popen(
        [str(DET), "task", "logs", "-f", command_id],
        env=det.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        killed = det.ok("cmd", "kill", command_id[:13])
        assert f"Killed command {command_id}" in killed
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert "started" in out.splitlines()
    assert "Task log stream ended" in err
    assert wait_command(user, command_id) == "STATE_TERMINATED"
    assert user.commands.get(command_id)["command"]["exitStatus"] == "killed by the user"
    logs = det.ok("cmd", "logs", command_id, "--tail", "1")
    assert "ended: killed by the user" in logs


def test_only_the_owner_or_an_admin_kills(user: Client, admin: Client) -> None:
    started = admin.commands.launch({"entrypoint": "sleep 120"})
    command_id = started["command"]["id"]
    assert started["command"]["username"] == "admin"
    with pytest.raises(ForbiddenError):
        user.commands.kill(command_id)
    with pytest.raises(ForbiddenError):
        user.tasks.kill(command_id)
    assert command_id not in [c["id"] for c in user.commands.list(["determined"])["commands"]]
    assert command_id in [c["id"] for c in user.commands.list()["commands"]]
    admin.tasks.kill(command_id)
    assert wait_command(admin, command_id) == "STATE_TERMINATED"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"config": {"entrypoint": ""}}, "config.entrypoint"),
        ({"config": {"entrypoint": "true", "idle_timeout": "soon"}}, "idle_timeout"),
        ({"config": {"entrypoint": "true", "resources": {"slots": "x"}}}, "resources.slots"),
        ({"config": {"entrypoint": "true", "resources": {"slots": 999}}}, "resources"),
        ({"config": "no"}, "config"),
        ({"config": {"entrypoint": "true"}, "files": [{"path": "../x"}]}, "files"),
    ],
)
def test_bad_requests_name_the_field(user: Client, body: dict, field: str) -> None:
    with pytest.raises(APIError) as info:
        user.session.request("POST", "/api/v1/commands", body=body)
    assert info.value.status_code == 400
    assert field in str(info.value)


def test_kill_and_reprioritize_a_queued_command(user: Client, det: Det) -> None:
    holder = user.commands.launch({"entrypoint": "sleep 120", "resources": {"slots": 4}})
    holder_id = holder["command"]["id"]
    wait_command(user, holder_id, "STATE_RUNNING")
    queued = user.commands.launch({"entrypoint": "echo never", "resources": {"slots": 1}})
    queued_id = queued["command"]["id"]
    assert command_state(user, queued_id) == "STATE_QUEUED"
    assert det.ok("cmd", "set", "priority", queued_id[:8], "7").startswith("Set priority")
    assert user.commands.get(queued_id)["command"]["priority"] == 7
    with pytest.raises(APIError) as info:
        user.commands.set_priority(queued_id, 0)
    assert info.value.status_code == 400 and "priority" in str(info.value)
    user.commands.kill(queued_id)
    assert wait_command(user, queued_id) == "STATE_TERMINATED"
    assert "never" not in log_text(user.session, queued_id).splitlines()
    user.commands.kill(holder_id)
    assert wait_command(user, holder_id) == "STATE_TERMINATED"
    assert user.commands.get(holder_id)["command"]["exitStatus"] == "killed by the user"


def test_unknown_ids_are_404(user: Client, det: Det) -> None:
    with pytest.raises(NotFoundError):
        user.tasks.get("no-such-task")
    with pytest.raises(NotFoundError):
        user.commands.get("00000000-0000-4000-8000-000000000000")
    with pytest.raises(NotFoundError):
        user.tasks.kill("00000000-0000-4000-8000-000000000000")
    code, _out, err = det.run("cmd", "kill", "zzzz")
    assert code != 0 and "not found" in err
