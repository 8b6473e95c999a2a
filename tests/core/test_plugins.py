"""A third-party distribution plugs a storage backend and a searcher into det through its entry point."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

PLUGIN = '''
"""A throw-away third-party det plugin: an in-memory storage type and a one-trial searcher."""
import contextlib, pathlib, tempfile

from determined.core import hookimpl
from determined.searcher import Create, SearchMethod, Shutdown
from determined.storage import build


@hookimpl
def det_checkpoint_storage(config):
    if config.get("type") != "thirdparty_mem":
        return None
    manager = build({"type": "fsspec", "url": "memory://thirdparty/" + config["name"]})
    manager.made_by_thirdparty = True
    return manager


class OneTrial(SearchMethod):
    def __init__(self):
        self.created = False

    def initial_trials(self, ctx):
        self.created = True
        return [ctx.create({"answer": 42})]

    def trial_exited(self, ctx, request_id):
        return [Shutdown()]

    def progress(self, trial_progress, trials_closed):
        return 1.0 if trials_closed else 0.0

    def state_dict(self):
        return {"created": self.created}

    def load_state_dict(self, state):
        self.created = state["created"]


@hookimpl
def det_search_method(config):
    if config["searcher"]["name"] == "thirdparty_one":
        return OneTrial()
    return None
'''

CHECK = """
from determined.core import _hooks
from determined.searcher import Create, Shutdown
from determined.master.searchers import Searcher

storage = _hooks.checkpoint_storage({"type": "thirdparty_mem", "name": "x"})
assert getattr(storage, "made_by_thirdparty", False), storage

config = {"searcher": {"name": "thirdparty_one", "metric": "loss", "smaller_is_better": True},
          "hyperparameters": {}, "reproducibility": {"experiment_seed": 1}}
searcher = Searcher(config)
actions = searcher.initial_trials()
assert len(actions) == 1 and isinstance(actions[0], Create), actions
assert actions[0].hparams == {"answer": 42}
searcher.trial_created(actions[0].request_id)
assert any(isinstance(a, Shutdown) for a in searcher.trial_exited(actions[0].request_id))
names = [name for name, _ in _hooks.get_plugin_manager().list_name_plugin()]
assert "thirdparty" in names, names
print("ok")
"""


def _install_throwaway_distribution(site: pathlib.Path) -> None:
    package = site / "det_thirdparty_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    dist_info = site / "det_thirdparty_plugin-0.0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: det-thirdparty-plugin\nVersion: 0.0.1\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "[determined]\nthirdparty = det_thirdparty_plugin\n"
    )
    (dist_info / "RECORD").write_text("")


def _run(site: pathlib.Path, autoload: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(site))
    env.pop("DET_DISABLE_PLUGIN_AUTOLOAD", None)
    if not autoload:
        env["DET_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=120
    )


def test_entry_point_plugin_provides_storage_and_searcher(tmp_path: pathlib.Path) -> None:
    _install_throwaway_distribution(tmp_path)
    result = _run(tmp_path, autoload=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_autoload_switch_turns_entry_points_off(tmp_path: pathlib.Path) -> None:
    _install_throwaway_distribution(tmp_path)
    result = _run(tmp_path, autoload=False)
    assert result.returncode != 0
    assert "checkpoint_storage.type: no storage plugin handles 'thirdparty_mem'" in result.stderr
