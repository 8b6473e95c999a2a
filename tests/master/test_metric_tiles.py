"""Metric tiles agree with the raw rows: the count, first, last, lowest and highest value of every
bucket of every kept level equal what the unarchived ``metrics`` rows give, after batches through
the master's metrics writer (level promotions included) and after rollbacks (a newer run reporting
from an earlier step archives later reports); on SQLite and on PostgreSQL.

Each test runs twice: with the tiles built in the writer's thread, and with every batch built by
a helper process (``_writer_helpers.MIN_ROWS`` 0; a large batch is built there by default).

``tile_mismatches`` is shared with the migration test (tests/master/test_metric_tiles_migration.py).
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import orjson
import pytest
import yaml

from determined.client import Client, MasterClient
from determined.client._client import metrics_body
from determined.master._core import _metric_tiles, _writer_helpers
from determined.master._core._metric_tiles import MAX_BUCKETS, level_min
from determined.master._core._tile_build import LEVELS
from determined.master._core._tile_reads import trial_tiles
from determined.master.db import Database
from determined.master.db._metric_inserts import insert_metric_rows

CONFIG = {"name": "tiles", "searcher": {"name": "single", "metric": "loss"}}


@pytest.fixture(scope="module")
def master(module_db_url: str, make_module_master: Any) -> Any:
    return make_module_master(module_db_url, slots=1)


@pytest.fixture(scope="module")
def client(master: Any) -> Client:
    return Client(master.session("determined"))


@pytest.fixture(autouse=True, params=["writer", "helper"])
def builder(request: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the writer builds the tiles of the test's batches."""
    if request.param == "helper":
        monkeypatch.setattr(_writer_helpers, "MIN_ROWS", 0)
    else:
        monkeypatch.setattr(_writer_helpers, "MIN_ROWS", 10**9)
    return str(request.param)


def _raw(
    db: Database, trial_id: int
) -> tuple[dict[tuple[str, str], list[tuple[int, float]]], dict[str, list[int]]]:
    """``{(group, metric): [(x, y)]}`` of a trial's unarchived numeric reports, in write order,
    and ``{group: [x]}`` of all its unarchived reports."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = {}
    steps: dict[str, list[int]] = {}
    with db.engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT metric_group, total_batches, metrics, archived FROM metrics "
            f"WHERE trial_id = {int(trial_id)} ORDER BY id"
        ).fetchall()
    for group, x, stored, archived in rows:
        if archived:
            continue
        steps.setdefault(group, []).append(int(x))
        stored = orjson.loads(stored) if isinstance(stored, (str, bytes)) else stored
        for name, value in (stored.get("avg_metrics") or {}).items():
            if len(name) > 255:
                continue  # too long a name for a tile: stored raw only
            try:
                y = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(y):
                out.setdefault((group, name), []).append((int(x), y))
    return out, steps


def _expected(points: list[tuple[int, float]], level: int) -> dict[int, tuple[Any, ...]]:
    """Per bucket: (count, first x, first y, last x, last y, min y, max y) computed naively."""
    buckets: dict[int, list[tuple[int, float]]] = {}
    for x, y in points:
        buckets.setdefault(x >> level, []).append((x, y))
    out = {}
    for bucket, inside in buckets.items():
        first = min(inside, key=lambda p: p[0])  # the earliest written among equal x
        last = max(reversed(inside), key=lambda p: p[0])  # the latest written among equal x
        ys = [y for _, y in inside]
        out[bucket] = (len(inside), *first, *last, min(ys), max(ys))
    return out


def tile_mismatches(db: Database, trial_id: int) -> list[str]:
    """Every way a trial's tiles differ from its raw rows (empty when they agree)."""
    raw, steps = _raw(db, trial_id)
    with db.engine.connect() as connection:
        states = {
            g: (run_id, x0, x1, low)
            for g, run_id, x0, x1, low in connection.exec_driver_sql(
                "SELECT metric_group, run_id, x_min, x_max, level_min FROM metric_tile_series "
                f"WHERE trial_id = {int(trial_id)}"
            )
        }
        tiles = trial_tiles(connection, trial_id)
    problems = []
    have: dict[tuple[str, str, int], dict[int, tuple[Any, ...]]] = {}
    for key, found in tiles.items():
        buckets = [bucket for bucket, *_ in found]
        if buckets != sorted(set(buckets)):
            problems.append(f"{key}: buckets out of order or repeated across chunks")
        have[key] = {
            b: (n, fx, fy, lx, ly, mny, mxy) for b, n, fx, fy, lx, ly, _, mny, _, mxy in found
        }
    if set(states) != set(steps):
        problems.append(f"series states {sorted(states)} != groups {sorted(steps)}")
    for group, xs in steps.items():
        if group in states and states[group][1:3] != (min(xs), max(xs)):
            problems.append(f"{group}: x range {states[group][1:3]} != {(min(xs), max(xs))}")
    for (group, metric), points in raw.items():
        if group not in states:
            continue
        low = states[group][3]
        xs = steps[group]
        if low != level_min(max(xs)):
            problems.append(f"{group}: finest level {low} does not fit x_max {max(xs)}")
        for level in [low + offset for offset in LEVELS]:
            want = _expected(points, level)
            got = have.pop((group, metric, level), {})
            if got != want:
                diff = sorted(b for b in set(want) | set(got) if want.get(b) != got.get(b))
                problems.append(
                    f"{group}/{metric} level {level}: buckets {diff[:5]} differ "
                    f"(want {[want.get(b) for b in diff[:2]]}, got {[got.get(b) for b in diff[:2]]})"
                )
    if have:
        problems.append(f"tiles without raw rows: {sorted(have)[:5]}")
    return problems


def _unmanaged_trial(client: Client) -> int:
    exp_id = client.experiments.create_unmanaged(yaml.safe_dump(CONFIG))["experiment"]["id"]
    trial_id = int(client.trials.create_unmanaged(exp_id, {"lr": 0.1})["trial"]["id"])
    client.trials.start_unmanaged(trial_id, resume=False)
    return trial_id


def _report(
    client: Client, trial_id: int, run: int, steps: list[int], group: str = "training"
) -> None:
    """One request of reports at ``steps``: a wiggly loss with a spike, an accuracy on every
    third report, and values the tiles must skip (NaN, a string)."""
    reports = []
    for step in steps:
        loss: Any = 1.0 / (1 + step) + 0.01 * ((step * 7919 + run) % 13)
        if step % 97 == 0:
            loss = 50.0 + run
        if step % 89 == 0:
            loss = "NaN"
        metrics: dict[str, Any] = {"loss": loss, "note": "text", "n" * 300: 1.0}
        if step % 3 == 0:
            metrics["accuracy"] = (step % 101) / 100
        reports.append(metrics_body(trial_id, run, group, metrics, steps_completed=step))
    MasterClient(client.session).report_trial_metrics_batch(trial_id, reports)


def test_tiles_agree_with_raw_rows_after_batches_and_promotions(
    master: Any, client: Client
) -> None:
    trial_id = _unmanaged_trial(client)
    _report(client, trial_id, 1, list(range(1, 400)))
    assert tile_mismatches(master.db, trial_id) == []
    _report(client, trial_id, 1, list(range(400, 3000, 3)))  # past MAX_BUCKETS: promotions
    _report(client, trial_id, 1, [3000, 2999, 3000, 3000])  # out of order and repeated steps
    _report(client, trial_id, 1, list(range(3001, 70000, 211)))  # several promotions at once
    _report(client, trial_id, 1, [10, 20, 30], group="validation")
    assert tile_mismatches(master.db, trial_id) == []
    with master.db.engine.connect() as connection:
        low = connection.exec_driver_sql(
            f"SELECT level_min FROM metric_tile_series WHERE trial_id = {trial_id} "
            "AND metric_group = 'training'"
        ).scalar()
    assert low == level_min(69872) and 69872 >> low < MAX_BUCKETS <= 69872 >> (low - 1)


def test_tiles_agree_after_rollbacks(master: Any, client: Client) -> None:
    trial_id = _unmanaged_trial(client)
    _report(client, trial_id, 1, list(range(1, 4000, 2)))
    _report(client, trial_id, 1, [5, 15], group="validation")
    assert client.trials.start_unmanaged(trial_id)["trialRunId"] == 2
    # Run 2 resumes at step 2500: run 1's reports from there on are archived.
    _report(client, trial_id, 2, list(range(2500, 3500, 5)))
    with master.db.engine.connect() as connection:
        archived = connection.exec_driver_sql(
            f"SELECT COUNT(*) FROM metrics WHERE trial_id = {trial_id} AND archived = true"
        ).scalar()
    assert archived == len(range(2501, 4000, 2))
    assert tile_mismatches(master.db, trial_id) == []
    _report(client, trial_id, 2, list(range(3500, 3600, 5)))  # no rollback: a plain merge
    assert tile_mismatches(master.db, trial_id) == []
    # Run 3 goes back to step 100 and reports far beyond (a promotion in the same batch), then
    # its first validation report rolls back that group too.
    assert client.trials.start_unmanaged(trial_id)["trialRunId"] == 3
    _report(client, trial_id, 3, list(range(100, 9000, 7)))
    _report(client, trial_id, 3, [10], group="validation")
    assert tile_mismatches(master.db, trial_id) == []


def test_tiles_agree_after_single_reports_and_a_rebuild_behind_the_writer(
    master: Any, client: Client
) -> None:
    """One report per request continues the chunk the writer keeps in memory; tiles rebuilt
    behind its back (a bulk load: a raw row added, then ``rebuild``) leave the stored state as it
    was, and the next report must merge into the rebuilt chunk, not the kept one."""
    trial_id = _unmanaged_trial(client)
    for step in range(1, 40):
        _report(client, trial_id, 1, [step])
    assert tile_mismatches(master.db, trial_id) == []
    loaded = {"avg_metrics": {"loss": 99.0}, "batch_metrics": []}
    with master.db.write() as session:
        connection = session.connection()
        now = datetime.datetime.now(datetime.timezone.utc)
        insert_metric_rows(connection, [(trial_id, 1, "training", 35, now, loaded, False)])
        _metric_tiles.rebuild(connection, trial_id, "training", 1)
    assert tile_mismatches(master.db, trial_id) == []
    _report(client, trial_id, 1, [40])  # the same chunk as step 35 at both levels
    assert tile_mismatches(master.db, trial_id) == []
