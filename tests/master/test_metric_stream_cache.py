"""The trial-metrics stream serves a cached reply only while the trial's rows are unchanged: a new
report, a rollback that archives reports, and another group or set of trials are each seen on the
very next read (a real master; reports posted by a user to a paused experiment's trial)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from master.conftest import TRIAL_SCRIPT, Client, context_files, exp_config, wait_for
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from determined.master._api import _metric_stream
from determined.master._api._metric_stream import StreamCache
from determined.master.db import Metric
from determined.master.db._models import Base

WAIT_S = 120.0
PATH = "/api/v1/trials/metrics/trial_metrics"


@pytest.fixture(scope="module")
def master(module_db_url: str, make_module_master: Any) -> Iterator[Any]:
    handle = make_module_master(module_db_url)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def client(master: Any) -> Client:
    return Client(master.url).login()


def _paused_trial(client: Client) -> int:
    body = {
        "config": yaml.safe_dump(exp_config()),
        "modelDefinition": context_files({"trial.py": TRIAL_SCRIPT}),
        "activate": False,
    }
    exp_id = int(client.post("/api/v1/experiments", body)["experiment"]["id"])
    return int(wait_for(lambda: client.trials(exp_id), WAIT_S, "the trial")[0]["id"])


def _report(client: Client, trial_id: int, step: int, loss: float) -> None:
    report = {"trialId": trial_id, "trialRunId": 0, "stepsCompleted": step}
    report["metrics"] = {"avgMetrics": {"loss": loss}}
    client.post(f"/api/v1/trials/{trial_id}/metrics", {"group": "training", "metrics": report})


def _read(client: Client, *trial_ids: int, group: str = "training") -> list[tuple[int, float]]:
    r = client.request("GET", PATH, params={"trialIds": list(trial_ids), "group": group})
    assert r.status_code == 200, r.text
    rows = [m for line in r.text.splitlines() for m in json.loads(line)["result"]["metrics"]]
    return [(m["totalBatches"], m["metrics"]["avg_metrics"]["loss"]) for m in rows]


def test_each_change_is_seen_on_the_next_read(master: Any, client: Client) -> None:
    trial = _paused_trial(client)
    assert _read(client, trial) == []
    _report(client, trial, 1, 0.9)
    assert _read(client, trial) == [(1, 0.9)]
    assert _read(client, trial) == [(1, 0.9)]  # unchanged: the cached reply
    _report(client, trial, 2, 0.8)
    assert _read(client, trial) == [(1, 0.9), (2, 0.8)]
    _report(client, trial, 3, 0.7)
    assert _read(client, trial) == [(1, 0.9), (2, 0.8), (3, 0.7)]
    # What a new run reporting from step 2 does to the old run's reports from step 2 on (the rows
    # count changes, the newest id stays): archived ones are gone at once.
    with master.db.engine.begin() as connection:
        connection.exec_driver_sql(
            f"UPDATE metrics SET archived = true WHERE trial_id = {trial} AND total_batches >= 2"
        )
    assert _read(client, trial) == [(1, 0.9)]
    assert _read(client, trial, group="validation") == []

    other = _paused_trial(client)
    _report(client, other, 7, 0.1)
    assert _read(client, trial, other) == [(1, 0.9), (7, 0.1)]
    assert _read(client, other) == [(7, 0.1)]


def test_the_cache_stays_within_its_bound() -> None:
    cache = StreamCache(max_bytes=400)
    for n in range(10):  # 100-byte replies, built by hand (no database needed for the bound)
        cache.put((n,), (1, n), [b"x" * 100])
    assert cache.size <= 400
    assert len(cache) == 4
    assert cache.get((9,), (1, 9)) == [b"x" * 100] and cache.get((0,), (1, 0)) is None
    assert cache.get((9,), (2, 9)) is None  # another version
    cache.put(("big",), 1, [b"y" * 101])  # over a quarter of the bound: not kept
    assert cache.get(("big",), 1) is None


def test_readers_missing_together_build_the_reply_once(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty readers of the same uncached trial: one reads the rows, the others reuse its reply."""
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        session.add(
            Metric(
                trial_id=1,
                trial_run_id=0,
                group="training",
                total_batches=1,
                metrics={"avg_metrics": {"loss": 1}},
            )
        )
    builds = []
    real = _metric_stream.metric_rows

    def slow_rows(*args: Any) -> Any:
        builds.append(1)
        time.sleep(0.2)  # a long build: every reader arrives while it runs
        return real(*args)

    monkeypatch.setattr(_metric_stream, "metric_rows", slow_rows)
    cache = StreamCache()
    replies: list[list[bytes]] = []
    start = threading.Barrier(20)

    def read() -> None:
        with Session(engine) as session:
            start.wait()
            replies.append(cache.lines(session, [1], "training"))

    threads = [threading.Thread(target=read) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(replies) == 20 and all(r == replies[0] for r in replies)
    assert b'"loss": 1' in replies[0][0]  # the stored JSON text, spliced in unchanged
    assert len(builds) == 1, builds
    assert cache._building == {}  # nothing left behind


def test_a_built_reply_is_one_body_with_a_length_and_a_large_one_streams(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines are built in memory before the reply starts: sending them through a streaming
    reply cost a worker-thread hop per line (the route's tail latency under load), so a reply of
    ordinary size is one body with a ``Content-Length``; one above the limit is still streamed."""
    trial = _paused_trial(client)
    for step in range(1, 4):
        _report(client, trial, step, 1.0 / step)
    params = {"trialIds": [trial], "group": "training"}
    whole = client.request("GET", PATH, params=params)
    assert whole.status_code == 200, whole.text
    assert whole.headers.get("content-length") == str(len(whole.content))
    assert "transfer-encoding" not in whole.headers
    monkeypatch.setattr(_metric_stream, "WHOLE_REPLY_BYTES", 10)
    streamed = client.request("GET", PATH, params=params)
    assert streamed.status_code == 200, streamed.text
    assert streamed.headers.get("transfer-encoding") == "chunked"
    assert streamed.content == whole.content
    assert _read(client, trial) == [(1, 1.0), (2, 0.5), (3, 1.0 / 3)]


def test_an_empty_trial_id_is_refused_naming_the_parameter(client: Client) -> None:
    trial = _paused_trial(client)
    for ids in ([""], [trial, ""]):
        r = client.request("GET", PATH, params={"trialIds": ids, "group": "training"})
        assert r.status_code == 400, r.text
        assert "trialIds" in r.text
