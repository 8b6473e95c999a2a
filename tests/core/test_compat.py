"""Upstream's Dummy* names and _dummy_init still work, as factories of det's one implementation."""

from __future__ import annotations

import pathlib

import pytest

import determined as det
from determined import core
from determined.storage import build


def test_dummy_contexts_behave_like_the_local_ones(tmp_path: pathlib.Path) -> None:
    dist = core.DummyDistributedContext()
    assert (dist.rank, dist.size) == (0, 1)
    assert dist.allgather("x") == ["x"]
    storage = build({"type": "shared_fs", "host_path": str(tmp_path)})
    checkpoint = core.DummyCheckpointContext(dist, storage)
    with checkpoint.store_path({"steps_completed": 3}) as (path, uuid):
        (path / "w").write_text("weights")
    assert (tmp_path / uuid / "w").read_text() == "weights"
    assert checkpoint.get_metadata(uuid) == {"steps_completed": 3}

    preempt = core.DummyPreemptContext(dist, core.PreemptMode.ChiefOnly)
    preempt.start()
    assert preempt.should_preempt() is False
    preempt.close()

    searcher = core.DummySearcherContext(dist, length=7)
    lengths = []
    for op in searcher.operations():
        lengths.append(op.length)
        op.report_completed(0.5)
    assert lengths == [7]

    op = core.DummySearcherOperation(5, is_chief=True)
    assert op.length == 5

    train = core.DummyTrainContext(tensorboard_path=tmp_path / "tb")
    train.report_training_metrics(1, {"loss": 1.0})
    assert train.get_tensorboard_path() == tmp_path / "tb"
    train._close()

    core.DummyProfilerContext().off()
    core.DummyExperimentalCoreContext().report_task_using_checkpoint(uuid)


def test_dummy_init_ignores_the_cluster_and_honours_its_arguments(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_CLUSTER_INFO", str(tmp_path / "missing.json"))  # would fail if read
    with core._dummy_init(
        checkpoint_storage=str(tmp_path / "ckpt"), tensorboard_path=tmp_path / "tb"
    ) as ctx:
        assert ctx.info is None
        assert ctx.train.get_tensorboard_path() == tmp_path / "tb"
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
            (path / "a").write_text("1")
    assert (tmp_path / "ckpt" / uuid / "a").exists()
    assert det.core.init is core.init
