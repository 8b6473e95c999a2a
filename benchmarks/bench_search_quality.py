"""Search quality for a fixed budget: det's searchers vs Optuna's Hyperband vs random search.

The objective is a cheap, noisy multi-fidelity function written here: a learning curve whose
asymptote depends on three hyperparameters (a log-scaled learning rate, a "momentum" in [0, 1)
and a categorical width), with Gaussian noise on every evaluation. Three scenarios:
``steady`` (every configuration learns at the same speed, so early rungs rank truly up to noise),
``crossing`` (high learning rates learn fast towards a worse loss, so early rungs mislead: the
known weakness of every early-stopping method) and ``noisy`` (steady curves, but evaluations are
much noisier, most of all early in training: heteroscedastic noise).

Training is simulated as a state: each step moves the loss towards the configuration's asymptote
at its rate, so a constant configuration follows the curve exactly, and a trial that changes its
hyperparameters mid-way (PBT's copies, which inherit their parent's state) follows the new ones
from where it is.

For each seed, det's ``adaptive_asha`` (driven through the master's ``Searcher`` with instant
trials, each trained to the lengths the operations protocol hands out) runs ``max_trials`` trials;
the training steps it used are the budget. Every other method gets the same budget: det-plugin-
optuna's TPE sampler under det's ASHA (``optuna`` searcher, stopped once it has spent the budget),
det's ``pbt`` (a population of ``budget // MAX_TIME`` trained for ``MAX_TIME`` steps in rounds),
Optuna's ``HyperbandPruner`` over a ``RandomSampler`` (reporting every step), and plain random
search (full-length trials only). Each method's answer is the trained model it reports as best
(by its noisy final evaluation); the figure is that model's noise-free loss after ``MAX_TIME``
steps (lower is better), averaged over 20 seeds.

    .venv/bin/python benchmarks/bench_search_quality.py [--seeds 20] [--scenario noisy]
"""

from __future__ import annotations

import argparse
import collections
import math
import random
import statistics
import sys
from typing import Any

from determined.master.searchers import PBTSearch, Searcher, build_search_method
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
    "noisy": "steady curves, evaluations 3-10x noisier (most of all early in training)",
}
scenario = "steady"


def rate(lr: float, momentum: float) -> float:
    """How fast the loss approaches the asymptote, per step, in the current scenario."""
    return 0.6 * lr**0.5 * (1.0 + momentum) if scenario == "crossing" else 0.1


def curve(lr: float, momentum: float, width: int, step: int) -> float:
    """Noise-free loss after ``step`` steps of one constant configuration."""
    return asymptote(lr, momentum, width) + 2.0 * math.exp(-rate(lr, momentum) * step)


def train(hp: dict[str, Any], loss: float, steps: int) -> float:
    """The noise-free loss after ``steps`` more steps from ``loss`` (a constant configuration
    started at ``curve(..., 0)`` follows ``curve`` exactly)."""
    target = asymptote(hp["lr"], hp["momentum"], hp["width"])
    return target + (loss - target) * math.exp(-rate(hp["lr"], hp["momentum"]) * steps)


def noise_sd(step: int) -> float:
    if scenario == "noisy":
        return 0.1 + 0.3 * math.exp(-step / 20.0)
    return NOISE


def observe(rng: random.Random, hp: dict[str, Any], step: int) -> float:
    return curve(hp["lr"], hp["momentum"], hp["width"], step) + rng.gauss(0.0, noise_sd(step))


def true_final(hp: dict[str, Any]) -> float:
    return curve(hp["lr"], hp["momentum"], hp["width"], MAX_TIME)


HPARAMS = {
    "lr": {"type": "log", "minval": -4, "maxval": 0, "base": 10},
    "momentum": {"type": "double", "minval": 0.0, "maxval": 1.0},
    "width": {"type": "categorical", "vals": list(WIDTHS)},
}


def drive(searcher: Searcher, seed: int, budget: int | None = None) -> tuple[float, int]:
    """Run a search whose trials train to the lengths it hands out, one trial at a time.

    Returns (true loss of the best full-length trial, steps used). With ``budget``, no trial
    starts once the steps used reach it (the search is cut short there).
    """
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
    while pending and (budget is None or steps < budget):
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
    if not finals:
        return math.nan, steps
    _, best = min(finals, key=lambda pair: pair[0])
    return true_final(best), steps


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
        "hyperparameters": HPARAMS,
        "reproducibility": {"experiment_seed": seed},
    }
    return drive(Searcher(config, method=build_search_method(config)), seed)


def tpe_asha(seed: int, budget: int) -> float:
    """det-plugin-optuna's TPE sampler under det's ASHA, cut at ``budget`` steps."""
    from determined.optuna import build_search_method as optuna_method

    config = {
        "searcher": {
            "name": "optuna",
            "sampler": "tpe",
            "metric": "loss",
            "time_metric": "batches",
            "max_time": MAX_TIME,
            # more than the budget allows: the search is cut when it has spent the budget (with
            # 81, ASHA stops most trials at the first rung and the search ends under budget)
            "max_trials": 400,
            "max_concurrent_trials": 8,
            "pruner": {"type": "asha", "divisor": DIVISOR, "max_rungs": 5},
        },
        "hyperparameters": HPARAMS,
        "reproducibility": {"experiment_seed": seed},
    }
    return drive(Searcher(config, method=optuna_method(config)), seed, budget)[0]


PBT_ROUNDS = 9  # rounds of MAX_TIME // PBT_ROUNDS steps


def det_pbt(seed: int, budget: int) -> float:
    """det's ``pbt``: ``budget // MAX_TIME`` members trained for ``MAX_TIME`` steps in rounds.

    Members train round-robin one round at a time (as a population training side by side does);
    a copy starts from its parent's state at the end of the decided round. The answer is the
    member with the best evaluation after the last round; the figure is its noise-free loss.
    """
    population = max(budget // MAX_TIME, 2)
    config = {
        "searcher": {
            "name": "pbt",
            "metric": "loss",
            "population_size": population,
            "num_rounds": PBT_ROUNDS,
            "length_per_round": {"batches": MAX_TIME // PBT_ROUNDS},
            "replace_function": {"truncate_fraction": 0.25},
            "explore_function": {"resample_probability": 0.25, "perturb_factor": 0.2},
        },
        "hyperparameters": HPARAMS,
        "reproducibility": {"experiment_seed": seed},
    }
    searcher = Searcher(config, method=build_search_method(config))
    noise = random.Random(seed * 7919 + 4)
    creates: dict[str, Create] = {}
    state: dict[str, tuple[int, float]] = {}  # steps trained, noise-free loss
    history: dict[str, dict[int, float]] = {}  # the loss at each reported length
    running: collections.deque[str] = collections.deque()
    stopped: set[str] = set()
    last: dict[str, tuple[float, float]] = {}  # observed, true loss at the last round

    def take(actions: list[Any]) -> None:
        queue = collections.deque(actions)
        while queue:
            action = queue.popleft()
            if isinstance(action, Create):
                creates[action.request_id] = action
                hp = action.hparams
                loss = curve(hp["lr"], hp["momentum"], hp["width"], 0)
                if action.parent_request_id is not None:
                    loss = history[action.parent_request_id][action.parent_steps or 0]
                state[action.request_id] = (0, loss)
                history[action.request_id] = {0: loss}
                running.append(action.request_id)
                queue.extend(searcher.trial_created(action.request_id))
            elif isinstance(action, Stop):
                stopped.add(action.request_id)

    take(searcher.initial_trials())
    while running:
        rid = running.popleft()
        length = None if rid in stopped else searcher.next_operation(rid)
        if length is None:
            take(searcher.trial_exited(rid))
            continue
        done, loss = state[rid]
        loss = train(creates[rid].hparams, loss, length - done)
        state[rid] = (length, loss)
        history[rid][length] = loss
        value = loss + noise.gauss(0.0, noise_sd(length))
        last[rid] = (value, loss)
        running.append(rid)
        take(searcher.operation_completed(rid, length, value))
    # the final population: the members that trained to the end of the last round
    method = searcher.method
    assert isinstance(method, PBTSearch)
    per_round = MAX_TIME // PBT_ROUNDS
    finalists = [
        rid for rid in last if state[rid][0] == (PBT_ROUNDS - method.start_round[rid]) * per_round
    ]
    best = min(finalists, key=lambda rid: last[rid][0])
    return last[best][1]


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
        "det TPE+ASHA": [],
        "det pbt": [],
        "Optuna Hyperband": [],
        "random": [],
    }
    budgets = []
    for seed in range(1, seeds + 1):
        asha, budget = det_asha(seed)
        budgets.append(budget)
        results["det adaptive_asha"].append(asha)
        results["det TPE+ASHA"].append(tpe_asha(seed, budget))
        results["det pbt"].append(det_pbt(seed, budget))
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
    best_det = min(
        (name for name in results if name.startswith("det ")),
        key=lambda name: statistics.mean(results[name]),
    )
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
    hyperband = statistics.mean(results["Optuna Hyperband"])
    verdict = "beats" if statistics.mean(results[best_det]) < hyperband else "does NOT beat"
    print(f"best det method: {best_det}, {verdict} Optuna Hyperband's mean")


def main() -> int:
    global scenario
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    for name in args.scenario or SCENARIOS:
        scenario = name
        run_scenario(args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
