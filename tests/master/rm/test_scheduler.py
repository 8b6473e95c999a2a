"""The priority scheduler's rules, table-driven, without processes."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from determined.master.rm import AllocationRequest, PriorityScheduler


def req(
    allocation_id: str,
    slots: int,
    *,
    priority: int = 42,
    job: str | None = None,
    at: float = 0.0,
    max_slots: int | None = None,
) -> AllocationRequest:
    return AllocationRequest(
        allocation_id=allocation_id,
        task_id=allocation_id,
        job_id=job or f"job-{allocation_id}",
        slots=slots,
        priority=priority,
        max_slots=max_slots,
        submitted_at=at,
    )


def started(scheduler: PriorityScheduler) -> dict[str, list[int]]:
    return {start.request.allocation_id: start.slot_ids for start in scheduler.schedule()}


@dataclass
class Case:
    name: str
    requests: list[AllocationRequest]
    expected: list[str]  # allocation ids started by the first pass, in decision order
    total: int = 8
    max_bypass: int = 4
    queued: list[str] = field(default_factory=list)  # left in the queue, in order


CASES = [
    Case("all fit", [req("a", 1), req("b", 2), req("c", 4)], ["a", "b", "c"]),
    Case("exact fill", [req("a", 4), req("b", 4), req("c", 1)], ["a", "b"], queued=["c"]),
    Case("whole machine", [req("a", 8), req("b", 1)], ["a"], queued=["b"]),
    Case(
        "priority beats submission time",
        [req("late", 8, priority=10, at=5.0), req("early", 8, priority=50, at=1.0)],
        ["late"],
        queued=["early"],
    ),
    Case(
        "submission time inside a priority",
        [req("second", 8, at=2.0), req("first", 8, at=1.0)],
        ["first"],
        queued=["second"],
    ),
    Case(
        "ties keep submission order",
        [req("x", 8), req("y", 8), req("z", 8)],
        ["x"],
        queued=["y", "z"],
    ),
    Case(
        "gang: 4 does not start on 3 free slots; smaller ones backfill",
        [req("a", 5, at=1), req("b", 4, at=2), req("c", 2, at=3), req("d", 1, at=4)],
        ["a", "c", "d"],
        queued=["b"],
    ),
    Case(
        "zero-slot requests always start, even on a full machine",
        [req("big", 8, at=1), req("blocked", 8, at=2), req("cpu", 0, at=3)],
        ["cpu", "big"],
        queued=["blocked"],
    ),
    Case(
        "zero slots on a zero-slot machine",
        [req("cpu1", 0), req("cpu2", 0)],
        ["cpu1", "cpu2"],
        total=0,
    ),
    Case(
        "max_slots caps a job; other jobs go on",
        [
            req("a1", 2, job="a", at=1, max_slots=4),
            req("a2", 2, job="a", at=2, max_slots=4),
            req("a3", 2, job="a", at=3, max_slots=4),
            req("b1", 2, job="b", at=4),
        ],
        ["a1", "a2", "b1"],
        queued=["a3"],
    ),
    Case(
        "a request above its own max_slots never starts and blocks nobody",
        [req("huge", 4, max_slots=2, at=1), req("small", 1, at=2)],
        ["small"],
        queued=["huge"],
    ),
    Case(
        "a request above the machine is skipped",
        [req("huge", 9, at=1), req("small", 8, at=2)],
        ["small"],
        queued=["huge"],
    ),
    Case(
        "strict order with max_bypass=0",
        [req("a", 5, at=1), req("b", 4, at=2), req("c", 1, at=3)],
        ["a"],
        max_bypass=0,
        queued=["b", "c"],
    ),
    Case(
        "higher priority gets slots before a lower-priority head",
        [req("low", 4, priority=60, at=1), req("high", 6, priority=1, at=2)],
        ["high"],
        queued=["low"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_first_pass(case: Case) -> None:
    scheduler = PriorityScheduler(case.total, max_bypass=case.max_bypass)
    for request in case.requests:
        scheduler.submit(request)
    starts = scheduler.schedule()
    assert [s.request.allocation_id for s in starts] == case.expected
    assert [r.allocation_id for r in scheduler.queued()] == case.queued
    taken = [slot for s in starts for slot in s.slot_ids]
    assert len(taken) == len(set(taken)), "a slot was given twice"
    for start in starts:
        assert len(start.slot_ids) == start.request.slots


def test_slots_are_lowest_free_first_and_reused_after_release() -> None:
    scheduler = PriorityScheduler(8)
    for name, slots in [("a", 1), ("b", 2), ("c", 4)]:
        scheduler.submit(req(name, slots))
    assert started(scheduler) == {"a": [0], "b": [1, 2], "c": [3, 4, 5, 6]}
    assert scheduler.release("b") == [1, 2]
    scheduler.submit(req("d", 4))
    assert started(scheduler) == {}  # free: 1, 2, 7
    scheduler.release("a")
    assert started(scheduler) == {"d": [0, 1, 2, 7]}
    assert scheduler.used_slots() == 8
    assert scheduler.free_slots() == []


def test_release_starts_the_next_request() -> None:
    scheduler = PriorityScheduler(8)
    scheduler.submit(req("a", 8, at=1))
    scheduler.submit(req("b", 8, at=2))
    assert list(started(scheduler)) == ["a"]
    assert started(scheduler) == {}
    assert scheduler.release("a") == list(range(8))
    assert list(started(scheduler)) == ["b"]
    assert scheduler.release("unknown") == []


def test_withdraw_and_duplicates() -> None:
    scheduler = PriorityScheduler(2)
    scheduler.submit(req("a", 2, at=1))
    scheduler.submit(req("b", 2, at=2))
    with pytest.raises(ValueError, match="allocation_id 'a' was submitted already"):
        scheduler.submit(req("a", 1))
    assert list(started(scheduler)) == ["a"]
    with pytest.raises(ValueError, match="submitted already"):
        scheduler.submit(req("a", 1))
    assert scheduler.withdraw("b") is True
    assert scheduler.withdraw("b") is False
    assert scheduler.withdraw("a") is False  # running, not queued
    scheduler.release("a")
    assert started(scheduler) == {}


def test_max_slots_releases_let_the_job_continue() -> None:
    scheduler = PriorityScheduler(8)
    for i in range(4):
        scheduler.submit(req(f"t{i}", 2, job="exp", at=i, max_slots=4))
    assert list(started(scheduler)) == ["t0", "t1"]
    scheduler.release("t0")
    assert list(started(scheduler)) == ["t2"]
    scheduler.release("t1")
    scheduler.release("t2")
    assert list(started(scheduler)) == ["t3"]


def test_set_job_limits_priority_and_max_slots() -> None:
    scheduler = PriorityScheduler(4)
    scheduler.submit(req("running", 4, job="r", at=0))
    started(scheduler)
    scheduler.submit(req("a", 4, job="A", at=1))
    scheduler.submit(req("b", 4, job="B", at=2))
    scheduler.set_job_limits("B", priority=1)
    assert [r.allocation_id for r in scheduler.queued()] == ["b", "a"]
    scheduler.release("running")
    assert list(started(scheduler)) == ["b"]

    scheduler = PriorityScheduler(8)
    scheduler.set_job_limits("J", max_slots=2)
    for i in range(3):
        scheduler.submit(req(f"j{i}", 1, job="J", at=i))
    assert list(started(scheduler)) == ["j0", "j1"]
    scheduler.set_job_limits("J", weight=2.0)  # max_slots left as it was
    assert started(scheduler) == {}
    scheduler.set_job_limits("J", max_slots=None)  # None removes the cap
    assert list(started(scheduler)) == ["j2"]
    with pytest.raises(ValueError, match="priority"):
        scheduler.set_job_limits("J", priority=0)
    with pytest.raises(ValueError, match="max_slots"):
        scheduler.set_job_limits("J", max_slots=-1)


def test_big_request_is_not_starved_by_a_stream_of_small_ones() -> None:
    """An 8-slot request behind running 1-slot work: at most max_bypass small ones overtake it."""
    scheduler = PriorityScheduler(8, max_bypass=4)
    clock = 0.0
    for i in range(4):
        clock += 1
        scheduler.submit(req(f"s{i}", 1, at=clock))
    assert len(started(scheduler)) == 4
    clock += 1
    scheduler.submit(req("big", 8, at=clock))
    running = {f"s{i}" for i in range(4)}
    overtook = 0
    big_started_at_step = None
    for step in range(100):
        # A new small request arrives, and the oldest running one finishes.
        clock += 1
        scheduler.submit(req(f"n{step}", 1, at=clock))
        oldest = sorted(running, key=lambda a: scheduler.running()[a].request.submitted_at)[0]
        scheduler.release(oldest)
        running.discard(oldest)
        starts = started(scheduler)
        if "big" in starts:
            big_started_at_step = step
            assert starts["big"] == list(range(8))
            break
        overtook += len(starts)
        running.update(starts)
    assert big_started_at_step is not None, "the big request starved"
    assert overtook <= 4
    assert scheduler.bypass_count("big") == 0  # cleared once started


def test_reservation_holds_only_lower_requests() -> None:
    """A blocked request that used up its bypasses stops backfilling, not higher priorities."""
    scheduler = PriorityScheduler(4, max_bypass=1)
    scheduler.submit(req("run", 2, at=0))
    started(scheduler)
    scheduler.submit(req("big", 4, at=1))
    scheduler.submit(req("s1", 1, at=2))
    scheduler.submit(req("s2", 1, at=3))
    assert list(started(scheduler)) == ["s1"]  # one bypass, then the reservation holds
    assert scheduler.bypass_count("big") == 1
    scheduler.submit(req("urgent", 1, priority=1, at=4))
    assert list(started(scheduler)) == ["urgent"]  # ahead of big in order
    assert [r.allocation_id for r in scheduler.queued()] == ["big", "s2"]


def test_state_dict_and_validation() -> None:
    scheduler = PriorityScheduler(2)
    scheduler.submit(req("a", 1))
    scheduler.submit(req("b", 3))
    started(scheduler)
    state = scheduler.state_dict()
    assert state["running"] == {"a": [0]}
    assert state["queued"] == ["b"]
    assert scheduler.unschedulable_reason(req("c", 3)) == (
        "slots_per_trial 3 exceeds the 2 slots of this machine"
    )
    with pytest.raises(ValueError, match="total_slots"):
        PriorityScheduler(-1)
    with pytest.raises(ValueError, match="slots must be an int >= 0"):
        req("x", -1)
    with pytest.raises(ValueError, match=r"priority must be in 1\.\.99"):
        req("x", 1, priority=100)
