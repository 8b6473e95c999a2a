"""Helpers of the web UI tests: the experiment configs, the site (master + experiments), logins."""

from __future__ import annotations

import pathlib
from typing import Any

import requests
from e2e.harness import MasterAPI

from determined.master import Master

CHROMIUM = "/usr/bin/chromium"
TRIALS = pathlib.Path(__file__).parent / "trials"
SECRET = "hunter2-do-not-show"


def exp_config(name: str, **overrides: Any) -> dict[str, Any]:
    """A tiny experiment: ``trials/tiny.py`` with the given hyperparameters and searcher."""
    config: dict[str, Any] = {
        "name": name,
        "entrypoint": "python3 tiny.py",
        "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True},
        "hyperparameters": {"lr": 0.1, "steps": 30, "hold": False},
        "max_restarts": 0,
        "labels": [],
    }
    config.update(overrides)
    return config


class Site:
    """A running master, its URL, an admin API client and the experiments the tests look at."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.url = master.url
        self.api = MasterAPI(master.url, "admin")
        self.ids: dict[str, int] = {}

    def create(self, key: str, config: dict[str, Any]) -> int:
        self.ids[key] = self.api.create_experiment(config, TRIALS)
        return self.ids[key]

    def trials(self, key: str) -> list[dict[str, Any]]:
        return self.api.trials(self.ids[key])


def login_token(url: str, username: str = "admin") -> str:
    """A fresh session token from the API's login."""
    response = requests.post(
        url + "/api/v1/auth/login", json={"username": username, "password": ""}, timeout=30
    )
    response.raise_for_status()
    return str(response.json()["token"])
