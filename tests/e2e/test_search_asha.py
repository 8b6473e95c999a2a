"""Adaptive ASHA end to end: a tiny torch model trained by a Core API script under the searcher loop.

Each trial asks the master for operations (ASHA rung lengths), trains a linear model on synthetic
data to that length, reports validation metrics and ``op.report_completed``. Losing trials are
stopped at a rung: their loop ends, they see the preemption signal and exit cleanly; the search
ends with exactly ``max_trials`` trials and the experiment API names the best one.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Callable

import pytest
from e2e.harness import MasterAPI

from determined.master import Master

TRAIN = '''
"""A linear model on synthetic data, trained in ASHA's operations (Core API searcher loop)."""
import logging
import time

import torch

import determined as det

logging.basicConfig(level=logging.INFO)


def main(core_context, hparams):
    data = torch.Generator().manual_seed(0)
    x = torch.randn(512, 4, generator=data)
    y = x @ torch.tensor([1.0, -2.0, 3.0, 0.5]) + 0.1 * torch.randn(512, generator=data)
    x_train, y_train, x_val, y_val = x[:384], y[:384], x[384:], y[384:]
    torch.manual_seed(7)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=hparams["lr"])
    batches = 0
    for op in core_context.searcher.operations():
        print(f"operation: train to {op.length} batches", flush=True)
        while batches < op.length:
            start = (batches * 32) % 384
            xb, yb = x_train[start : start + 32], y_train[start : start + 32]
            loss = torch.nn.functional.mse_loss(model(xb).squeeze(-1), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            batches += 1
            core_context.train.report_training_metrics(
                steps_completed=batches, metrics={"loss": loss.item()}
            )
            op.report_progress(batches)
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(x_val).squeeze(-1), y_val).item()
        core_context.train.report_validation_metrics(
            steps_completed=batches, metrics={"validation_loss": val, "batches": batches}
        )
        op.report_completed(val)
    # The searcher needs nothing more: it stopped this trial, and the stop is also a preemption.
    deadline = time.monotonic() + 30
    preempted = core_context.preempt.should_preempt()
    while not preempted and time.monotonic() < deadline:
        time.sleep(0.05)
        preempted = core_context.preempt.should_preempt()
    print(f"searcher loop ended at {batches} batches; preempt signal: {preempted}", flush=True)


if __name__ == "__main__":
    info = det.get_cluster_info()
    with det.core.init() as core_context:
        main(core_context, info.trial.hparams)
'''

MAX_TIME = 16
CONFIG = {
    "name": "asha-e2e",
    "entrypoint": "python3 train.py",
    "hyperparameters": {"lr": {"type": "log", "minval": -3.5, "maxval": -0.7, "base": 10}},
    "searcher": {
        "name": "adaptive_asha",
        "metric": "validation_loss",
        "smaller_is_better": True,
        "time_metric": "batches",
        "max_time": MAX_TIME,
        "max_trials": 6,
        "mode": "standard",
        "divisor": 2,
        "max_rungs": 3,
        "max_concurrent_trials": 4,
    },
    "reproducibility": {"experiment_seed": 1},
    "max_restarts": 0,
    "resources": {"slots_per_trial": 1},
}
# brackets: 3 rungs [4, 8, 16] with 4 trials, 2 rungs [8, 16] with 2 trials; two at a time each
RUNG_LENGTHS = {4, 8, 16}


def _describe(url: str, experiment_id: int, tmp_path: pathlib.Path) -> str | None:
    """``det experiment describe`` output, or None when the det CLI is not installed."""
    try:
        import determined.cli  # noqa: F401
    except ImportError:
        return None
    env = dict(os.environ, DET_MASTER=url, DET_CONFIG_DIR=str(tmp_path / "det-config"))
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-m", "determined.cli", "experiment", "describe", str(experiment_id)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.slow
def test_adaptive_asha_stops_losers_and_reports_the_best(
    master_factory: Callable[..., Master], tmp_path: pathlib.Path
) -> None:
    api = MasterAPI(master_factory().url)  # SQLite: the search itself does not touch the DB
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text(TRAIN)
    exp_id = api.create_experiment(CONFIG, context)
    state = api.wait_experiment(exp_id, timeout=300)
    assert state == "STATE_COMPLETED", api.debug(exp_id)

    trials = api.trials(exp_id)
    assert len(trials) == CONFIG["searcher"]["max_trials"]
    assert all(t["state"] == "STATE_COMPLETED" for t in trials), api.debug(exp_id)
    batches = {t["id"]: int(t["totalBatchesProcessed"]) for t in trials}
    assert set(batches.values()) <= RUNG_LENGTHS, batches
    stopped_early = [t for t in trials if batches[t["id"]] < MAX_TIME]
    finished = [t for t in trials if batches[t["id"]] == MAX_TIME]
    assert stopped_early, f"ASHA stopped no trial early: {batches}"
    assert len(finished) >= 2  # each bracket trains at least one trial to the end

    for trial in trials:
        text = "".join(api.logs(trial["id"]))
        n = batches[trial["id"]]
        # the operations were ASHA's rung lengths, up to where the trial was stopped
        expected = sorted(length for length in RUNG_LENGTHS if length <= n)
        ops = [int(line.split()[-2]) for line in text.splitlines() if "operation: train to" in line]
        assert ops[-1] == n and set(ops) <= set(expected), (trial["id"], ops, text)
        assert f"searcher loop ended at {n} batches; preempt signal: True" in text, text
        if n < MAX_TIME:
            assert "the searcher stopped this trial" in text

    # the best trial, as the experiment API reports it
    def best_of(trial: dict) -> float:
        return float(trial["searcherMetricValue"])

    best = min(trials, key=best_of)
    best_metric = api.get(f"/api/v1/experiments/{exp_id}/searcher/best_searcher_validation_metric")[
        "metric"
    ]
    assert best_metric == pytest.approx(best_of(best))
    history = api.get(f"/api/v1/experiments/{exp_id}/validation-history")["validationHistory"]
    assert history[-1]["trialId"] == best["id"]
    assert api.experiment(exp_id)["progress"] == 1.0

    described = _describe(api.url, exp_id, tmp_path)
    if described is not None:
        table = described.split("Best Trial:", 1)[1].split("Workloads:", 1)[0]
        rows = [
            [cell.strip() for cell in line.split("|")]
            for line in table.strip().splitlines()[2:]  # after the header and its rule
        ]
        assert [row[:3] for row in rows] == [[str(exp_id), str(best["id"]), "validation_loss"]]
        assert float(rows[0][3]) == pytest.approx(best_of(best), rel=1e-3)
