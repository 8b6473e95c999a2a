"""single, random and grid searches driven through the Searcher wrapper."""

from __future__ import annotations

from determined.searcher import Create, ExitedReason, RandomState, Shutdown, sample_hparams


def _creates(actions: list) -> list[Create]:
    return [a for a in actions if isinstance(a, Create)]


def test_random_respects_concurrency_and_replaces_on_exit(config_factory, build_searcher) -> None:
    searcher = build_searcher(config_factory(name="random", max_trials=5, max_concurrent_trials=2))
    first = searcher.initial_trials()
    assert len(first) == 2
    for create in first:
        assert searcher.trial_created(create.request_id) == []
    assert searcher.validation_completed(first[0].request_id, {"nothing": "needed"}) == []
    replacement = searcher.trial_exited(first[0].request_id)
    assert len(_creates(replacement)) == 1


def test_random_hparams_are_reproducible_from_the_experiment_seed(
    config_factory, build_searcher
) -> None:
    config = config_factory(name="random", max_trials=3, max_concurrent_trials=0)
    actions = build_searcher(config).initial_trials()
    assert len(actions) == 3
    assert [a.hparams for a in actions] == [
        a.hparams for a in build_searcher(config).initial_trials()
    ]
    # draw order: hparams, 4 draws of request id, trial seed
    rng = RandomState(42)
    expected = sample_hparams(config["hyperparameters"], rng)
    assert actions[0].hparams == expected
    assert actions[0].hparams["bs"] == 32 and 1 <= actions[0].hparams["layers"] <= 4
    other = build_searcher(config_factory(seed=43, name="random", max_trials=3)).initial_trials()
    assert [a.hparams for a in other] != [a.hparams for a in actions]


def test_random_full_run(config_factory, build_searcher, runner_factory) -> None:
    searcher = build_searcher(config_factory(name="random", max_trials=7, max_concurrent_trials=3))
    runner = runner_factory(searcher).start()
    peak = 0
    while not runner.done:
        runner.step()
        peak = max(peak, len(runner.running) + len(runner.pending))
    assert peak == 3
    assert len(_creates(runner.log)) == 7
    assert runner.shutdown == Shutdown(cancel=False, failure=False)
    assert searcher.progress() == 1.0


def test_single_is_one_trial(config_factory, build_searcher, runner_factory) -> None:
    searcher = build_searcher(config_factory(name="single"))
    runner = runner_factory(searcher).start().run()
    assert len(_creates(runner.log)) == 1
    assert searcher.state_dict()["search_method_state"]["search_method_type"] == "single"


def test_random_invalid_hp_does_not_count(config_factory, build_searcher) -> None:
    searcher = build_searcher(config_factory(name="random", max_trials=2, max_concurrent_trials=1))
    (first,) = searcher.initial_trials()
    searcher.trial_created(first.request_id)
    assert searcher.trial_exited_early(first.request_id, ExitedReason.INVALID_HP) == []
    (second,) = _creates(searcher.trial_exited(first.request_id))
    searcher.trial_created(second.request_id)
    (third,) = _creates(searcher.trial_exited(second.request_id))
    searcher.trial_created(third.request_id)
    assert searcher.trial_exited(third.request_id) == [Shutdown()]


def test_grid_runs_every_point_last_first(config_factory, build_searcher, runner_factory) -> None:
    hparams = {
        "a": {"type": "int", "minval": 1, "maxval": 10, "count": 4},
        "b": {"type": "categorical", "vals": ["x", "y", "z"]},
        "c": 5,
    }
    searcher = build_searcher(
        config_factory(name="grid", hyperparameters=hparams, max_concurrent_trials=5)
    )
    runner = runner_factory(searcher).start()
    assert len(runner.log) == 5
    assert runner.log[0].hparams == {"a": 10, "b": "z", "c": 5}
    assert runner.log[1].hparams == {"a": 10, "b": "y", "c": 5}
    runner.run()
    points = [(c.hparams["a"], c.hparams["b"]) for c in _creates(runner.log)]
    assert len(points) == 12 and len(set(points)) == 12
    assert {a for a, _ in points} == {1, 4, 7, 10}
    assert runner.shutdown == Shutdown()


def test_grid_unlimited_concurrency(config_factory, build_searcher) -> None:
    hparams = {"d": {"type": "double", "minval": 0, "maxval": 1, "count": 3}}
    searcher = build_searcher(
        config_factory(name="grid", hyperparameters=hparams, max_concurrent_trials=0)
    )
    assert [a.hparams["d"] for a in searcher.initial_trials()] == [1.0, 0.5, 0.0]
