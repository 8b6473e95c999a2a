"""Search quality for a fixed budget: det's adaptive ASHA vs Optuna's Hyperband vs random search.

The objective is a cheap, noisy multi-fidelity function written here: a learning curve whose
asymptote depends on three hyperparameters (a log-scaled learning rate, a "momentum" in [0, 1)
and a categorical width), with Gaussian noise on every evaluation. Two scenarios run side by side:
``steady`` (every configuration learns at the same speed, so early rungs rank truly) and
``crossing`` (high learning rates learn fast towards a worse loss, so early rungs mislead: the
known weakness of every early-stopping method).

For each seed, det's ``adaptive_asha`` (driven through the master's ``Searcher`` with instant
trials, each trained to the lengths the operations protocol hands out) runs ``max_trials`` trials;
the training steps it used are the budget. Optuna (``HyperbandPruner`` over a ``RandomSampler``,
reporting every step) and plain random search (full-length trials only) then get the same budget.
Each method's answer is the configuration it reports as best; the figure is that configuration's
noise-free final loss (lower is better), averaged over 20 seeds.

    .venv/bin/python benchmarks/bench_search_quality.py [--seeds 20]
"""

from __future__ import annotations

import argparse
import collections
import math
import random
import statistics
import sys
from typing import Any

from determined.master.searchers import Searcher, build_search_method
from determined.searcher import Create, Stop

MAX_TIME = 81  # steps at full fidelity
DIVISOR = 3
MAX_TRIALS = 81
NOISE = 0.03
WIDTHS = (32, 64, 128, 256)


def asymptote(lr: float, momentum: float, width: int) -> float:
    """The loss the configuration converges to (its true quality)."""
    log_lr = math.log10(lr)
    return (
        0.05
        + 0.08 * (log_lr + 2.3) ** 2
        + 0.4 * (momentum - 0.8) ** 2
        + 0.03 * abs(math.log2(width) - 7.0)
        + (0.3 * (log_lr + 0.7) if log_lr > -0.7 else 0.0)  # unstable when too high
    )


SCENARIOS = {
    "steady": "every configuration learns at the same speed: early rungs rank truly (up to noise)",
    "crossing": "high learning rates learn fast towards a worse loss: early rungs mislead",
}
scenario = "steady"


def curve(lr: float, momentum: float, width: int, step: int) -> float:
    """Noise-free loss after ``step`` steps in the current scenario."""
    rate = 0.1 if scenario == "steady" else 0.6 * lr**0.5 * (1.0 + momentum)
    return asymptote(lr, momentum, width) + 2.0 * math.exp(-rate * step)


def observe(rng: random.Random, hp: dict[str, Any], step: int) -> float:
    return curve(hp["lr"], hp["momentum"], hp["width"], step) + rng.gauss(0.0, NOISE)


def true_final(hp: dict[str, Any]) -> float:
    return curve(hp["lr"], hp["momentum"], hp["width"], MAX_TIME)


def det_asha(seed: int) -> tuple[float, int]:
    """det's adaptive ASHA; returns (true loss of its best trial, steps used)."""
    config = {
        "searcher": {
            "name": "adaptive_asha",
            "metric": "loss",
            "time_metric": "batches",
            "max_time": MAX_TIME,
            "max_trials": MAX_TRIALS,
            "mode": "standard",
            "divisor": DIVISOR,
            "max_rungs": 5,
            "max_concurrent_trials": 8,
        },
        "hyperparameters": {
            "lr": {"type": "log", "minval": -4, "maxval": 0, "base": 10},
            "momentum": {"type": "double", "minval": 0.0, "maxval": 1.0},
            "width": {"type": "categorical", "vals": list(WIDTHS)},
        },
        "reproducibility": {"experiment_seed": seed},
    }
    method = build_search_method(config)
    searcher = Searcher(config, method=method)
    noise = random.Random(seed * 7919 + 1)
    pending: collections.deque[Create] = collections.deque()

    def take(actions: list[Any]) -> set[str]:
        stops, queue = set(), collections.deque(actions)
        while queue:
            action = queue.popleft()
            if isinstance(action, Create):
                pending.append(action)
                queue.extend(searcher.trial_created(action.request_id))
            elif isinstance(action, Stop):
                stops.add(action.request_id)
        return stops

    take(searcher.initial_trials())
    steps = 0
    finals: list[tuple[float, dict[str, Any]]] = []
    while pending:
        create = pending.popleft()
        rid, trained = create.request_id, 0
        while (length := searcher.next_operation(rid)) is not None:
            value = observe(noise, create.hparams, length)
            trained = length
            if length == MAX_TIME:
                finals.append((value, create.hparams))
            if rid in take(searcher.operation_completed(rid, length, value)):
                break
        steps += trained
        take(searcher.trial_exited(rid))
    _, best = min(finals, key=lambda pair: pair[0])
    return true_final(best), steps


def sample(rng: random.Random) -> dict[str, Any]:
    return {
        "lr": 10 ** rng.uniform(-4, 0),
        "momentum": rng.uniform(0.0, 1.0),
        "width": rng.choice(WIDTHS),
    }


def random_search(seed: int, budget: int) -> float:
    rng, noise = random.Random(seed), random.Random(seed * 7919 + 2)
    trials = [sample(rng) for _ in range(max(budget // MAX_TIME, 1))]
    best = min(trials, key=lambda hp: observe(noise, hp, MAX_TIME))
    return true_final(best)


def optuna_hyperband(seed: int, budget: int) -> float:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=f"bench-{seed}",  # Hyperband picks brackets by hashing it: reproducible
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(
            min_resource=1, max_resource=MAX_TIME, reduction_factor=DIVISOR
        ),
    )
    noise = random.Random(seed * 7919 + 3)
    steps = 0
    while steps < budget:
        trial = study.ask()
        hp = {
            "lr": trial.suggest_float("lr", 1e-4, 1.0, log=True),
            "momentum": trial.suggest_float("momentum", 0.0, 1.0),
            "width": trial.suggest_categorical("width", list(WIDTHS)),
        }
        value = math.inf
        for step in range(1, MAX_TIME + 1):
            steps += 1
            value = observe(noise, hp, step)
            trial.report(value, step)
            if trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                break
        else:
            study.tell(trial, value)
    completed = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not completed:
        return math.nan
    return true_final(dict(study.best_trial.params))


def run_scenario(seeds: int) -> None:
    results: dict[str, list[float]] = {
        "det adaptive_asha": [],
        "Optuna Hyperband": [],
        "random": [],
    }
    budgets = []
    for seed in range(1, seeds + 1):
        asha, budget = det_asha(seed)
        budgets.append(budget)
        results["det adaptive_asha"].append(asha)
        results["Optuna Hyperband"].append(optuna_hyperband(seed, budget))
        results["random"].append(random_search(seed, budget))
    # the best possible final loss, from a dense grid
    optimum = min(
        true_final({"lr": 10 ** (-4 + 4 * i / 400), "momentum": j / 100, "width": w})
        for i in range(401)
        for j in range(101)
        for w in WIDTHS
    )
    print(f"\nscenario {scenario!r}: {SCENARIOS[scenario]}")
    print(
        f"budget per seed: {statistics.mean(budgets):.0f} steps on average "
        f"(= {statistics.mean(budgets) / MAX_TIME:.1f} full-length trials); "
        f"{seeds} seeds; best possible final loss {optimum:.4f}"
    )
    print(f"{'method':20} {'mean final loss':>16} {'sem':>8} {'mean regret':>12} {'wins':>5}")
    random_regret = statistics.mean(results["random"]) - optimum
    for name, values in results.items():
        mean = statistics.mean(values)
        sem = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        wins = sum(
            1 for i, v in enumerate(values) if v <= min(other[i] for other in results.values())
        )
        print(f"{name:20} {mean:16.4f} {sem:8.4f} {mean - optimum:12.4f} {wins:5d}")
    ratios = ", ".join(
        f"{name} {(statistics.mean(values) - optimum) / random_regret:.2f}"
        for name, values in results.items()
        if name != "random"
    )
    print(f"regret relative to random search (lower is better): {ratios}")


def main() -> int:
    global scenario
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    for name in SCENARIOS:
        scenario = name
        run_scenario(args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
