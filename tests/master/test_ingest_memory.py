"""What a metrics batch keeps alive while it waits for its commit.

Under load a hundred batches wait for the writer at once; whatever each keeps alive sits in the
collector's young generations and is scanned again at every collection (pauses of 50-150 ms were
measured with the raw request bodies alive, benchmarks/RESULTS.md). Once parsed, a waiting batch
holds its parsed reports only: no raw report bodies, no per-report empty lists.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import orjson
import requests
from master.conftest import wait_for
from master.test_metric_tiles import _unmanaged_trial

from determined.client import Client
from determined.client._client import metrics_body
from determined.master._core._metrics import MetricReport

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


def test_a_waiting_batch_keeps_only_its_parsed_reports(sqlite_master: Any) -> None:
    session = sqlite_master.session("determined")
    trial_id = _unmanaged_trial(Client(session))
    writer = sqlite_master.manager.metrics_writer
    url = f"{sqlite_master.url}/api/v1/trials/{trial_id}/metrics/batch"
    headers = {**session.headers(), "Content-Type": "application/json"}
    answers: list[int] = []

    def post(body: bytes) -> None:
        answers.append(requests.post(url, data=body, headers=headers, timeout=60).status_code)

    first, second = _body(trial_id, range(1, 201)), _body(trial_id, range(201, 401))
    # Holding the master's write lock stops the writer inside the first batch's transaction; the
    # second batch, parsed, then waits in the writer's queue.
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
    assert len(reports) == 400
    assert raw == [], f"{len(raw)} raw report bodies alive while their batch waited"
    assert empty_lists == 0
