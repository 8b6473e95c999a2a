"""core.init() off-cluster and on-cluster (against the fake master): every context works."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import threading

import parallel
import pytest
from fake_master import ALLOCATION_ID, TASK_ID, TOKEN, TRIAL_ID, OnCluster

import determined as det
from determined import core


# ---- off-cluster ----------------------------------------------------------------------------------
def test_off_cluster_every_context(off_cluster: pathlib.Path, tmp_path: pathlib.Path) -> None:
    ckpt_root = tmp_path / "checkpoints"
    src = tmp_path / "src"
    src.mkdir()
    (src / "weights.bin").write_bytes(b"abc")
    with core.init(checkpoint_storage=str(ckpt_root)) as ctx:
        assert ctx.info is None
        assert ctx.distributed.rank == 0 and ctx.distributed.size == 1
        storage_id = ctx.checkpoint.upload(src, {"steps_completed": 5})
        assert (ckpt_root / storage_id / "weights.bin").read_bytes() == b"abc"
        assert json.loads((ckpt_root / storage_id / "metadata.json").read_text()) == {
            "steps_completed": 5
        }
        assert ctx.checkpoint.get_metadata(storage_id) == {"steps_completed": 5}
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
        ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.4})
        ctx.train.report_progress(0.5)
        ctx.train.set_status("working")
        assert ctx.train.get_experiment_best_validation() is None
        ctx.train.set_metadata({"a": {"b": 1}})
        assert ctx.train.get_metadata() == {"a": {"b": 1}}
        ops = list(_run_searcher(ctx))
        assert ops == [1]
        assert ctx.preempt.should_preempt() is False


def _run_searcher(ctx: core.Context) -> list[int]:
    lengths = []
    for op in ctx.searcher.operations():
        lengths.append(op.length)
        op.report_progress(op.length)
        op.report_completed(0.1)
    return lengths


def test_off_cluster_default_storage_is_user_data_dir(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.txt").write_text("x")
    with core.init() as ctx:
        storage_id = ctx.checkpoint.upload(src)
    stored = list(off_cluster.rglob(f"{storage_id}/f.txt"))
    assert len(stored) == 1, f"checkpoint not stored under XDG_DATA_HOME={off_cluster}"
    assert "determined" in stored[0].parts


def test_off_cluster_sigterm_preempts(off_cluster: pathlib.Path, tmp_path: pathlib.Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    sentinel_calls = []
    signal.signal(signal.SIGTERM, lambda *a: sentinel_calls.append(a))
    try:
        with core.init(checkpoint_storage=str(tmp_path / "c")) as ctx:
            assert ctx.preempt.should_preempt() is False
            os.kill(os.getpid(), signal.SIGTERM)
            assert ctx.preempt.should_preempt() is True
        assert sentinel_calls, "the previous SIGTERM handler was not chained"
        assert signal.getsignal(signal.SIGTERM) is not None
    finally:
        signal.signal(signal.SIGTERM, before)


def test_should_preempt_before_start_raises(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    ctx = core.init(checkpoint_storage=str(tmp_path / "c"))
    try:
        with pytest.raises(RuntimeError, match="should_preempt.*before.*start"):
            ctx.preempt.should_preempt()
    finally:
        ctx.close()


def test_off_cluster_preempt_mode_chief_only_on_worker(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    pex = parallel.Execution(2)

    def fn() -> None:
        with (
            core.init(
                distributed=pex.distributed,
                checkpoint_storage=str(tmp_path / "c"),
                preempt_mode=core.PreemptMode.ChiefOnly,
            ) as ctx,
            pex.raises_when(pex.rank != 0, RuntimeError, match="non-chief"),
        ):
            assert ctx.preempt.should_preempt() is False

    pex.run(fn)


def test_user_distributed_context_left_open(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    pex = parallel.Execution(2)

    def fn() -> list[int]:
        with core.init(distributed=pex.distributed, checkpoint_storage=str(tmp_path / "c")):
            pass
        return pex.distributed.allgather(pex.rank)  # still usable after the context closed

    assert pex.run(fn) == [[0, 1], [0, 1]]


def test_bad_checkpoint_storage_type(off_cluster: pathlib.Path) -> None:
    with pytest.raises(TypeError, match="checkpoint_storage"):
        core.init(checkpoint_storage=42)  # type: ignore[arg-type]


# ---- on-cluster -----------------------------------------------------------------------------------
def test_on_cluster_init_starts_run_and_sends_token(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        assert ctx.info is not None and ctx.info.trial.trial_id == TRIAL_ID
        ctx.train.report_progress(0.25)
    starts = fm.find("POST", "/api/v1/runs/start")
    assert len(starts) == 1
    assert starts[0].body["runId"] == TRIAL_ID
    assert starts[0].body["checkpointStorage"]["type"] == "shared_fs"
    for request in fm.requests:
        assert request.headers.get("Grpc-Metadata-x-allocation-token") == f"Bearer {TOKEN}", (
            request.path
        )
    progress = fm.find("POST", rf"/api/v1/trials/{TRIAL_ID}/progress")
    assert [r.body for r in progress] == [{"progress": 0.25, "is_raw": True}]


def test_on_cluster_runs_start_from_chief_only(on_cluster: OnCluster) -> None:
    pex = parallel.Execution(3)

    def fn() -> int | None:
        with core.init(distributed=pex.distributed) as ctx:
            return ctx.checkpoint._storage_backend_id

    assert pex.run(fn) == [1, 1, 1]
    assert len(on_cluster.master.find("POST", "/api/v1/runs/start")) == 1


def test_invalid_hp_reports_early_exit_and_swallows(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init():
        raise det.InvalidHP("lr too large")
    # still running here: the exception was swallowed and the process not exited
    exits = fm.find("POST", rf"/api/v1/trials/{TRIAL_ID}/early_exit")
    assert [r.body for r in exits] == [{"reason": "EXITED_REASON_INVALID_HP"}]


def test_other_exceptions_propagate(on_cluster: OnCluster) -> None:
    with pytest.raises(KeyError), core.init():
        raise KeyError("boom")
    assert not on_cluster.master.find("POST", r".*/early_exit")


def test_status_early_exit_best_validation_metadata(
    on_cluster: OnCluster, caplog: pytest.LogCaptureFixture
) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        ctx.train.set_status("evaluating")
        assert ctx.train.get_experiment_best_validation() is None  # 404 -> None
        fm.best_validation = 0.125
        assert ctx.train.get_experiment_best_validation() == 0.125
        ctx.train.report_early_exit(core.EarlyExitReason.USER_REQUESTED_STOP)
        with caplog.at_level("WARNING", logger="determined.core"):
            ctx.train.report_early_exit(core.EarlyExitReason.USER_REQUESTED_STOP)
        assert "already" in caplog.text
        assert ctx.train.set_metadata({"k": [1, 2]}) == {"k": [1, 2]}
        assert ctx.train.get_metadata() == {"k": [1, 2]}
        with pytest.raises(ValueError, match="progress"):
            ctx.train.report_progress(1.5)
    status = fm.find("POST", rf"/api/v1/trials/{TRIAL_ID}/runner/metadata")
    assert [r.body for r in status] == [{"state": "evaluating"}]
    exits = fm.find("POST", rf"/api/v1/trials/{TRIAL_ID}/early_exit")
    assert [r.body["reason"] for r in exits] == ["EXITED_REASON_USER_REQUESTED_STOP"] * 2
    meta = fm.find("POST", rf"/api/v1/runs/{TRIAL_ID}/metadata")
    assert meta[0].body == {"runId": TRIAL_ID, "metadata": {"k": [1, 2]}}


def test_alert_and_experimental(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        ctx.alert(title="t", description="d", level="warn")
        with pytest.raises(ValueError, match="level"):
            ctx.alert(level="loud")
        ctx.experimental.report_task_using_checkpoint("ckpt-uuid")
    (alert,) = fm.find("POST", "/api/v1/webhooks/custom")
    assert alert.body["data"] == {"title": "t", "description": "d", "level": "LOG_LEVEL_WARNING"}
    assert alert.body["trialId"] == TRIAL_ID
    (source,) = fm.find("POST", "/api/v1/trial-source-info")
    info = source.body["trialSourceInfo"]
    assert info["checkpointUuid"] == "ckpt-uuid" and info["trialId"] == TRIAL_ID
    assert info["trialSourceInfoType"] == "TRIAL_SOURCE_INFO_TYPE_INFERENCE"


def test_on_cluster_checkpoint_report(on_cluster: OnCluster, tmp_path: pathlib.Path) -> None:
    fm = on_cluster.master
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.bin").write_bytes(b"12345")
    (src / "sub" / "b.txt").write_text("xy")
    with core.init() as ctx:
        storage_id = ctx.checkpoint.upload(src, {"steps_completed": 10, "note": "hi"})
        assert ctx.checkpoint.get_metadata(storage_id) == {"steps_completed": 10, "note": "hi"}
    (report,) = fm.find("POST", "/api/v1/checkpoints")
    body = report.body
    assert body["uuid"] == storage_id
    assert body["taskId"] == TASK_ID and body["allocationId"] == ALLOCATION_ID
    assert body["storageId"] == 1
    assert body["state"] == "STATE_COMPLETED" and body["training"] == {}
    assert body["metadata"] == {"steps_completed": 10, "note": "hi"}
    stored_meta = on_cluster.storage_path / storage_id / "metadata.json"
    assert body["resources"] == {
        "a.bin": "5",
        "sub/": "0",
        "sub/b.txt": "2",
        "metadata.json": str(stored_meta.stat().st_size),
    }
    assert body["reportTime"].endswith("Z") or "+00:00" in body["reportTime"]
    assert not (src / "metadata.json").exists(), "upload wrote into the caller's directory"


def test_on_cluster_checkpoint_needs_steps_completed(
    on_cluster: OnCluster, tmp_path: pathlib.Path
) -> None:
    fm = on_cluster.master
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"1")
    with core.init() as ctx:
        with pytest.raises(ValueError, match="steps_completed"):
            ctx.checkpoint.upload(src, {"note": "no steps"})
        with pytest.raises(ValueError, match="steps_completed"):  # noqa: SIM117
            with ctx.checkpoint.store_path({"note": "no steps"}) as (path, _):
                (path / "x").write_text("x")
    assert list(on_cluster.storage_path.iterdir()) == [], "files were uploaded despite the error"
    assert not fm.find("POST", "/api/v1/checkpoints")


def test_on_cluster_store_path_and_delete(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, storage_id):
            (path / "model.pt").write_bytes(b"m" * 7)
        assert (on_cluster.storage_path / storage_id / "model.pt").exists()
        ctx.checkpoint.delete(storage_id)
    assert not (on_cluster.storage_path / storage_id / "model.pt").exists()
    (report,) = fm.find("POST", "/api/v1/checkpoints")
    assert (
        report.body["resources"]["model.pt"] == "7" and "metadata.json" in report.body["resources"]
    )
    (patch,) = fm.find("PATCH", "/api/v1/checkpoints")
    assert patch.body == {"checkpoints": [{"uuid": storage_id, "resources": {"resources": {}}}]}


def test_on_cluster_searcher_length_from_max_length(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        assert ctx.searcher.get_configured_units() == core.Unit.BATCHES
        lengths = []
        for op in ctx.searcher.operations():
            lengths.append(op.length)
            op.report_progress(50)
            op.report_completed(0.5)
    assert lengths == [100]
    bodies = [r.body for r in fm.find("POST", rf"/api/v1/trials/{TRIAL_ID}/progress")]
    assert bodies == [{"progress": 0.5, "is_raw": True}, {"progress": 1.0, "is_raw": True}]


def test_close_is_idempotent_and_threads_finish(on_cluster: OnCluster) -> None:
    before = {t.name for t in threading.enumerate()}
    ctx = core.init().start()
    ctx.train.report_training_metrics(1, {"loss": 1.0})
    ctx.close()
    ctx.close()
    assert on_cluster.master.metric_reports()
    leftover = {t.name for t in threading.enumerate() if t.is_alive()} - before
    assert "det-metrics-shipper" not in leftover
