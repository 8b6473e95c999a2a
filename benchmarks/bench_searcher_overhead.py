"""Searcher overhead: microseconds per decision of adaptive ASHA with instant trials.

Three figures, measured in one run:

1. det's ``Searcher`` (the master's wrapper around ``adaptive_asha``) alone: 10,000 simulated trials
   that train instantly, each reporting a validation at every rung until ASHA stops it. A decision
   is one searcher call (trial created, validation reported, trial exited).
   Then the same with the master's persistence cost on top: ``state_dict()`` serialised to JSON
   after every call, as the master snapshots after every batch of actions. The snapshot holds
   every trial, so this grows linearly with the trials so far (``--snapshot-trials``, fewer).
2. The same search through the master's real persistence path: an experiment on an in-process
   master (SQLite), its trials never launched, driven over HTTP with the searcher-operations routes
   (``GET .../searcher/operation``, ``POST .../searcher/completed_operation``); every decision is a
   committed transaction that also upserts the searcher snapshot. Fewer trials (``--http-trials``).
3. Baseline: Optuna's ``SuccessiveHalvingPruner`` (ASHA) with ``RandomSampler`` and in-memory
   storage, the same instant trials and rungs (ask, report + should_prune per rung, tell).

Anchor from outside this run: Ray Tune publishes about 9 ms of overhead per trial end to end.

    .venv/bin/python benchmarks/bench_searcher_overhead.py [--trials 10000] [--snapshot-trials 2000]
        [--http-trials 300] [--optuna-trials 2000]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import shutil
import sys
import time
from typing import Any

from determined.master.searchers import Searcher, build_search_method
from determined.searcher import Create, Stop

MAX_TIME = 1000
DIVISOR = 4


def asha_config(max_trials: int, seed: int = 1) -> dict[str, Any]:
    return {
        "searcher": {
            "name": "adaptive_asha",
            "metric": "loss",
            "smaller_is_better": True,
            "time_metric": "batches",
            "max_time": MAX_TIME,
            "max_trials": max_trials,
            "mode": "standard",
            "divisor": DIVISOR,
            "max_rungs": 5,
            "max_concurrent_trials": 16,
        },
        "hyperparameters": {"lr": {"type": "log", "minval": -5, "maxval": -1, "base": 10}},
        "reproducibility": {"experiment_seed": seed},
    }


def loss(lr: float, batches: int) -> float:
    """A learning curve: the best lr is 1e-3, longer training helps."""
    return (math.log10(lr) + 3.0) ** 2 + 10.0 / batches


def run_det(trials: int, snapshot: bool) -> tuple[int, int, float]:
    """Drive ``trials`` instant trials through det's Searcher; returns (trials, decisions, s).

    With ``snapshot``, serialise ``state_dict()`` to JSON after every call, as the master does
    (its snapshot is written after every batch of actions).
    """
    config = asha_config(trials)
    method = build_search_method(config)
    searcher = Searcher(config, method=method)
    decisions = 0
    ran = 0

    def persist() -> None:
        if snapshot:
            searcher.progress()
            json.dumps(searcher.state_dict())

    start = time.perf_counter()
    pending: collections.deque[Create] = collections.deque()

    def take(actions: list[Any]) -> set[str]:
        # As the master does: a Create builds the trial at once, and trial_created follows.
        nonlocal decisions
        stops = set()
        queue = collections.deque(actions)
        while queue:
            action = queue.popleft()
            if isinstance(action, Create):
                pending.append(action)
                queue.extend(searcher.trial_created(action.request_id))
                decisions += 1
            elif isinstance(action, Stop):
                stops.add(action.request_id)
        persist()
        return stops

    take(searcher.initial_trials())
    while pending:
        create = pending.popleft()
        rid = create.request_id
        ran += 1
        while True:
            length = searcher.next_operation(rid)
            if length is None:
                break
            lr = create.hparams["lr"]
            stops = take(searcher.operation_completed(rid, length, loss(lr, length)))
            decisions += 1
            if rid in stops:
                break
        take(searcher.trial_exited(rid))
        decisions += 1
    return ran, decisions, time.perf_counter() - start


def run_optuna(trials: int) -> tuple[int, int, float]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rungs = [max(MAX_TIME // DIVISOR**k, 1) for k in range(3, -1, -1)]  # 15, 62, 250, 1000
    study = optuna.create_study(
        sampler=optuna.samplers.RandomSampler(seed=1),
        pruner=optuna.pruners.SuccessiveHalvingPruner(
            min_resource=rungs[0], reduction_factor=DIVISOR
        ),
    )
    decisions = 0
    start = time.perf_counter()
    for _ in range(trials):
        trial = study.ask()
        lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
        decisions += 1
        pruned = False
        for length in rungs:
            trial.report(loss(lr, length), length)
            decisions += 1
            if trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                pruned = True
                break
        if not pruned:
            study.tell(trial, loss(lr, MAX_TIME))
        decisions += 1
    return trials, decisions, time.perf_counter() - start


def run_http(trials: int) -> tuple[int, int, float]:
    """The same search on a real master: every decision is a committed transaction."""
    import tempfile

    import yaml

    from determined.client import Session
    from determined.master import Master, MasterConfig

    data_dir = tempfile.mkdtemp(prefix="det-bench-searcher-")
    master = Master(MasterConfig(port=0, data_dir=data_dir, slots=1))
    master.start()
    try:
        token = Session(master.url).request(
            "POST", "/api/v1/auth/login", body={"username": "determined", "password": ""}
        )["token"]
        api = Session(master.url, token)
        config = asha_config(trials)
        config.update(name="bench", entrypoint="python3 -c pass")
        exp = api.request(
            "POST",
            "/api/v1/experiments",
            body={"config": yaml.safe_dump(config), "activate": False, "modelDefinition": []},
        )["experiment"]
        exp_id = int(exp["id"])
        decisions = 0
        done: set[int] = set()
        start = time.perf_counter()
        while True:
            trials_now = api.request("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
            todo = [t for t in trials_now if t["id"] not in done]
            if not todo:
                break
            for trial in todo:
                done.add(trial["id"])
                lr = trial["hparams"]["lr"]
                while True:
                    answer = api.request("GET", f"/api/v1/trials/{trial['id']}/searcher/operation")
                    decisions += 1
                    if answer["completed"]:
                        break
                    length = int(answer["op"]["validateAfter"]["length"])
                    api.request(
                        "POST",
                        f"/api/v1/trials/{trial['id']}/searcher/completed_operation",
                        body={"op": {"length": length}, "searcherMetric": loss(lr, length)},
                    )
                    decisions += 1
        elapsed = time.perf_counter() - start
        return len(done), decisions, elapsed
    finally:
        master.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--snapshot-trials", type=int, default=2_000)
    parser.add_argument("--http-trials", type=int, default=300)
    parser.add_argument("--optuna-trials", type=int, default=2_000)
    args = parser.parse_args()
    random.seed(0)

    rows = []
    ran, decisions, seconds = run_det(args.trials, snapshot=False)
    rows.append(("det Searcher (adaptive_asha)", ran, decisions, seconds))
    det_us = seconds / decisions * 1e6
    ran, decisions, seconds = run_det(args.snapshot_trials, snapshot=True)
    rows.append(("det Searcher + JSON snapshot per call", ran, decisions, seconds))
    ran, decisions, seconds = run_http(args.http_trials)
    rows.append(("det master over HTTP, SQLite commits", ran, decisions, seconds))
    ran, decisions, seconds = run_optuna(args.optuna_trials)
    rows.append(("baseline: Optuna SuccessiveHalvingPruner", ran, decisions, seconds))
    optuna_us = seconds / decisions * 1e6
    ran, decisions, seconds = run_det(args.optuna_trials, snapshot=False)
    rows.append(("det Searcher, as many trials as Optuna", ran, decisions, seconds))
    det_same_us = seconds / decisions * 1e6

    print(f"{'':42} {'trials':>7} {'decisions':>9} {'us/decision':>12} {'ms/trial':>9}")
    for name, ran, decisions, seconds in rows:
        print(
            f"{name:42} {ran:7d} {decisions:9d} {seconds / decisions * 1e6:12.1f} "
            f"{seconds / ran * 1e3:9.3f}"
        )
    print(
        f"ratio det Searcher / Optuna per decision, same number of trials: "
        f"{det_same_us / optuna_us:.3f}; det at {args.trials} trials: {det_us:.1f} us/decision"
    )
    print("anchor (not measured here): Ray Tune ~9 ms overhead per trial end to end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
