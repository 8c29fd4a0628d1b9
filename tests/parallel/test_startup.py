"""Task placement while a process map's workers start (``dataflow.parallel._startup``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow import DataFromList, MultiProcessMapDataZMQ
from dataflow.parallel._startup import LAZY_BUDGET_S, StartupDispatch

from . import _util as u


def test_before_any_measurement_tasks_are_placed_as_if_every_worker_were_there() -> None:
    d = StartupDispatch(3)
    d.now_ready(0)
    assert d.choose([1, 0, 0], 3, 1, per_item=None) == 1
    assert d.hold(1, (0, [[1]]))
    assert not d.wants_start(None)  # held, but unmeasured: only the pool's deadline starts it
    assert d.wants_start(1e-3)


def test_measured_cheap_map_moves_held_tasks_to_the_ready_worker_in_order() -> None:
    d = StartupDispatch(2)
    d.now_ready(0)
    load = [1, 2]  # worker 0 maps task 0; tasks 1 and 2 wait for worker 1
    d.sent(0, 1)
    for t in (1, 2):
        d.sent(1, 1)
        assert d.hold(1, (t, [[t]]))
    moved = d.rebalance(load, 2, per_item=1e-6)
    assert moved == [(0, (1, [[1]])), (0, (2, [[2]]))]
    assert load == [3, 0] and not d.wants_start(1e-6)


def test_measured_slow_map_keeps_held_tasks_for_the_starting_worker() -> None:
    d = StartupDispatch(2)
    d.now_ready(0)
    load = [1, 1]
    d.sent(0, 1)
    d.sent(1, 1)
    assert d.hold(1, (1, [[1]]))
    per_item = LAZY_BUDGET_S  # one datapoint fills the budget
    assert d.rebalance(load, 2, per_item) == []
    assert d.wants_start(per_item) and load == [1, 1]


def test_a_ready_worker_takes_work_within_the_budget_then_the_starting_ones_do() -> None:
    d = StartupDispatch(2)
    d.now_ready(0)
    per_item = LAZY_BUDGET_S / 100  # 100 datapoints fill the budget
    d.sent(0, 60)
    assert d.choose([1, 0], 2, 40, per_item) == 0  # 100 datapoints: within the budget
    d.sent(0, 40)
    assert d.choose([2, 0], 2, 1, per_item) == 1  # over it: to the worker still starting
    d.done(0, 50)
    assert d.choose([1, 0], 2, 50, per_item) == 0


def test_held_tasks_are_released_in_order_at_ready_and_only_then() -> None:
    d = StartupDispatch(2)
    d.now_ready(0)
    assert not d.hold(0, "a")  # READY: sent at once
    assert d.hold(1, "b") and d.hold(1, "c")
    assert d.wants_start(1.0)
    assert d.now_ready(1) == ["b", "c"]
    assert not d.starting and not d.wants_start(1.0)
    assert d.choose([3, 1], 2, 1, per_item=1.0) == 1  # every worker READY: fewest tasks wins


def test_only_active_workers_are_chosen() -> None:
    d = StartupDispatch(3)
    d.now_ready(0)
    assert d.choose([9, 0, 0], 1, 1, per_item=1.0) == 0  # num_proc="auto" uses one worker


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.integers(1, 64)),
        st.tuples(st.just("ready"), st.integers(0, 3)),
        st.tuples(st.just("measure"), st.floats(1e-7, 1e-2)),
        st.tuples(st.just("result"), st.integers(0, 3)),
        st.tuples(st.just("rebalance"), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 4), ops=_ops)
def test_every_task_reaches_its_worker_once_and_never_early(n: int, ops: list[tuple[str, object]]) -> None:
    """Driven as the map drives it: no task is sent to a worker before its READY; once every
    worker is READY each task has been sent exactly once, a worker's own tasks in the order
    given, and each worker's load is the tasks it was sent and has not finished."""
    d = StartupDispatch(n)
    d.now_ready(0)  # the map waits for worker 0 before its first task
    ready = {0}
    load = [0] * n
    inflight: list[list[int]] = [[] for _ in range(n)]  # sizes, as the workers hold them
    sent: list[list[int]] = [[] for _ in range(n)]  # task numbers in the order sent
    assigned: list[list[int]] = [[] for _ in range(n)]
    per_item: float | None = None
    moved: set[int] = set()  # tasks rebalance gave to another worker than first chosen
    task = 0

    def send(worker: int, t: tuple[int, list[int]]) -> None:
        assert worker in ready
        sent[worker].append(t[0])
        inflight[worker].append(len(t[1]))

    for op, arg in ops:
        if op == "submit":
            size = int(arg)  # type: ignore[call-overload]
            w = d.choose(load, n, size, per_item)
            assert 0 <= w < n
            assigned[w].append(task)
            d.sent(w, size)
            if not d.hold(w, (task, [0] * size)):
                send(w, (task, [0] * size))
            load[w] += 1
            task += 1
        elif op == "ready":
            w = int(arg) % n  # type: ignore[call-overload]
            if w not in ready:
                ready.add(w)
                for t in d.now_ready(w):
                    send(w, t)
        elif op == "rebalance":
            for w, t in d.rebalance(load, n, per_item):
                moved.add(t[0])
                send(w, t)
        elif op == "measure":
            per_item = float(arg)  # type: ignore[arg-type]
        else:
            w = int(arg) % n  # type: ignore[call-overload]
            if inflight[w]:
                d.done(w, inflight[w].pop(0))
                load[w] -= 1
    for w in range(n):
        if w not in ready:
            ready.add(w)
            for t in d.now_ready(w):
                send(w, t)
    assert not d.starting and not d.wants_start(per_item)
    assert sorted(t for ts in sent for t in ts) == list(range(task))  # each task once
    for w in range(n):  # per worker: those not moved in the order given, none lost
        stayed = [t for t in sent[w] if t not in moved]
        assert stayed == [t for t in assigned[w] if t not in moved]
        assert all(t in sent[w] for t in assigned[w] if t not in moved)
    assert load == [len(x) for x in inflight]  # load is what each worker holds


@pytest.mark.timeout(60)
@pytest.mark.parametrize("func", [u.with_pid, u.with_pid_slowly])
@pytest.mark.parametrize("size", [1, 3, 40, 500])
def test_any_epoch_is_complete_and_ordered_while_workers_start(func: object, size: int) -> None:
    """Whether worker 0 serves the first tasks alone (a cheap map) or the others start at
    once (a slow one), every datapoint comes back once, in order, in each of 3 epochs."""
    src = DataFromList([[i] for i in range(size)], shuffle=False)
    with MultiProcessMapDataZMQ(src, 2, func, strict=True, ordered=True) as df:  # type: ignore[arg-type]
        df.reset_state()
        for _ in range(3):
            assert [dp[0] for dp in df] == list(range(size))
