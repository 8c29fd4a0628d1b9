"""Task placement while a process map's workers start (``MultiProcessMapDataZMQ._choose``,
``_rebalance``, ``_now_ready``; see the module docstring of ``dataflow.parallel._maps``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow import DataFromList, MultiProcessMapDataZMQ
from dataflow.parallel._maps import LAZY_BUDGET_S

from . import _util as u


class _Placing(MultiProcessMapDataZMQ):
    """The map's start-up placement driven by hand: no process is started, sends are
    recorded (and must go to a READY worker)."""

    def __init__(self, n: int) -> None:
        super().__init__(DataFromList([[0]], shuffle=False), n, u.double)
        self._load = [0] * n
        self._startup_reset(n)
        self.sent: list[list[Any]] = [[] for _ in range(n)]

    def _live_pool(self) -> Any:
        return None

    def _send(self, worker: int, task: Any) -> None:
        assert self._is_ready[worker], f"task {task[0]} sent to worker {worker} before its READY"
        self.sent[worker].append(task[0])

    def submit(self, task: int, size: int) -> int:
        """Submit task ``task`` of ``size`` datapoints; the worker it was given to."""
        before = list(self._load)
        self._submit(task, [0] * size, None)  # type: ignore[arg-type]
        return next(w for w in range(len(before)) if self._load[w] == before[w] + 1)


def test_before_any_measurement_tasks_are_placed_as_if_every_worker_were_there() -> None:
    m = _Placing(3)
    m._now_ready(0)
    assert m.submit(0, 1) == 0
    assert m.submit(1, 1) == 1 and m._held == {1: [(1, [0], None)]}  # held for worker 1
    m._rebalance()  # unmeasured: nothing moves, only the pool's deadline starts worker 1
    assert m._held and m.sent == [[0], [], []]


def test_measured_cheap_map_moves_held_tasks_to_the_ready_worker_in_order() -> None:
    m = _Placing(2)
    m._now_ready(0)
    for t in range(3):
        m.submit(t, 1)
    assert m._load == [2, 1] and m._held == {1: [(1, [0], None)]}
    m._per_item = 1e-6
    m._rebalance()
    assert m.sent == [[0, 2, 1], []] and m._load == [3, 0] and not m._held


def test_measured_slow_map_keeps_held_tasks_for_the_starting_worker() -> None:
    m = _Placing(2)
    m._now_ready(0)
    m.submit(0, 1)
    m.submit(1, 1)
    m._per_item = LAZY_BUDGET_S  # one datapoint fills the budget
    m._rebalance()
    assert m._held == {1: [(1, [0], None)]} and m._load == [1, 1]


def test_a_ready_worker_takes_work_within_the_budget_then_the_starting_ones_do() -> None:
    m = _Placing(2)
    m._now_ready(0)
    m._per_item = LAZY_BUDGET_S / 100  # 100 datapoints fill the budget
    assert m.submit(0, 60) == 0
    assert m.submit(1, 40) == 0  # 100 datapoints: within the budget
    assert m.submit(2, 1) == 1  # over it: to the worker still starting
    m._task_done(0, 60)
    assert m.submit(3, 50) == 0


def test_held_tasks_are_released_in_order_at_ready_and_only_then() -> None:
    m = _Placing(2)
    m._now_ready(0)
    m._per_item = 1.0  # measured: every task is over the budget of the READY worker
    assert [m.submit(t, 1) for t in range(3)] == [1, 0, 1]  # the least loaded, starting ones first
    assert m.sent == [[1], []]
    m._now_ready(1)
    assert m.sent == [[1], [0, 2]] and not m._starting
    assert m.submit(3, 1) == 0  # every worker READY: fewest tasks wins


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
    """Driven as the map drives it: no task is sent to a worker before its READY (``_send``
    checks); once every worker is READY each task has been sent exactly once, a worker's own
    tasks in the order given, and each worker's load is the tasks it was sent and has not
    finished."""
    m = _Placing(n)
    m._now_ready(0)  # the map waits for worker 0 before its first task
    assigned: list[list[int]] = [[] for _ in range(n)]
    sizes: dict[int, int] = {}
    task = 0

    def inflight(w: int) -> list[int]:
        done = done_by[w]
        return [t for t in m.sent[w] if t not in done]

    done_by: list[set[int]] = [set() for _ in range(n)]
    for op, arg in ops:
        if op == "submit":
            size = int(arg)  # type: ignore[call-overload]
            assigned[m.submit(task, size)].append(task)
            sizes[task] = size
            task += 1
        elif op == "ready":
            w = int(arg) % n  # type: ignore[call-overload]
            if not m._is_ready[w]:
                m._now_ready(w)
        elif op == "rebalance":
            if m._starting and m._held and m._per_item is not None:
                m._rebalance()
        elif op == "measure":
            m._per_item = float(arg)  # type: ignore[arg-type]
        else:
            w = int(arg) % n  # type: ignore[call-overload]
            waiting = inflight(w)
            if waiting:
                done_by[w].add(waiting[0])
                m._task_done(w, sizes[waiting[0]])
    for w in range(n):
        if not m._is_ready[w]:
            m._now_ready(w)
    assert not m._starting and not m._held
    assert sorted(t for ts in m.sent for t in ts) == list(range(task))  # each task once
    moved = {t for w in range(n) for t in m.sent[w] if t not in assigned[w]}
    for w in range(n):  # per worker: those not moved in the order given, none lost
        assert [t for t in m.sent[w] if t not in moved] == [t for t in assigned[w] if t not in moved]
    assert m._load == [len(inflight(w)) for w in range(n)]  # load is what each worker holds


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
