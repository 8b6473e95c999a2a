"""TrainContext on-cluster: metric report bodies, the background shipper, batching and errors."""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import pytest
from fake_master import TRIAL_ID, TRIAL_RUN_ID, OnCluster

from determined import core
from determined.core import _metrics
from determined.core._tensorboard import default_tensorboard_path

METRICS = rf"/api/v1/trials/{TRIAL_ID}/metrics"
BATCH = rf"/api/v1/trials/{TRIAL_ID}/metrics/batch"


def test_metric_report_bodies(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        ctx.train.report_training_metrics(
            steps_completed=10, metrics={"loss": 0.5}, batch_metrics=[{"loss": 0.6}, {"loss": 0.4}]
        )
        ctx.train.get_experiment_best_validation()  # flushes the shipper
        ctx.train.report_validation_metrics(steps_completed=10, metrics={"acc": 0.9, "raw": b"x"})
        ctx.train.get_experiment_best_validation()
        ctx.train.report_metrics("inference", steps_completed=11, metrics={"n": 3})
    reports = fm.metric_reports()
    assert [r["group"] for r in reports] == ["training", "validation", "inference"]
    training = reports[0]["metrics"]
    assert training["trialId"] == TRIAL_ID and training["trialRunId"] == TRIAL_RUN_ID
    assert training["stepsCompleted"] == 10
    assert training["metrics"] == {
        "avgMetrics": {"loss": 0.5},
        "batchMetrics": [{"loss": 0.6}, {"loss": 0.4}],
    }
    when = datetime.datetime.fromisoformat(training["reportTime"].replace("Z", "+00:00"))
    assert abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) < 60
    assert reports[1]["metrics"]["metrics"] == {"avgMetrics": {"acc": 0.9}}  # bytes dropped
    assert reports[2]["metrics"]["stepsCompleted"] == 11


def test_metric_argument_errors(on_cluster: OnCluster) -> None:
    with core.init() as ctx:
        with pytest.raises(RuntimeError, match="None"):
            ctx.train.report_validation_metrics(1, {"loss": None})
        with pytest.raises(ValueError, match="group"):
            ctx.train.report_metrics("a.b", 1, {"x": 1})


def test_ordering_preserved_over_many_reports(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        for step in range(300):
            ctx.train.report_training_metrics(steps_completed=step, metrics={"step": step})
    steps = [r["metrics"]["stepsCompleted"] for r in fm.metric_reports()]
    assert steps == list(range(300))


def test_report_does_not_wait_for_a_slow_master(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    gate = fm.hold("POST", METRICS)  # the first metrics POST hangs until released
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})
        fm.wait_for(lambda: fm.find("POST", METRICS))  # the master is now "busy" with it
        returned = threading.Event()

        def report_50() -> None:
            for step in range(2, 52):
                ctx.train.report_training_metrics(step, {"loss": 1.0})
            returned.set()

        reporter = threading.Thread(target=report_50, daemon=True)
        reporter.start()
        # every call returns while the master still holds the first report (it is never answered
        # before the gate opens), however slowly a loaded machine runs them
        assert returned.wait(60), "the reports waited for the master"
        assert not gate.is_set()
        gate.set()
        reporter.join()
    assert [r["metrics"]["stepsCompleted"] for r in fm.metric_reports()] == list(range(1, 52))


def test_batch_endpoint_used_when_available(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    gate = fm.hold("POST", METRICS)
    with core.init() as ctx:
        ctx.train.report_training_metrics(0, {"loss": 0.0})
        fm.wait_for(lambda: fm.find("POST", METRICS))
        for step in range(1, 10):
            ctx.train.report_training_metrics(step, {"loss": float(step)})
        gate.set()
    batches = fm.find("POST", BATCH)
    assert batches, "queued reports were not sent through the batch endpoint"
    assert len(fm.find("POST", METRICS)) == 1
    assert [len(b.body["reports"]) for b in batches] == [9]
    assert [r["metrics"]["stepsCompleted"] for r in batches[0].body["reports"]] == list(
        range(1, 10)
    )
    assert all(r["group"] == "training" for r in batches[0].body["reports"])


def test_batch_endpoint_falls_back_on_404(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    fm.batch_supported = False
    gate = fm.hold("POST", METRICS)
    with core.init() as ctx:
        ctx.train.report_training_metrics(0, {"loss": 0.0})
        fm.wait_for(lambda: fm.find("POST", METRICS))
        for step in range(1, 10):
            ctx.train.report_training_metrics(step, {"loss": float(step)})
        gate.set()
    assert len(fm.find("POST", BATCH)) == 1  # tried once, then remembered
    singles = fm.find("POST", METRICS)
    assert [r.body["metrics"]["stepsCompleted"] for r in singles] == list(range(10))


def test_failed_post_surfaces_on_next_report(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    fm.override("POST", METRICS + "(/batch)?", 500, {"error": {"error": "database on fire"}})
    ctx = core.init().start()
    try:
        ctx.train.report_training_metrics(1, {"loss": 1.0})
        deadline = time.monotonic() + 10
        with pytest.raises(RuntimeError, match="database on fire"):
            while time.monotonic() < deadline:
                ctx.train.report_training_metrics(2, {"loss": 1.0})
                fm.wait_for(lambda: fm.find("POST", METRICS + "(/batch)?"), timeout=1)
    finally:
        with pytest.raises(RuntimeError, match="database on fire"):
            ctx.close()


def test_failed_post_surfaces_at_close(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    fm.override("POST", METRICS + "(/batch)?", 500, {"error": {"error": "nope"}})
    with pytest.raises(RuntimeError, match="nope"), core.init() as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})


def test_metrics_post_is_not_retried_after_a_500(on_cluster: OnCluster) -> None:
    """A 500 may come after the report was stored: sending it again could store it twice."""
    fm = on_cluster.master
    fm.override("POST", METRICS, 500, {"error": {"error": "broken"}})
    with pytest.raises(RuntimeError, match="broken"), core.init() as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})
    assert len(fm.find("POST", METRICS)) == 1


def test_metrics_post_is_retried_for_the_window_after_a_503(
    on_cluster: OnCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 503 says nothing was stored (a locked or restarting database): the trial retries it for
    its retry window (``DET_MASTER_RETRY_WINDOW``), then the error surfaces."""
    monkeypatch.setenv("DET_MASTER_RETRY_WINDOW", "0.5")
    fm = on_cluster.master
    fm.override("POST", METRICS, 503, {"error": {"error": "busy"}})
    with pytest.raises(RuntimeError, match="busy"), core.init() as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})
    assert len(fm.find("POST", METRICS)) >= 2


def test_nan_metrics_encoded_as_strings(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        ctx.train.report_training_metrics(
            1, {"a": float("nan"), "b": float("inf"), "c": -float("inf")}
        )
    (report,) = fm.metric_reports()
    assert report["metrics"]["metrics"]["avgMetrics"] == {
        "a": "NaN",
        "b": "Infinity",
        "c": "-Infinity",
    }


def test_tensorboard_manual_mode(on_cluster: OnCluster) -> None:
    with core.init(tensorboard_mode=core.TensorboardMode.AUTO) as ctx:
        with pytest.raises(RuntimeError, match="MANUAL"):
            ctx.train.upload_tensorboard_files()
        assert ctx.train.get_tensorboard_path().is_dir()


def test_tensorboard_files_uploaded_and_local_copy_removed_at_close(on_cluster: OnCluster) -> None:
    with core.init() as ctx:
        local = ctx.train.get_tensorboard_path()
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
    assert not local.exists(), "the trial's temporary TensorBoard directory outlived the trial"
    uploaded = [p.name for p in on_cluster.storage_path.rglob("*") if p.is_file()]
    assert uploaded and all(n.startswith("events.out.tfevents.") for n in uploaded), uploaded


def test_tensorboard_manual_mode_keeps_the_local_directory(on_cluster: OnCluster) -> None:
    with core.init(tensorboard_mode=core.TensorboardMode.MANUAL) as ctx:
        local = ctx.train.get_tensorboard_path()
        (local / "mine.txt").write_text("not uploaded yet")
    assert (local / "mine.txt").exists()  # MANUAL: the caller decides what reaches storage


def _recording_shipper(linger: float) -> tuple[_metrics.MetricsShipper, list[list[int]], Any]:
    """A shipper whose sends record each batch's steps (the condition is notified on every send),
    after it sent a first report at step 1."""
    sent: list[list[int]] = []
    changed = threading.Condition()

    def send(batch: list[_metrics.MetricsReport]) -> None:
        with changed:
            sent.append([int(r.steps_completed or 0) for r in batch])
            changed.notify_all()

    shipper = _metrics.MetricsShipper(send, linger=linger)
    shipper.start()
    # One report sent: the linger starts now, so the next report is held.
    shipper.report("training", {"loss": 1.0}, 1)
    shipper.flush(timeout=30)
    return shipper, sent, changed


def test_frequent_reports_share_a_request_within_the_linger() -> None:
    """A report coming right after a send waits for the ones that follow it (one request for
    many, so a trial reporting every few milliseconds costs the master a request per linger)."""
    shipper, sent, _ = _recording_shipper(linger=600.0)
    for step in range(2, 6):
        shipper.report("training", {"loss": 1.0}, step)
    assert sent == [[1]]  # held: the last send was less than the linger ago
    shipper.flush(timeout=30)
    assert sent == [[1], [2, 3, 4, 5]]
    shipper.close()


def test_a_validation_report_goes_at_once_with_what_waited() -> None:
    """The searcher acts on validation reports: one never waits for the linger."""
    shipper, sent, changed = _recording_shipper(linger=600.0)
    shipper.report("training", {"loss": 1.0}, 2)
    shipper.report("validation", {"loss": 1.0}, 2)
    with changed:
        assert changed.wait_for(lambda: len(sent) == 2, timeout=30)
    assert sent == [[1], [2, 2]]
    shipper.close()


def test_close_sends_what_waits_for_the_linger() -> None:
    shipper, sent, _ = _recording_shipper(linger=600.0)
    shipper.report("training", {"loss": 1.0}, 2)
    began = time.monotonic()
    shipper.close()
    assert sent == [[1], [2]]
    assert time.monotonic() - began < 300  # did not sit out the linger


def test_the_local_tensorboard_directory_is_the_masters_own(on_cluster: OnCluster) -> None:
    """Two masters' trials with the same allocation id (experiment 1 of each, created in the same
    second: the default seed is the time) write different local directories; a CI run saw one
    trial's TensorBoard writer fail because another master's trial removed the shared one."""
    with core.init() as ctx:
        local = ctx.train.get_tensorboard_path()
        assert "fake-cluster" in local.name
    allocation = "1.de42cd0e-69a0-404a-a021-fa9273660e5e.1"
    first = default_tensorboard_path(allocation, 0, "cluster-a")
    second = default_tensorboard_path(allocation, 0, "cluster-b")
    assert first != second
    assert first.parent == second.parent
