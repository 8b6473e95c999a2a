"""PreemptContext: the master long-poll, acknowledgement once, and the three modes across ranks."""

from __future__ import annotations

import pathlib
import time

import parallel
import pytest
from fake_master import ALLOCATION_ID, OnCluster

from determined import core

POLL = rf"/api/v1/allocations/{ALLOCATION_ID}/signals/preemption"
ACK = rf"/api/v1/allocations/{ALLOCATION_ID}/signals/ack_preemption"


def _wait_true(ctx: core.Context, timeout: float = 5.0, auto_ack: bool = True) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if ctx.preempt.should_preempt(auto_ack=auto_ack):
            return time.monotonic() - started
        time.sleep(0.01)
    raise AssertionError("should_preempt() never became True")


def test_long_poll_and_ack_once(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    with core.init() as ctx:
        assert ctx.preempt.should_preempt() is False
        polls = fm.find("GET", POLL)
        assert polls[0].query["timeout_seconds"] == ["0"]
        fm.wait_for(lambda: len(fm.find("GET", POLL)) >= 2)  # now in the long poll
        assert fm.find("GET", POLL)[1].query["timeout_seconds"] == ["60"]
        fm.set_preempt(True)
        assert _wait_true(ctx) < 1.0
        assert ctx.preempt.should_preempt() is True
        ctx.preempt.acknowledge_preemption_signal()
    assert len(fm.find("POST", ACK)) == 1


def test_no_auto_ack(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    fm.set_preempt(True)
    with core.init() as ctx:
        _wait_true(ctx, auto_ack=False)
        assert not fm.find("POST", ACK)
        ctx.preempt.acknowledge_preemption_signal()
        ctx.preempt.acknowledge_preemption_signal()
    assert len(fm.find("POST", ACK)) == 1


def test_poll_failure_assumes_no_preemption(on_cluster: OnCluster) -> None:
    fm = on_cluster.master
    fm.override("GET", POLL, 500, {"error": {"error": "restarting"}}, times=1)
    with core.init() as ctx:
        assert ctx.preempt.should_preempt() is False
        fm.set_preempt(True)
        _wait_true(ctx)  # the watcher kept polling after the failure


@pytest.mark.parametrize("mode", list(core.PreemptMode))
def test_modes_across_ranks_on_cluster(on_cluster: OnCluster, mode: core.PreemptMode) -> None:
    fm = on_cluster.master
    pex = parallel.Execution(3)

    def fn() -> bool:
        with core.init(distributed=pex.distributed, preempt_mode=mode) as ctx:
            with pex.raises_when(
                mode == core.PreemptMode.ChiefOnly and pex.rank != 0,
                RuntimeError,
                match="should_preempt.*non-chief",
            ):
                first = ctx.preempt.should_preempt()
                assert first is False
            pex.distributed.allgather(None)
            if pex.rank == 0:
                fm.set_preempt(True)
            pex.distributed.allgather(None)
            if mode == core.PreemptMode.ChiefOnly and pex.rank != 0:
                return True
            deadline = time.monotonic() + 5
            while True:
                # WorkersAskChief: every rank calls in step and gets the chief's answer.
                answer = ctx.preempt.should_preempt()
                if mode == core.PreemptMode.ChiefOnly:
                    done = answer  # the chief polls alone; workers already left
                else:
                    done = all(pex.distributed.allgather(answer))
                if done:
                    return answer
                assert time.monotonic() < deadline, "preemption never reached every rank"
                time.sleep(0.01)

    assert pex.run(fn) == [True, True, True]
    polling = {r.headers.get("Grpc-Metadata-x-allocation-token") for r in fm.find("GET", POLL)}
    assert polling
    # One watcher (the chief) unless each rank asks the master itself.
    first_polls = [r for r in fm.find("GET", POLL) if r.query["timeout_seconds"] == ["0"]]
    assert len(first_polls) == (3 if mode == core.PreemptMode.WorkersAskMaster else 1)
    acks = fm.find("POST", ACK)
    assert len(acks) == (3 if mode == core.PreemptMode.WorkersAskMaster else 1)


@pytest.mark.parametrize("mode", list(core.PreemptMode))
def test_modes_across_ranks_off_cluster(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path, mode: core.PreemptMode
) -> None:
    pex = parallel.Execution(2)

    def fn() -> None:
        ctx = core.init(
            distributed=pex.distributed, checkpoint_storage=str(tmp_path / "c"), preempt_mode=mode
        )
        with pytest.raises(RuntimeError, match="cannot call.*should_preempt.*before.*start"):
            ctx.preempt.should_preempt()
        with (
            ctx,
            pex.raises_when(
                mode == core.PreemptMode.ChiefOnly and pex.rank != 0,
                RuntimeError,
                match="should_preempt.*non-chief",
            ),
        ):
            assert ctx.preempt.should_preempt() is False

    pex.run(fn)


def test_start_twice_raises(off_cluster: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with core.init(checkpoint_storage=str(tmp_path / "c")) as ctx:  # noqa: SIM117
        with pytest.raises(RuntimeError, match="already"):
            ctx.preempt.start()
