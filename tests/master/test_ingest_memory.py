"""What a metrics batch keeps alive while it waits for its transaction.

Under load a hundred batches wait for the writer at once. Whatever each keeps alive sits in the
collector's young generations and is scanned again at every collection (pauses of 50-150 ms were
measured with the raw request bodies alive, benchmarks/RESULTS.md), and parsed objects kept for
half a second made parsing them cost 1.5 times as much (the CPU's caches). A waiting batch holds
its body as received, one ``bytes``; the writer parses it right before the transaction that stores
it, and the parsed reports hold no raw report bodies and no per-report empty lists.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import orjson
import requests
from master.conftest import wait_for
from master.test_metric_tiles import _unmanaged_trial
from sqlalchemy import select

from determined.client import Client
from determined.client._client import metrics_body
from determined.master._core._metrics import MetricReport
from determined.master.db import Metric

MARKER = "trialRunId"
"""A key of every raw report body (``metrics_body``) and of nothing the parsed reports hold."""
PROBE = "ingest_memory_probe"
"""A metric only this test reports (other tests' masters may share the test process)."""


def _raw_body(value: Any) -> bool:
    """Whether ``value`` is a raw report body this test sent."""
    if not isinstance(value, dict) or MARKER not in value:
        return False
    inner = value.get("metrics")
    return isinstance(inner, dict) and PROBE in (inner.get("avgMetrics") or {})


def _body(trial_id: int, steps: range) -> bytes:
    """A batch request's body, encoded: the test itself keeps no report dict alive."""
    return orjson.dumps(
        {
            "reports": [
                metrics_body(
                    trial_id, 1, "training", {"loss": 1.0 / s, PROBE: 1.0}, steps_completed=s
                )
                for s in steps
            ]
        }
    )


def test_a_waiting_batch_keeps_only_its_body(sqlite_master: Any) -> None:
    session = sqlite_master.session("determined")
    trial_id = _unmanaged_trial(Client(session))
    writer = sqlite_master.manager.metrics_writer
    url = f"{sqlite_master.url}/api/v1/trials/{trial_id}/metrics/batch"
    headers = {**session.headers(), "Content-Type": "application/json"}
    answers: list[int] = []

    def post(body: bytes) -> None:
        answers.append(requests.post(url, data=body, headers=headers, timeout=60).status_code)

    first, second = _body(trial_id, range(1, 201)), _body(trial_id, range(201, 401))
    # Holding the master's write lock stops the writer inside the first batch's transaction (its
    # reports parsed); the second batch then waits in the writer's queue, not parsed.
    with sqlite_master.db.write():
        threads = [threading.Thread(target=post, args=(body,)) for body in (first, second)]
        threads[0].start()
        wait_for(
            lambda: any(isinstance(o, MetricReport) and PROBE in o.avg for o in gc.get_objects()),
            20,
            "the first batch parsed",
        )
        threads[1].start()
        wait_for(lambda: writer.pending() >= 1, 20, "the second batch in the writer's queue")
        gc.collect()
        alive = gc.get_objects()
        reports = [o for o in alive if isinstance(o, MetricReport) and PROBE in o.avg]
        raw = [o for o in alive if _raw_body(o)]
        empty_lists = sum(1 for r in reports if isinstance(r.batch, list))
        del alive
    for thread in threads:
        thread.join(timeout=60)
    assert answers == [200, 200]
    assert len(reports) == 200, "only the batch in the transaction is parsed"
    assert raw == [], f"{len(raw)} raw report bodies alive while their batch waited"
    assert empty_lists == 0


def test_a_bad_batch_parsed_by_the_writer_fails_alone_naming_its_field(sqlite_master: Any) -> None:
    """The writer parses the waiting requests together, right before their one transaction: a
    malformed body and a bad field each fail their own request with the 400 they always had, and
    the good request beside them is stored."""
    session = sqlite_master.session("determined")
    trial_id = _unmanaged_trial(Client(session))
    writer = sqlite_master.manager.metrics_writer
    url = f"{sqlite_master.url}/api/v1/trials/{trial_id}/metrics/batch"
    headers = {**session.headers(), "Content-Type": "application/json"}
    bad_field = orjson.loads(_body(trial_id, range(201, 204)))
    bad_field["reports"][1]["metrics"]["stepsCompleted"] = "two hundred and two"
    bodies = [
        _body(trial_id, range(1, 201)),
        b'{"reports": [',
        orjson.dumps(bad_field),
        _body(trial_id, range(204, 404)),
    ]
    answers: dict[int, requests.Response] = {}

    def post(index: int) -> None:
        answers[index] = requests.post(url, data=bodies[index], headers=headers, timeout=60)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(bodies))]
    with sqlite_master.db.write():  # the writer stops inside the first request's transaction
        threads[0].start()
        # Taken (out of the queue) and still counted: in the transaction the lock holds.
        wait_for(
            lambda: writer.pending() == 0 and writer._lanes[0].load == 200,
            20,
            "the first request in its transaction",
        )
        for thread in threads[1:]:
            thread.start()
        wait_for(lambda: writer.pending() == 3, 20, "three requests waiting together")
    for thread in threads:
        thread.join(timeout=60)
    assert [answers[i].status_code for i in range(4)] == [200, 400, 400, 200]
    malformed, bad_field_answer = answers[1], answers[2]
    assert "malformed JSON body" in malformed.json()["error"]["error"], malformed.text
    assert "reports[1].metrics.stepsCompleted" in bad_field_answer.json()["error"]["error"], (
        bad_field_answer.text
    )
    with sqlite_master.db.read() as s:
        steps = s.scalars(select(Metric.total_batches).where(Metric.trial_id == trial_id)).all()
    assert sorted(steps) == [*range(1, 201), *range(204, 404)]
