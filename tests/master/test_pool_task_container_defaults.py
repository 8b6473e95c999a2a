"""``task_container_defaults`` of the master config, top-level and per resource pool: merged into
every experiment's and task's config (the pool's over the master's, the workload's own values over
both) and seen by the real trial and command processes; malformed sections refused at start-up
naming the field."""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest
from master.conftest import TRIAL_SCRIPT, Client, exp_config

from determined import client as det_client
from determined.master import MasterConfig

ENV_TRIAL = (
    "import os\n"
    "print('SEEN', os.environ.get('SOMEVAR'), os.environ.get('TOP'), os.environ.get('MINE'))\n"
    + TRIAL_SCRIPT
)
DEFAULTS = {"environment_variables": ["TOP=master", "SOMEVAR=from-master"]}
POOLS = [
    {
        "pool_name": "default",
        "description": "upstream's other pool keys are accepted",
        "task_container_defaults": {
            "environment_variables": ["SOMEVAR=SOMEVAL"],
            "startup_hook": "echo ignored",
        },
    }
]


@pytest.fixture(scope="module")
def tcd_master(make_module_master: Any) -> Any:
    return make_module_master(task_container_defaults=DEFAULTS, resource_pools=POOLS)


@pytest.fixture(scope="module")
def admin(tcd_master: Any) -> Client:
    return Client(tcd_master.url).login("admin")


def test_experiments_get_the_pool_defaults_and_their_trials_see_them(admin: Client) -> None:
    exp_id = admin.create(exp_config(), files={"trial.py": ENV_TRIAL})
    config = admin.get(f"/api/v1/experiments/{exp_id}")["config"]
    cpu = config["environment"]["environment_variables"]["cpu"]
    assert "SOMEVAR=SOMEVAL" in cpu and "TOP=master" in cpu
    assert "SOMEVAR=from-master" not in cpu  # the pool's value wins over the master's
    admin.wait_state(exp_id, "STATE_COMPLETED", timeout=120)
    assert "SEEN SOMEVAL master None" in admin.all_logs(exp_id)
    # The experiment's own variables win; naming the pool gives the same defaults (upstream's
    # e2e test compares the two).
    own = {"environment_variables": ["SOMEVAR=mine", "MINE=1"]}
    resources = {"slots_per_trial": 1, "resource_pool": "default"}
    second = admin.create(
        exp_config(environment=own, resources=resources), files={"trial.py": ENV_TRIAL}
    )
    admin.wait_state(second, "STATE_COMPLETED", timeout=120)
    assert "SEEN mine master 1" in admin.all_logs(second)


def test_commands_get_the_pool_defaults(tcd_master: Any) -> None:
    api = det_client.Client(tcd_master.session("admin"))
    config = {"entrypoint": 'echo "got $SOMEVAR/$TOP"'}
    launched = api.commands.launch(config)
    command_id = launched["command"]["id"]
    assert "SOMEVAR=SOMEVAL" in launched["config"]["environment"]["environment_variables"]
    deadline = time.monotonic() + 60
    while api.commands.get(command_id)["command"]["state"] != "STATE_TERMINATED":
        assert time.monotonic() < deadline, "the command did not end"
        time.sleep(0.1)
    text = "".join(e.get("log") or "" for e in api.tasks.logs(command_id))
    assert "got SOMEVAL/master" in text, text


def test_the_master_config_shows_them(admin: Client) -> None:
    config = admin.get("/api/v1/master/config")["config"]
    assert config["resource_pools"] == POOLS
    assert config["task_container_defaults"] == DEFAULTS


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"resource_pools": {"default": {}}}, "resource_pools: must be a list"),
        ({"resource_pools": [{"task_container_defaults": {}}]}, "resource_pools[0].pool_name"),
        (
            {"resource_pools": [{"pool_name": "a"}, {"pool_name": "a"}]},
            "resource_pools[1].pool_name",
        ),
        (
            {"resource_pools": [{"pool_name": "a", "task_container_defaults": {"nope": 1}}]},
            "resource_pools[0].task_container_defaults.nope",
        ),
        (
            {"task_container_defaults": {"environment_variables": [1]}},
            "task_container_defaults (environment.environment_variables",
        ),
        ({"task_container_defaults": ["A=1"]}, "task_container_defaults: must be a mapping"),
    ],
)
def test_malformed_sections_are_refused_naming_the_field(
    settings: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValueError) as info:
        MasterConfig(**settings).check()
    assert fragment in str(info.value), str(info.value)


def test_upstream_keys_load_from_a_config_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text(
        "task_container_defaults:\n  environment_variables: [TOP=master]\n"
        "resource_pools:\n  - pool_name: default\n    task_container_defaults:\n"
        "      environment_variables:\n        - SOMEVAR=SOMEVAL\n"
    )
    config = MasterConfig.from_file(path, data_dir=str(tmp_path / "data"))
    config.check()
    assert config.task_container_defaults_for("default") == {
        "environment_variables": ["SOMEVAR=SOMEVAL", "TOP=master"]
    }
    assert config.task_container_defaults_for("other") == {"environment_variables": ["TOP=master"]}
