"""A batch of plain reports is parsed column by column; it must accept, refuse and build exactly
what parsing each report on its own does (the path every other batch still takes)."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import orjson
import pytest

from determined.master._api import _metric_reports
from determined.master._api._metric_reports import parse_reports
from determined.master._wire import APIError


def _plain(step: int, group: str = "training") -> tuple[Any, Any]:
    body = {
        "trialId": 1,
        "trialRunId": 1,
        "stepsCompleted": step,
        "metrics": {"avgMetrics": {"loss": 1.0 / step, "acc": 0.5, "batches": 32}},
    }
    return group, body


def _set(path: tuple[str, ...], value: Any) -> Any:
    def change(body: dict[str, Any]) -> None:
        for key in path[:-1]:
            body = body[key]
        body[path[-1]] = value

    return change


def _drop(path: tuple[str, ...]) -> Any:
    def change(body: dict[str, Any]) -> None:
        for key in path[:-1]:
            body = body[key]
        del body[path[-1]]

    return change


AVG = ("metrics", "avgMetrics")
CHANGES: dict[str, Any] = {
    "steps bool": _set(("stepsCompleted",), True),
    "steps float": _set(("stepsCompleted",), 3.0),
    "steps text": _set(("stepsCompleted",), "5"),
    "steps bad text": _set(("stepsCompleted",), "five"),
    "steps null": _set(("stepsCompleted",), None),
    "steps missing": _drop(("stepsCompleted",)),
    "steps beyond 64 bits": _set(("stepsCompleted",), 2**63),
    "steps below 64 bits": _set(("stepsCompleted",), -(2**63) - 1),
    "steps negative": _set(("stepsCompleted",), -4),
    "run id null": _set(("trialRunId",), None),
    "run id missing": _drop(("trialRunId",)),
    "run id text": _set(("trialRunId",), "2"),
    "run id beyond 64 bits": _set(("trialRunId",), 2**64),
    "run id bool": _set(("trialRunId",), True),
    "metrics null": _set(("metrics",), None),
    "metrics empty": _set(("metrics",), {}),
    "metrics list": _set(("metrics",), [1]),
    "avg null": _set(AVG, None),
    "avg list": _set(AVG, [1]),
    "avg empty": _set(AVG, {}),
    "avg snake case": lambda b: b["metrics"].update(avg_metrics=b["metrics"].pop("avgMetrics")),
    "epoch text": _set((*AVG, "epoch"), "x"),
    "epoch number": _set((*AVG, "epoch"), 1),
    "epochs number text": _set((*AVG, "epochs"), "2.5"),
    "value text": _set((*AVG, "note"), "fine"),
    "value long text": _set((*AVG, "note"), "x" * 70_000),
    "value list": _set((*AVG, "hist"), [1, 2, 3]),
    "value object": _set((*AVG, "hist"), {"a": 1}),
    "value int beyond 64 bits": _set((*AVG, "count"), 2**64),
    "value int at 64 bits": _set((*AVG, "count"), 2**63 - 1),
    "value null": _set((*AVG, "loss"), None),
    "value bool": _set((*AVG, "flag"), True),
    "value nan": _set((*AVG, "loss"), float("nan")),
    "batch metrics": _set(("metrics", "batchMetrics"), [{"loss": 1.0}]),
    "batch metrics empty": _set(("metrics", "batchMetrics"), []),
    "batch metrics zero": _set(("metrics", "batchMetrics"), 0),
    "batch metrics text": _set(("metrics", "batchMetrics"), "x"),
    "batch metrics not objects": _set(("metrics", "batchMetrics"), [1]),
    "batch metrics snake case": _set(("metrics", "batch_metrics"), [{"loss": 2.0}]),
    "report time": _set(("reportTime",), "2026-01-01T00:00:00Z"),
    "report time empty": _set(("reportTime",), ""),
    "report time epoch": _set(("reportTime",), 0),
    "report time bad": _set(("reportTime",), "yesterday"),
    "report time object": _set(("reportTime",), {"t": 1}),
    "report time snake case zero": _set(("report_time",), 0),
}
GROUPS = ["validation", "custom", "", "a.b", 5, None, ["x"]]


def _outcome(pairs: list[tuple[Any, Any]]) -> Any:
    try:
        reports = parse_reports(pairs)
    except APIError as exc:
        return ("error", exc.status, exc.message)
    recent = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    return [
        (
            r.group,
            r.trial_run_id,
            r.steps,
            r.avg,
            list(r.batch),
            "now" if r.report_time > recent else r.report_time,
        )
        for r in reports
    ]


def _both(pairs: list[tuple[Any, Any]], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """The outcome with the column-wise path, and with every report parsed alone."""
    columns = _outcome(copy.deepcopy(pairs))
    with monkeypatch.context() as patch:
        patch.setattr(_metric_reports, "_parse_plain", lambda pairs, now: None)
        alone = _outcome(copy.deepcopy(pairs))
    return columns, alone


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("where", [0, 2])
def test_an_unusual_report_is_parsed_as_on_its_own(
    change: str, where: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = [_plain(step) for step in (1, 2, 3)]
    CHANGES[change](pairs[where][1])
    columns, alone = _both(pairs, monkeypatch)
    assert columns == alone


@pytest.mark.parametrize("group", GROUPS, ids=repr)
def test_groups_are_checked_as_on_their_own(group: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = [_plain(1), _plain(2, group), _plain(3)]
    columns, alone = _both(pairs, monkeypatch)
    assert columns == alone


def test_a_body_that_is_not_an_object_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    for body in (None, [], "x"):
        pairs = [_plain(1), ("training", body)]
        columns, alone = _both(pairs, monkeypatch)
        assert columns == alone == ("error", 400, "reports[1].metrics: must be an object")


def test_a_plain_batch_takes_the_column_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """No report of a plain batch goes through ``parse_report`` (else this path is dead code)."""
    pairs = [_plain(step, "validation" if step % 3 == 0 else "training") for step in range(1, 50)]
    expected = _both(pairs, monkeypatch)[1]

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("parse_report called for a plain batch")

    monkeypatch.setattr(_metric_reports, "parse_report", refuse)
    assert _outcome(pairs) == expected
    assert expected[0][:5] == ("training", 1, 1, {"loss": 1.0, "acc": 0.5, "batches": 32}, [])


@pytest.mark.parametrize(
    "body",
    [
        {"trialRunId": 1, "stepsCompleted": 5, "metrics": {"avgMetrics": {"loss": 1.0}}},
        {"metrics": {"avgMetrics": {"loss": 1.0}}},  # no run id, no steps: both optional
        {"trial_run_id": 1, "steps_completed": 5, "metrics": {"avg_metrics": {"x": 2}}},
    ],
)
def test_a_batch_is_sized_by_its_reports_whatever_keys_they_name(body: dict[str, Any]) -> None:
    """The writer sizes its transactions by this count: a batch whose reports name no run (or use
    the snake_case spellings) counts every report, not one."""
    raw = orjson.dumps({"reports": [{"group": "training", "metrics": body}] * 300})
    assert _metric_reports.batch_size(raw) == 300
    assert (
        len(_metric_reports.parse_batch(raw, datetime.datetime.now(datetime.timezone.utc))) == 300
    )
