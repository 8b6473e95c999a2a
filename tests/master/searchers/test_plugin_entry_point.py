"""A third-party search method installed as a real package: the master accepts and runs its name.

The test writes a tiny package and its ``*.dist-info`` (with an ``entry_points.txt`` in the group
``determined``) into a directory, puts that directory on the ``PYTHONPATH`` of a ``det-master up``
subprocess, and runs an experiment with ``searcher.name: fixed_list`` on it. Nothing in det knows
the name: the master finds the plugin through importlib.metadata, exactly as after ``pip install``.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
from master_process import MasterProcess

PLUGIN = '''
"""det searcher plugin: try the listed points one after the other until one is good enough."""

from determined.core import hookimpl
from determined.searcher import SearchMethod, Stop


class FixedListSearch(SearchMethod):
    def __init__(self, points, metric, target):
        self.points = points
        self.metric = metric
        self.target = target
        self.next_index = 0
        self.best = None

    def _next(self, ctx):
        if self.next_index >= len(self.points):
            return []
        if self.best is not None and self.best < self.target:
            return []
        hparams = {**ctx.sample_hparams(), **self.points[self.next_index]}
        self.next_index += 1
        return [ctx.create(hparams)]

    def initial_trials(self, ctx):
        return self._next(ctx)

    def validation_completed(self, ctx, request_id, metrics):
        value = float(metrics[self.metric])
        self.best = value if self.best is None else min(self.best, value)
        return []

    def trial_exited(self, ctx, request_id):
        return self._next(ctx)

    def progress(self, trial_progress, trials_closed):
        return len(trials_closed) / len(self.points)

    def state_dict(self):
        return {"next_index": self.next_index, "best": self.best}

    def load_state_dict(self, state):
        self.next_index = state["next_index"]
        self.best = state["best"]


@hookimpl
def det_search_method(config):
    searcher = config["searcher"]
    if searcher.get("name") != "fixed_list":
        return None
    points = searcher.get("points")
    if not isinstance(points, list) or not points:
        raise ValueError("searcher.points: expected a non-empty list of hyperparameter dicts")
    return FixedListSearch(points, searcher["metric"], float(searcher.get("target", 0.0)))
'''


def install_plugin(site: pathlib.Path) -> None:
    """What ``pip install`` of the plugin leaves in site-packages: the package and its metadata."""
    (site / "fixedlist_searcher").mkdir(parents=True)
    (site / "fixedlist_searcher" / "__init__.py").write_text(PLUGIN)
    info = site / "fixedlist_searcher-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fixedlist-searcher\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text("[determined]\nfixed_list = fixedlist_searcher\n")
    (info / "RECORD").write_text("")


@pytest.fixture
def plugin_master(tmp_path: pathlib.Path, make_master: Any) -> MasterProcess:
    """A ``det-master up`` subprocess (the root conftest's ``make_master``) that sees the plugin."""
    site = tmp_path / "site"
    install_plugin(site)
    env = dict(os.environ)
    env.pop("DET_DISABLE_PLUGIN_AUTOLOAD", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    return make_master(process=True, slots=2, env=env)  # type: ignore[no-any-return]


def test_entry_point_searcher_runs_an_experiment(
    plugin_master: MasterProcess, client_for: Any, config_of: Any
) -> None:
    client = client_for(plugin_master.url)
    searcher = {
        "name": "fixed_list",
        "metric": "loss",
        "points": [{"base": 3.0}, {"base": 0.5}, {"base": 2.0}],
        "target": 1.0,
    }
    config = config_of(searcher=searcher, hyperparameters={"steps": 2, "base": 9.0})
    exp_id = client.create(config)
    exp = client.wait_state(exp_id, "STATE_COMPLETED", timeout=90)
    trials = client.trials(exp_id)
    # 3.0/2 = 1.5 is not below the target, 0.5/2 = 0.25 is: the plugin saw the validations and
    # stopped creating trials after the second point.
    assert [t["hparams"]["base"] for t in trials] == [3.0, 0.5]
    assert all(t["hparams"]["steps"] == 2 for t in trials)
    assert all(t["state"] == "STATE_COMPLETED" for t in trials)
    assert exp["searcherType"] == "fixed_list"
    assert exp["progress"] == 1.0


def test_plugin_errors_and_unknown_names_are_refused(
    plugin_master: MasterProcess, client_for: Any, config_of: Any
) -> None:
    client = client_for(plugin_master.url)
    bad = config_of(searcher={"name": "fixed_list", "metric": "loss", "points": []})
    r = client.request("POST", "/api/v1/experiments", json={"config": _yaml(bad)})
    assert r.status_code == 400, r.text
    assert "searcher.points" in r.json()["error"]["error"]
    unknown = config_of(searcher={"name": "fixed_lisst", "metric": "loss"})
    r = client.request("POST", "/api/v1/experiments", json={"config": _yaml(unknown)})
    assert r.status_code == 400, r.text
    assert "searcher.name" in r.json()["error"]["error"]


def _yaml(config: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(config)
