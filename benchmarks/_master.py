"""Helpers for master benchmarks: an in-process det master and a logged-in session."""

from __future__ import annotations

import pathlib
import tempfile
import time
from typing import Any

import yaml

from determined.client import Session, read_context_dir
from determined.master import Master, MasterConfig


def start_master(**settings: Any) -> tuple[Master, Session]:
    settings.setdefault("port", 0)
    settings.setdefault("data_dir", tempfile.mkdtemp(prefix="det-bench-"))
    master = Master(MasterConfig(**settings))
    master.start()
    anonymous = Session(master.url)
    token = anonymous.request(
        "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
    )["token"]
    return master, Session(master.url, token)


def create_experiment(session: Session, config: dict[str, Any], context: pathlib.Path) -> int:
    body = {
        "config": yaml.safe_dump(config),
        "modelDefinition": read_context_dir(context),
        "activate": True,
    }
    return int(session.request("POST", "/api/v1/experiments", body=body)["experiment"]["id"])


def wait_for(predicate: Any, timeout: float = 120, interval: float = 0.002) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not reached")
        time.sleep(interval)
