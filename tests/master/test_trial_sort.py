"""The master's trial order for ``GET /api/v1/experiments/{id}/trials?sortBy=...`` (pure function)."""

from __future__ import annotations

import pytest

from determined.master._api._trial_sort import TRIAL_SORTS, check_trial_sort, sort_trial_json


def _trial(trial_id: int, **fields: object) -> dict[str, object]:
    return {"id": trial_id, **fields}


def test_unknown_sort_is_a_value_error_naming_sortby() -> None:
    assert check_trial_sort(None) == "SORT_BY_UNSPECIFIED"
    assert all(check_trial_sort(value) == value for value in TRIAL_SORTS)
    with pytest.raises(ValueError, match="sortBy: unsupported value 'SORT_BY_NAME'"):
        sort_trial_json([], "SORT_BY_NAME")


def test_best_validation_uses_the_signed_metric_and_missing_values_come_last() -> None:
    trials = [
        _trial(1, searcherMetricValue=0.5),
        _trial(2, searcherMetricValue=None),
        _trial(3, searcherMetricValue=0.9),
        _trial(4, searcherMetricValue=0.5),
    ]
    ids = [t["id"] for t in sort_trial_json(trials, "SORT_BY_BEST_VALIDATION_METRIC")]
    assert ids == [1, 4, 3, 2]
    larger = sort_trial_json(trials, "SORT_BY_BEST_VALIDATION_METRIC", smaller_is_better=False)
    assert [t["id"] for t in larger] == [3, 1, 4, 2]
    descending = sort_trial_json(trials, "SORT_BY_BEST_VALIDATION_METRIC", descending=True)
    assert [t["id"] for t in descending] == [3, 4, 1, 2]


def test_latest_validation_reads_the_searcher_metric_of_the_latest_validation() -> None:
    def latest(value: object) -> dict[str, object]:
        return {"metrics": {"avgMetrics": {"loss": value}}}

    trials = [
        _trial(1, latestValidation=latest(2.0)),
        _trial(2, latestValidation=latest("nan")),
        _trial(3, latestValidation=latest(1.0)),
    ]
    ordered = sort_trial_json(trials, "SORT_BY_LATEST_VALIDATION_METRIC", searcher_metric="loss")
    assert [t["id"] for t in ordered] == [3, 1, 2]


def test_field_sorts_and_checkpoint_size() -> None:
    trials = [
        _trial(2, restarts=1, totalCheckpointSize="300"),
        _trial(1, restarts=0, totalCheckpointSize=None),
        _trial(3, restarts=1, totalCheckpointSize="20"),
    ]
    assert [t["id"] for t in sort_trial_json(trials, "SORT_BY_RESTARTS")] == [1, 2, 3]
    assert [t["id"] for t in sort_trial_json(trials, "SORT_BY_CHECKPOINT_SIZE")] == [1, 3, 2]
    assert [t["id"] for t in sort_trial_json(trials, None, descending=True)] == [3, 2, 1]
