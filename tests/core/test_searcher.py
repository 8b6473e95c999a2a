"""SearcherContext: one operation per trial, synchronised across ranks; chief-only reporting."""

from __future__ import annotations

import pathlib

import parallel
import pytest
from fake_master import TRIAL_ID, OnCluster

from determined import core

PROGRESS = rf"/api/v1/trials/{TRIAL_ID}/progress"


def test_off_cluster_one_op_of_length_one(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    with core.init(checkpoint_storage=str(tmp_path / "c")) as ctx:
        ops = []
        for op in ctx.searcher.operations():
            ops.append(op.length)
            op.report_completed(0.0)
    assert ops == [1]


def test_must_report_completed(off_cluster: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with core.init(checkpoint_storage=str(tmp_path / "c")) as ctx:  # noqa: SIM117
        with pytest.raises(RuntimeError, match="must call op.report_completed"):
            for _ in ctx.searcher.operations():
                pass


def test_report_completed_once(off_cluster: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with core.init(checkpoint_storage=str(tmp_path / "c")) as ctx:
        for op in ctx.searcher.operations():
            op.report_completed(1.0)
            with pytest.raises(RuntimeError, match="once"):
                op.report_completed(1.0)
            with pytest.raises(RuntimeError, match="after"):
                op.report_progress(0)
            op.report_progress(op.length)  # same length after completion is fine


def test_workers_ask_chief_on_cluster(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    pex = parallel.Execution(3)

    def fn() -> list[int]:
        lengths = []
        with core.init(distributed=pex.distributed) as ctx:
            for op in ctx.searcher.operations():
                lengths.append(op.length)
                for step in (25, 50, 75):
                    with pex.raises_when(
                        pex.rank != 0, RuntimeError, match="op.report_progress.*chief"
                    ):
                        op.report_progress(step)
                with pex.raises_when(pex.rank != 0, RuntimeError, match="chief"):
                    op.report_completed(0.5)
        return lengths

    assert pex.run(fn) == [[100], [100], [100]]
    progress = [r.body["progress"] for r in fm.find("POST", PROGRESS)]
    assert progress == [0.25, 0.5, 0.75, 1.0]


def test_chief_only_mode(off_cluster: pathlib.Path, tmp_path: pathlib.Path) -> None:
    pex = parallel.Execution(2)

    def fn() -> list[int]:
        with core.init(distributed=pex.distributed, checkpoint_storage=str(tmp_path / "c")) as ctx:
            if pex.rank != 0:
                with pytest.raises(RuntimeError, match="searcher.operations.*chief"):
                    next(iter(ctx.searcher.operations(core.SearcherMode.ChiefOnly)))
                return []
            lengths = []
            for op in ctx.searcher.operations(core.SearcherMode.ChiefOnly):
                lengths.append(op.length)
                op.report_completed(0.0)
            return lengths

    assert pex.run(fn) == [[1], []]


def test_progress_is_clamped(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        for op in ctx.searcher.operations():
            op.report_progress(250)
            op.report_completed(0)
    assert [r.body["progress"] for r in fm.find("POST", PROGRESS)] == [1.0, 1.0]


def test_no_max_length_gives_clear_error(
    on_cluster: OnCluster, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fake_master

    path = tmp_path / "info2" / "cluster.json"
    fake_master.write_cluster_info(
        path,
        on_cluster.master.url,
        on_cluster.storage_path,
        config={"searcher": {"name": "single", "metric": "loss"}},
    )
    monkeypatch.setenv("DET_CLUSTER_INFO", str(path))
    with core.init() as ctx, pytest.raises(ValueError, match="max_length"):
        next(iter(ctx.searcher.operations()))
