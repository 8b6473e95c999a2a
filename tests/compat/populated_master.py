"""Experiments in every state on a det master, for the upstream-bindings wire test.

``populate(api, tmp)`` writes a tiny Core API trial into ``tmp`` and leaves the master with one
experiment each COMPLETED, ERROR, ACTIVE (its trial running and waiting for preemption), PAUSED and
CANCELED (each after its trial checkpointed), PAUSED never started, and a spare COMPLETED one that
the wire test may delete. Everything else the
test needs (users, models, workspaces, templates, tokens, groups, tasks, ...) it creates itself through
upstream's bindings, since those creating calls are routes under test too. It returns the ids as a
JSON-able dict for the upstream-venv driver.
"""

from __future__ import annotations

import pathlib
import textwrap
from typing import Any

from e2e.harness import MasterAPI

TRIAL = textwrap.dedent(
    """
    import sys
    import time

    import determined as det


    def main(core: det.core.Context) -> None:
        mode = core.info.user_data.get("mode", "complete")
        if mode == "error":
            sys.exit(3)
        core.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
        core.train.report_validation_metrics(steps_completed=1, metrics={"validation_loss": 0.25})
        with core.checkpoint.store_path({"steps_completed": 1}) as (path, _uuid):
            (path / "weights.txt").write_text("1")
        deadline = time.monotonic() + 600
        while mode == "hold" and not core.preempt.should_preempt():
            if time.monotonic() > deadline:
                sys.exit("never preempted")
            time.sleep(0.05)


    if __name__ == "__main__":
        with det.core.init() as core_context:
            main(core_context)
    """
)


def config(mode: str, name: str) -> dict[str, Any]:
    """An experiment config of the tiny trial in ``mode`` (complete, error or hold)."""
    return {
        "name": name,
        "entrypoint": "python3 trial.py",
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": 1},
        "hyperparameters": {"lr": 0.1},
        "data": {"mode": mode},
        "max_restarts": 0,
        "labels": ["wire"],
        "description": f"wire test: {mode}",
    }


def populate(api: MasterAPI, tmp: pathlib.Path) -> dict[str, Any]:
    """Experiments in every state; returns their ids and the context dir (see the module doc)."""
    context = tmp / "context"
    context.mkdir(parents=True, exist_ok=True)
    (context / "trial.py").write_text(TRIAL)
    modes = {
        "completed": "complete",
        "spare": "complete",
        "errored": "error",
        "active": "hold",
        "paused": "hold",
        "canceled": "hold",
    }
    ids = {
        name: api.create_experiment(config(mode, f"wire-{name}"), context)
        for name, mode in modes.items()
    }
    ids["never_started"] = api.create_experiment(
        config("complete", "wire-never-started"), context, activate=False
    )
    for name in ("active", "paused", "canceled"):
        _wait_checkpointed(api, ids[name])
    api.post(f"/api/v1/experiments/{ids['paused']}/pause")
    api.post(f"/api/v1/experiments/{ids['canceled']}/cancel")
    api.wait_experiment(ids["completed"], {"STATE_COMPLETED"})
    api.wait_experiment(ids["spare"], {"STATE_COMPLETED"})
    api.wait_experiment(ids["errored"], {"STATE_ERROR"})
    api.wait_experiment(ids["paused"], {"STATE_PAUSED"})
    api.wait_experiment(ids["canceled"], {"STATE_CANCELED"})
    trials = {name: api.trials(exp_id) for name, exp_id in ids.items()}
    return {
        "experiments": ids,
        "trials": {name: [t["id"] for t in found] for name, found in trials.items()},
        "context": str(context),
        "config": config("complete", "wire-created"),
    }


def _wait_checkpointed(api: MasterAPI, experiment_id: int) -> None:
    """Until the experiment's first trial has reported its checkpoint (it then holds)."""
    trial = api.wait_for(lambda: api.trials(experiment_id), what="a trial")[0]

    def checkpointed() -> bool:
        return bool(api.get(f"/api/v1/trials/{trial['id']}/checkpoints").get("checkpoints"))

    api.wait_for(checkpointed, timeout=120, what=f"trial {trial['id']}'s checkpoint")
