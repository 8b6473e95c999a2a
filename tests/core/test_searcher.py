"""SearcherContext: one operation per trial, synchronised across ranks; chief-only reporting."""

from __future__ import annotations

import pathlib

import fake_master
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


# ---- operations handed out by the master (upstream 0.37's protocol) ------------------------------

OPERATION = rf"/api/v1/trials/{TRIAL_ID}/searcher/operation"
COMPLETED = rf"/api/v1/trials/{TRIAL_ID}/searcher/completed_operation"


def _serve_ops(fm: fake_master.FakeMaster, *lengths: int) -> None:
    """Answer the next GETs of the operation with ``lengths`` (as protojson's strings), then
    ``completed: true`` for good."""
    for length in lengths:
        body = {"op": {"validateAfter": {"length": str(length)}}, "completed": False}
        fm.override("GET", OPERATION, body=body, times=1)
    fm.override("GET", OPERATION, body={"op": None, "completed": True})
    fm.override("POST", COMPLETED, body={})


def test_on_cluster_operations_come_from_the_master(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    _serve_ops(fm, 25, 100)
    lengths = []
    with core.init() as ctx:
        for op in ctx.searcher.operations():
            lengths.append(op.length)
            op.report_progress(op.length / 2)
            op.report_completed(op.length / 1000)
    assert lengths == [25, 100]
    assert len(fm.find("GET", OPERATION)) == 3  # two ops, then completed
    assert [r.body for r in fm.find("POST", COMPLETED)] == [
        {"op": {"length": 25}, "searcherMetric": 0.025},
        {"op": {"length": 100}, "searcherMetric": 0.1},
    ]
    assert [r.body["progress"] for r in fm.find("POST", PROGRESS)] == [0.125, 0.25, 0.5, 1.0]
    (request,) = fm.find("GET", OPERATION)[:1]
    assert request.headers["Grpc-Metadata-x-allocation-token"] == f"Bearer {fake_master.TOKEN}"


def test_an_operation_given_with_a_completion_is_not_asked_for(on_cluster: OnCluster) -> None:
    """det's master gives the next operation with each completion (``nextOperation``): the trial
    asks only for its first one."""
    fm = on_cluster.master
    first = {"op": {"validateAfter": {"length": "25"}}, "completed": False}
    fm.override("GET", OPERATION, body=first, times=1)
    following = {"op": {"validateAfter": {"length": "100"}}, "completed": False}
    fm.override("POST", COMPLETED, body={"nextOperation": following}, times=1)
    fm.override("POST", COMPLETED, body={"nextOperation": {"op": None, "completed": True}})
    lengths = []
    with core.init() as ctx:
        for op in ctx.searcher.operations():
            lengths.append(op.length)
            op.report_completed(1.0)
    assert lengths == [25, 100]
    assert len(fm.find("GET", OPERATION)) == 1
    assert len(fm.find("POST", COMPLETED)) == 2


def test_a_stopped_trial_gets_no_operation(on_cluster: OnCluster) -> None:
    _serve_ops(on_cluster.master)
    with core.init() as ctx:
        assert list(ctx.searcher.operations()) == []
    assert on_cluster.master.find("POST", COMPLETED) == []


def test_workers_ask_chief_broadcasts_each_operation_and_the_end(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    _serve_ops(fm, 10, 40, 160)
    pex = parallel.Execution(3)

    def fn() -> list[int]:
        lengths = []
        with core.init(distributed=pex.distributed) as ctx:
            for op in ctx.searcher.operations():
                lengths.append(op.length)
                with pex.raises_when(pex.rank != 0, RuntimeError, match="chief"):
                    op.report_completed(1.0 / op.length)
        return lengths

    assert pex.run(fn) == [[10, 40, 160]] * 3
    assert len(fm.find("GET", OPERATION)) == 4  # only the chief asks
    assert [r.body["op"]["length"] for r in fm.find("POST", COMPLETED)] == [10, 40, 160]


def test_chief_only_mode_asks_the_master(on_cluster: OnCluster) -> None:
    _serve_ops(on_cluster.master, 5)
    with core.init() as ctx:
        lengths = []
        for op in ctx.searcher.operations(core.SearcherMode.ChiefOnly):
            lengths.append(op.length)
            op.report_completed(0)
    assert lengths == [5]


def test_master_refusal_is_a_clear_error_on_every_rank(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    message = "searcher.max_length: the searcher loop needs a training length"
    fm.override("GET", OPERATION, status=400, body={"error": {"error": message}})
    pex = parallel.Execution(2)

    def fn() -> None:
        with core.init(distributed=pex.distributed) as ctx:
            if pex.rank == 0:
                with pytest.raises(ValueError, match=r"searcher\.max_length"):
                    next(iter(ctx.searcher.operations()))
            else:  # the chief's error type, so code catching it works on every rank
                with pytest.raises(
                    ValueError, match=r"failed on the chief: ValueError.*max_length"
                ):
                    next(iter(ctx.searcher.operations()))

    pex.run(fn)


def test_searcher_metric_must_be_a_number_for_the_master(on_cluster: OnCluster) -> None:
    _serve_ops(on_cluster.master, 5)
    with core.init() as ctx:
        for op in ctx.searcher.operations():
            with pytest.raises(RuntimeError, match="NaN"):
                op.report_completed(float("nan"))
            with pytest.raises(TypeError, match="searcher_metric"):
                op.report_completed({"loss": 1})
            op.report_completed(2)  # the failed calls did not complete the operation
    (posted,) = on_cluster.master.find("POST", COMPLETED)
    assert posted.body["searcherMetric"] == 2.0


def test_master_without_the_protocol_gives_one_operation(on_cluster: OnCluster) -> None:
    fm = on_cluster.master  # the fake answers 404 for the operation routes by default
    with core.init() as ctx:
        lengths = []
        for op in ctx.searcher.operations():
            lengths.append(op.length)
            op.report_completed(float("nan"))  # not sent anywhere: accepted, as upstream 0.38
    assert lengths == [100]
    assert len(fm.find("GET", OPERATION)) == 1
    assert fm.find("POST", COMPLETED) == []
