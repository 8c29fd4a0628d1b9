"""A Ctrl-C inside the reentrancy guard's own enter or exit (docs/failure_semantics.rst,
"Ctrl-C"): the lock is taken, the ``with`` never releases it, and the epoch ends holding it.
The next epoch must take the guard over, not refuse every later epoch as "already being
iterated". The storm tests (test_parallel_interrupts.py) hit this window only by chance;
here a trace function raises ``KeyboardInterrupt`` exactly there (tests/faults/_tracing.py).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest

import dataflow as D
from dataflow import _reentrancy as reentrancy
from dataflow._reentrancy import ReentrancyGuard
from dataflow.errors import DataFlowReentrantError
from tests.faults._tracing import interrupt_at
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)

N = 12


WINDOWS = {
    "exit-before-release": (ReentrancyGuard.__exit__.__code__, "call"),
    "enter-after-acquire": (ReentrancyGuard.__enter__.__code__, "return"),
}

FLOWS: dict[str, Callable[[], D.DataFlow]] = {
    "fixed-size": lambda: D.FixedSizeData(u.Range(N), N),
    "map": lambda: D.MultiProcessMapDataZMQ(u.Range(N), 2, u.double, strict=True, ordered=True),
    "runner": lambda: D.MultiProcessRunnerZMQ(u.Range(N), num_proc=1),
    "thread-map": lambda: D.MultiThreadMapData(u.Range(N), 2, u.double, strict=True, ordered=True),
    "prefetch": lambda: D.ThreadPrefetchData(u.Range(N), 4),
}


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("kind", list(FLOWS))
def test_an_interrupt_inside_the_guard_leaves_the_next_epoch_intact(kind: str, window: str) -> None:
    """Promise: a ``KeyboardInterrupt`` raised in the guard's enter (after the lock was
    taken) or exit (before it was released) reaches the caller, and the next epoch of the
    same flow runs whole, with the values of an uninterrupted one."""
    df = FLOWS[kind]()
    df.reset_state()
    try:
        want = list(df)
        with pytest.raises(KeyboardInterrupt), interrupt_at(*WINDOWS[window]):
            list(df)
        assert list(df) == want
        assert list(df) == want
    finally:
        df.close()


def _left_behind(guard: ReentrancyGuard) -> Iterator[int]:
    guard.__enter__()  # as a `with` whose exit an interrupt cut off
    yield 1


def test_a_hold_left_behind_by_a_finished_generator_is_taken_over() -> None:
    guard = ReentrancyGuard("Thing")
    assert list(_left_behind(guard)) == [1]
    assert guard._lock.locked()
    assert not guard.busy()
    with guard:  # taken over
        with pytest.raises(DataFlowReentrantError, match="Thing is not reentrant"):
            with guard:
                pass
    assert not guard._lock.locked()


def test_a_suspended_generator_still_holds_the_guard() -> None:
    guard = ReentrancyGuard("Thing")
    it = _left_behind(guard)
    next(it)  # suspended inside its hold
    assert guard.busy()
    with pytest.raises(DataFlowReentrantError, match="Thing is not reentrant"):
        with guard:
            pass
    del it  # the generator is gone: its hold is left behind
    with guard:
        pass


def _refused_while(guard: ReentrancyGuard, hold: Callable[[threading.Event, threading.Event], None]) -> None:
    """Run ``hold(held, leave)`` in a thread; once ``held`` is set, the guard is busy and a
    second epoch is refused; once the thread has left, the guard is free."""
    held, leave = threading.Event(), threading.Event()
    t = threading.Thread(target=hold, args=(held, leave))
    t.start()
    try:
        assert held.wait(30)
        assert guard.busy()
        with pytest.raises(DataFlowReentrantError, match="Thing is not reentrant"):
            with guard:
                pass
    finally:
        leave.set()
        t.join(30)
    assert not guard.busy()
    with guard:
        pass


def test_a_hold_in_another_thread_still_refuses() -> None:
    guard = ReentrancyGuard("Thing")

    def hold(held: threading.Event, leave: threading.Event) -> None:
        with guard:
            held.set()
            leave.wait(30)

    _refused_while(guard, hold)


def test_a_guard_another_thread_is_taking_is_not_taken_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Promise: a thread between its acquire and naming its frame still counts as the holder
    (a concurrent second epoch is refused, not let in as if the hold were left behind)."""
    monkeypatch.setattr(reentrancy, "_SETTLE_S", 30.0)  # the bound is not what is tested
    guard = ReentrancyGuard("Thing")

    def take(acquired: threading.Event, leave: threading.Event) -> None:
        guard._lock.acquire()  # the first step of __enter__ ...
        acquired.set()
        leave.wait(0.05)  # ... then a pause before the frame is named
        guard._frame = sys._getframe()
        leave.wait(30)
        guard.__exit__()

    _refused_while(guard, take)
