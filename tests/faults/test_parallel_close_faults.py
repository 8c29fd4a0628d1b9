"""``close()`` interrupted midway (docs/failure_semantics.rst, "close() interrupted"): an
exception or a Ctrl-C inside any step of the release path still releases every worker,
thread, socket, fd and shared-memory segment; the fault reaches the caller once, and a
second ``close()`` is a silent no-op."""

from __future__ import annotations

import multiprocessing.process
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import zmq

import dataflow as D
from dataflow.parallel import _shm
from tests._leaks import assert_no_leaks, snapshot
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(120)

PROCESS_FLOWS: dict[str, Callable[[], D.DataFlow]] = {
    "runner": lambda: D.MultiProcessRunnerZMQ(u.Range(20), num_proc=2),
    "map": lambda: D.MultiProcessMapDataZMQ(u.Range(20), 2, u.double, strict=True),
    "map-batch": lambda: D.MultiProcessMapAndBatchDataZMQ(u.Range(20), 2, u.to_pair, 4),
}

THREAD_FLOWS: dict[str, Callable[[], D.DataFlow]] = {
    "thread-map": lambda: D.MultiThreadMapData(u.Range(20), 2, u.double),
    "thread-runner": lambda: D.MultiThreadRunner(u.make_range_5, 4, 2),
    "prefetch": lambda: D.ThreadPrefetchData(u.Range(20), 2),
}

# (object, attribute) of each step of a process pool's release path
PROCESS_STEPS: dict[str, tuple[Any, str]] = {
    "terminate": (multiprocessing.process.BaseProcess, "terminate"),
    "join": (multiprocessing.process.BaseProcess, "join"),
    "socket-close": (zmq.Socket, "close"),
    "context-term": (zmq.Context, "destroy"),
    "ring-close": (_shm.RingReader, "close"),
}


class SigintNow(Exception):
    """Marker: the injected fault is a real SIGINT signal, not a raised exception."""


# steps with a fallback when they fail without doing their job: a worker that cannot be
# terminated or joined is killed; a socket that failed to close is closed by the context
NOT_DONE = {"terminate", "join", "socket-close"}


def _inject(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, fault: type[BaseException], done: bool = True
) -> list[int]:
    """Make the first call of ``owner.name`` fail with ``fault`` (after doing its job if
    ``done``, else instead of it), or for :class:`SigintNow` send this process a SIGINT from
    inside it; later calls are real."""
    real = getattr(owner, name)
    calls = [0]

    def step(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] > 1:
            return real(*args, **kwargs)
        if fault is SigintNow:
            signal.raise_signal(signal.SIGINT)
            return real(*args, **kwargs)
        if done:
            real(*args, **kwargs)
        raise fault(f"injected into {name}")

    monkeypatch.setattr(owner, name, step)
    return calls


def _started(make: Callable[[], D.DataFlow]) -> D.DataFlow:
    df = make()
    df.reset_state()
    it = iter(df)
    next(it)
    next(it)
    del it  # an abandoned epoch: close() runs with work in flight
    return df


FAULTS: list[type[BaseException]] = [RuntimeError, KeyboardInterrupt, SigintNow]

# Every step with every fault for the map; the runner's close() goes through the same pool
# release (ProcessPool.close), so it takes each step once, the faults taking turns, for its
# own wrapper around it; the map-and-batch map is the map's class and close().
CLOSE_FAULTS = [("map", step, fault) for step in PROCESS_STEPS for fault in FAULTS] + [
    ("runner", step, FAULTS[i % len(FAULTS)]) for i, step in enumerate(PROCESS_STEPS)
]


@pytest.mark.parametrize("kind, step, fault", CLOSE_FAULTS)
def test_process_flow_close_fault_in_any_step_releases_everything(
    kind: str, step: str, fault: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: whichever release step fails (an exception, a KeyboardInterrupt raised
    there, or a real Ctrl-C arriving there), close() runs every other step, then raises the
    fault (an exception from terminating a worker is absorbed: it is killed). Stopping
    workers and closing the socket have fallbacks, so they may fail without doing their job;
    no worker, socket, fd, ring or /dev/shm segment is left, and a second close() is
    a no-op."""
    before = snapshot()
    df = _started(PROCESS_FLOWS[kind])
    owner, name = PROCESS_STEPS[step]
    calls = _inject(monkeypatch, owner, name, fault, done=step not in NOT_DONE)
    expected = KeyboardInterrupt if fault is SigintNow else fault
    if step == "terminate" and fault is RuntimeError:
        df.close()  # absorbed: a worker that cannot be terminated is killed instead
    else:
        with pytest.raises(expected):
            df.close()
    assert calls[0] >= 1, f"the step {step} was never called by close()"
    monkeypatch.undo()
    assert_no_leaks(before)
    df.close()


@pytest.mark.parametrize("fault", [RuntimeError, KeyboardInterrupt, SigintNow])
@pytest.mark.parametrize("kind", list(THREAD_FLOWS))
def test_thread_flow_close_fault_leaves_no_thread(
    kind: str, fault: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promise: a fault while close() joins a thread reaches the caller, and every thread
    still stops (it was told to before the join); a second close() is a no-op."""
    before = snapshot()
    df = _started(THREAD_FLOWS[kind])
    running = iter(df)
    next(running)  # an epoch in progress, its iterator still held: close() stops its threads
    calls = _inject(monkeypatch, threading.Thread, "join", fault)
    expected = KeyboardInterrupt if fault is SigintNow else fault
    with pytest.raises(expected):
        df.close()
    assert calls[0] >= 1
    monkeypatch.undo()
    assert_no_leaks(before)
    df.close()
    del running


@pytest.mark.parametrize("kind", list(PROCESS_FLOWS))
def test_sigint_during_reset_state_leaves_nothing(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Promise: a Ctrl-C while workers are being started (here: while a ring is reserved)
    raises KeyboardInterrupt once the start is whole, and close() then leaves nothing."""
    before = snapshot()
    df = PROCESS_FLOWS[kind]()
    _inject(monkeypatch, _shm.os, "posix_fallocate", SigintNow)
    with pytest.raises(KeyboardInterrupt):
        df.reset_state()
    monkeypatch.undo()
    df.close()
    assert_no_leaks(before)


@pytest.mark.parametrize("kind", [*PROCESS_FLOWS, *THREAD_FLOWS])
def test_close_mid_epoch_with_the_iterator_still_held_leaves_nothing(kind: str) -> None:
    """Promise: close() in the middle of an epoch whose iterator the caller still holds
    stops every worker and thread at once (not when the iterator is collected)."""
    make = {**PROCESS_FLOWS, **THREAD_FLOWS}[kind]
    before = snapshot()
    df = make()
    df.reset_state()
    running = iter(df)
    next(running)
    df.close()
    assert_no_leaks(before)
    del running


def _slow_zero_big(dp: list[Any]) -> list[Any]:
    """``[i, 64 KiB array]`` (through shared memory), 0.5 s late for 0: the others wait in
    an ordered map's reorder buffer."""
    if dp[0] == 0:
        time.sleep(0.5)
    return [dp[0], np.full(16384, dp[0], dtype=np.float32)]


def test_close_drops_results_held_for_a_pass_left_halfway() -> None:
    """Promise: close() releases the shared memory viewed by results buffered for a pass
    left halfway (here: an ordered map's reorder buffer), at close(), not at collection."""
    before = snapshot()
    df = D.MultiProcessMapDataZMQ(u.Range(40), 2, _slow_zero_big, strict=True, ordered=True)
    df.reset_state()
    it = iter(df)
    first = next(it)
    assert first[0] == 0
    del first
    assert df._pending, "the scenario needs results waiting in the reorder buffer"
    it.close()
    df.close()
    assert_no_leaks(before)
    del it
