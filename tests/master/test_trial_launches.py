"""What a launched trial's environment holds that depends on the resource manager."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from master.conftest import Client

SHOW_ENV = """
import json, os, pathlib
keys = ("CPU_ONLY", "CUDA_ONLY", "EVERYWHERE")
pathlib.Path(os.environ["OUT"]).write_text(json.dumps({k: os.environ.get(k) for k in keys}))
"""


def test_per_slot_type_variables_follow_the_resource_managers_slot_type(
    sqlite_master: Any, tmp_path: pathlib.Path
) -> None:
    """``environment_variables`` given per slot type: a trial on this CPU-only master gets the
    ``cpu`` list (the launch reads the RM's slot type) and never the ``cuda`` one."""
    assert sqlite_master.manager.events.launches._slot_type() == "cpu"
    out = tmp_path / "env.json"
    config = {
        "name": "slot-type-env",
        "entrypoint": "python3 show.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "environment": {
            "environment_variables": {
                "cpu": [f"OUT={out}", "CPU_ONLY=1", "EVERYWHERE=cpu"],
                "cuda": [f"OUT={out}", "CUDA_ONLY=1", "EVERYWHERE=cuda"],
            }
        },
        "max_restarts": 0,
    }
    client = Client(sqlite_master.url).login()
    exp_id = client.create(config, {"show.py": SHOW_ENV})
    client.wait_state(exp_id, "STATE_COMPLETED")
    assert json.loads(out.read_text()) == {"CPU_ONLY": "1", "CUDA_ONLY": None, "EVERYWHERE": "cpu"}
