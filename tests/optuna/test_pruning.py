"""Early stopping: det's ASHA arithmetic stops trials, the study learns from them, pruners prune."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from optuna.trial import TrialState

from determined.master.searchers import AsyncHalvingSearch, Searcher
from determined.master.testing.searcher_suite import FakeTrialRunner
from determined.searcher import Create, ExitedReason, RandomState, SearchContext, Stop

HPARAMS = {
    "lr": {"type": "log", "minval": -5, "maxval": 0, "base": 10},
    "width": {"type": "categorical", "vals": [16, 32, 64]},
}


def _loss(create: Create, length: int) -> float:
    """Best at lr = 1e-3; every trial improves with length, so rungs rank truly."""
    return (math.log10(create.hparams["lr"]) + 3.0) ** 2 + 10.0 / length


def _run(config: dict, build_searcher: Callable, **kwargs: object) -> FakeTrialRunner:
    runner = FakeTrialRunner(build_searcher(config), max_time=27, metric=_loss, **kwargs)
    return runner.start().run()


def test_asha_stops_as_det_async_halving_and_the_study_knows_why(
    optuna_config_factory: Callable[..., dict], build_searcher: Callable
) -> None:
    config = optuna_config_factory(
        hyperparameters=HPARAMS,
        max_time=27,
        max_trials=24,
        max_concurrent_trials=3,
        pruner={"type": "asha", "divisor": 3, "max_rungs": 3},
    )
    reports: list[tuple[str, int, float]] = []

    def metric(create: Create, length: int) -> float:
        reports.append((create.request_id, length, _loss(create, length)))
        return reports[-1][2]

    runner = FakeTrialRunner(build_searcher(config), max_time=27, metric=metric).start().run()
    method = runner.searcher.method
    study = method.study.study
    assert method.rung_lengths("unknown") == [3, 9, 27]  # det's rungs for 27 / 3
    # every trial's study record tells how far it got: PRUNED below 27, COMPLETE at 27
    assert len(runner.lengths) == 24
    for request_id, length in runner.lengths.items():
        trial = study.trials[method.study.numbers[request_id]]
        assert sorted(trial.intermediate_values) == [n for n in (3, 9, 27) if n <= length]
        if length == 27:
            assert trial.state == TrialState.COMPLETE
            assert trial.value == trial.intermediate_values[27]
        else:
            assert trial.state == TrialState.PRUNED
    completed = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert 1 <= len(completed) < 12
    # the same reports, replayed into det's own async_halving, give the same stops in order
    replay = AsyncHalvingSearch(
        metric="val_loss",
        smaller_is_better=True,
        time_metric="batches",
        max_time=27,
        num_rungs=3,
        max_trials=24,
        divisor=3,
        max_concurrent_trials=3,
    )
    ctx = SearchContext(RandomState(0), {})
    replayed: list[str] = []
    for request_id, length, value in reports:
        if request_id not in replay.trial_rungs:
            replay.trial_created(ctx, request_id)
        actions = replay.validation_completed(
            ctx, request_id, {"val_loss": value, "batches": length}
        )
        replayed += [a.request_id for a in actions if isinstance(a, Stop)]
    assert replayed == [a.request_id for a in runner.log if isinstance(a, Stop)]


def test_tpe_learns_from_stopped_trials(
    optuna_config_factory: Callable[..., dict], build_searcher: Callable
) -> None:
    def last_errors(sampler: str) -> float:
        config = optuna_config_factory(
            hyperparameters=HPARAMS,
            sampler=sampler,
            max_time=27,
            max_trials=40,
            max_concurrent_trials=2,
            n_startup_trials=8,
            pruner={"type": "asha", "divisor": 3, "max_rungs": 3},
        )
        runner = _run(config, build_searcher)
        study = runner.searcher.method.study.study
        assert len([t for t in study.trials if t.state == TrialState.PRUNED]) > 20
        creates = [a for a in runner.log if isinstance(a, Create)]
        return statistics.mean(abs(math.log10(c.hparams["lr"]) + 3.0) for c in creates[-16:])

    # Most trials were stopped at a rung: TPE learned from their rung reports that lr = 1e-3 is
    # best (|log10 lr + 3| is ~1.4 on average for random points of [-5, 0]).
    assert last_errors("tpe") < 0.7 * last_errors("random")


def test_errored_trials_are_failed_in_the_study(
    optuna_config_factory: Callable[..., dict], build_searcher: Callable
) -> None:
    config = optuna_config_factory(hyperparameters=HPARAMS, max_time=27, max_trials=6)
    first: list[str] = []

    def fail(create: Create) -> ExitedReason | None:
        if not first:
            first.append(create.request_id)
        return ExitedReason.ERRORED if create.request_id == first[0] else None

    runner = _run(config, build_searcher, fail=fail)
    method = runner.searcher.method
    assert method.study.study.trials[method.study.numbers[first[0]]].state == TrialState.FAIL
    assert runner.shutdown is not None and not runner.shutdown.failure


def test_optuna_pruners_stop_trials_before_the_full_length(
    optuna_config_factory: Callable[..., dict], build_searcher: Callable
) -> None:
    for pruner, lengths in (
        ({"type": "median", "n_startup_trials": 2, "num_checks": 3}, [9, 18, 27]),
        ({"type": "hyperband", "min_resource": 3, "reduction_factor": 3}, [3, 9, 27]),
    ):
        config = optuna_config_factory(
            hyperparameters=HPARAMS,
            sampler="random",
            max_time=27,
            max_trials=16,
            max_concurrent_trials=2,
            pruner=pruner,
        )
        runner = _run(config, build_searcher)
        searcher: Searcher = runner.searcher
        assert searcher.rung_lengths("any") == lengths
        assert len(runner.creates) == 16
        stopped_early = [rid for rid, n in runner.lengths.items() if n < 27]
        assert stopped_early, pruner
        study = searcher.method.study.study
        for request_id in stopped_early:
            assert (
                study.trials[searcher.method.study.numbers[request_id]].state == TrialState.PRUNED
            )
        assert runner.shutdown is not None and not runner.shutdown.failure
