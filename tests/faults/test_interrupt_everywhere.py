"""Ctrl-C at every spot of an epoch (docs/failure_semantics.rst, "Ctrl-C"), not just where a
storm of signals happens to land: for each parallel flow of the storm tests, a
``KeyboardInterrupt`` is raised at the k-th line or call of the library's code that an epoch
runs in the consumer's thread, for k spread over the whole epoch (``iter()``, the first
``next()``, the guard, the last datapoint, the epoch's end; an epoch runs more or fewer
events as its waits go, so k spans the shortest of three). The next epoch must be intact by
the storm's own check, and ``close()`` must then leave nothing. The same for the spots of
``reset_state()`` (then called again) and of ``close()``.

This is how a Ctrl-C inside ``ReentrancyGuard.__exit__`` was found to leave a flow refusing
every later epoch (the storm had hit it once in many CI runs), and a Ctrl-C while
``MultiThreadMapData.reset_state()`` started its threads to leave one running for good once
``reset_state()`` was called again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import dataflow as D
from tests.faults._leaks import assert_no_leaks, snapshot
from tests.faults._storm import FLOWS, N, problem
from tests.faults._tracing import events_of, interrupt_at_event
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(180)

SPOTS = 24  # interrupts per flow, spread evenly over the events of one epoch


@pytest.mark.parametrize("kind", list(FLOWS))
def test_an_interrupt_at_any_spot_leaves_the_next_epoch_intact(kind: str) -> None:
    """Promise: wherever in an epoch a ``KeyboardInterrupt`` is raised, it reaches the
    consumer (or the epoch completes, if the spot was past its last datapoint), the next
    epoch is intact, and ``close()`` leaves no process, thread, fd or shared memory."""
    before = snapshot()
    df = FLOWS[kind]()
    df.reset_state()
    try:
        counted = [events_of(lambda: list(df)) for _ in range(3)]  # waits vary: the fewest
        total, _, first = min(counted, key=lambda c: c[0])
        assert problem(kind, first) is None
        step = 2 * max(1, total // (2 * SPOTS))  # every other spot of a 48-spot spread
        where: list[str] = []
        for k in range(1 + (len(kind) % step), total + 1, step):
            epoch: list[Any] | None = None
            try:
                with interrupt_at_event(k, where):
                    epoch = list(df)
            except KeyboardInterrupt:
                pass
            spot = where[-1] if where else "nowhere"
            if epoch is not None:  # the spot came after the epoch's end: it must be whole
                assert problem(kind, epoch) is None, f"{kind}: epoch at {spot}: {problem(kind, epoch)}"
            epoch = list(df)
            why = problem(kind, epoch)
            assert why is None, f"{kind}: after a Ctrl-C at {spot} (event {k}/{total}): {why}"
        tried = len(range(1 + (len(kind) % step), total + 1, step))
        assert len(where) >= tried // 2, f"{kind}: few interrupts landed: {where}"
    finally:
        df.close()
    del counted, first, epoch  # arrays may view shared memory until dropped
    assert_no_leaks(before)


CALL_SPOTS = 12  # interrupts per flow and call, spread evenly over the call's events


@pytest.mark.parametrize("call", ["reset_state", "close"])
@pytest.mark.parametrize("kind", list(FLOWS))
def test_an_interrupt_at_any_spot_of_a_start_or_close_leaves_nothing(kind: str, call: str) -> None:
    """Promise: a ``KeyboardInterrupt`` anywhere in ``reset_state()`` (the workers starting)
    or ``close()`` loses nothing: after it, ``reset_state()`` again gives an intact epoch (for
    ``reset_state``), and ``close()`` leaves no process, thread, fd or shared memory."""
    probe = FLOWS[kind]()
    if call == "close":
        probe.reset_state()
        list(probe)
    total, _, _ = events_of(getattr(probe, call))
    probe.close()
    where: list[str] = []
    for k in range(1 + (len(kind) % 3), total + 1, 2 * max(1, total // (2 * CALL_SPOTS))):
        before = snapshot()
        df = FLOWS[kind]()
        try:
            if call == "close":
                df.reset_state()
                list(df)
            try:
                with interrupt_at_event(k, where):
                    getattr(df, call)()
            except KeyboardInterrupt:
                pass
            if call == "reset_state":
                df.reset_state()
                epoch = list(df)
                why = problem(kind, epoch)
                assert why is None, f"{kind}: after a Ctrl-C in reset_state() at {where[-1:]}: {why}"
                del epoch
        finally:
            df.close()
        assert_no_leaks(before)
    assert where, f"{kind}: no interrupt landed in {call}()"


STATEFUL: dict[str, Callable[[], D.DataFlow]] = {  # sources with a position to save
    "map": lambda: D.MultiProcessMapDataZMQ(_source(), 2, u.double, strict=True, ordered=True),
    "map-unordered": lambda: D.MultiProcessMapDataZMQ(_source(), 2, u.double, strict=True),
    "map-batch": lambda: D.MultiProcessMapAndBatchDataZMQ(_source(), 2, u.to_pair, 4, strict=True),
    "thread-map": lambda: D.MultiThreadMapData(_source(), 2, u.double, strict=True, ordered=True),
    "runner": lambda: D.MultiProcessRunnerZMQ(_source(), num_proc=2),
    "prefetch": lambda: D.ThreadPrefetchData(_source(), 4),
}
HEAD = 3  # datapoints taken before the checkpoint
CHECKPOINT_SPOTS = 32  # distinct lines of state_dict() or load_state_dict() interrupted per flow


def _source() -> D.DataFlow:
    return D.DataFromList([[i] for i in range(N)], shuffle=False)


@pytest.mark.parametrize("kind", list(STATEFUL))
def test_an_interrupt_at_any_spot_of_a_checkpoint_loses_nothing(kind: str) -> None:
    """Promise: a ``KeyboardInterrupt`` anywhere in ``state_dict()`` mid-epoch loses nothing:
    ``state_dict()`` again gives a state from which a fresh flow resumes exactly, or (a
    process runner, whose Ctrl-C may cut a message in half) raises ``StateError`` saying why;
    either way the epoch in progress goes on intact."""
    probe = STATEFUL[kind]()
    probe.reset_state()
    it = iter(probe)
    head = [next(it) for _ in range(HEAD)]
    spots = _checkpoint_spots(probe.state_dict)
    want = head + list(it)
    probe.close()
    where: list[str] = []
    for k in spots:
        df = STATEFUL[kind]()
        df.reset_state()
        try:
            it = iter(df)
            head = [next(it) for _ in range(HEAD)]
            try:
                with interrupt_at_event(k, where):
                    df.state_dict()
            except KeyboardInterrupt:
                pass
            try:
                state = df.state_dict()
            except D.StateError as e:
                assert kind == "runner" and "Ctrl-C" in str(e), f"{kind} at {where[-1:]}: {e}"
                state = None
            epoch = head + list(it)
        finally:
            df.close()
        assert _same(kind, epoch, want), f"{kind}: the epoch after a Ctrl-C at {where[-1:]}"
        if state is not None:
            resumed = STATEFUL[kind]()
            resumed.load_state_dict(state)
            resumed.reset_state()
            rest = list(resumed)
            resumed.close()
            assert _same(kind, head + rest, want), f"{kind}: resumed after a Ctrl-C at {where[-1:]}"
    assert where, f"{kind}: no interrupt landed in state_dict()"


@pytest.mark.parametrize("kind", list(STATEFUL))
def test_an_interrupt_at_any_spot_of_a_load_then_loading_again_resumes_exactly(kind: str) -> None:
    """Promise: a ``KeyboardInterrupt`` anywhere in ``load_state_dict()`` after
    ``reset_state()`` (where a process runner restarts its workers from the state) loses
    nothing: loading the same state again resumes exactly."""
    probe = STATEFUL[kind]()
    probe.reset_state()
    it = iter(probe)
    head = [next(it) for _ in range(HEAD)]
    state = probe.state_dict()
    want = head + list(it)
    probe.close()
    fresh = STATEFUL[kind]()
    fresh.reset_state()
    spots = _checkpoint_spots(lambda: fresh.load_state_dict(state))
    fresh.close()
    where: list[str] = []
    for k in spots:
        df = STATEFUL[kind]()
        df.reset_state()
        try:
            try:
                with interrupt_at_event(k, where):
                    df.load_state_dict(state)
            except KeyboardInterrupt:
                pass
            df.load_state_dict(state)
            rest = list(df)
        finally:
            df.close()
        assert _same(kind, head + rest, want), f"{kind}: resumed after a Ctrl-C at {where[-1:]}"
    assert where, f"{kind}: no interrupt landed in load_state_dict()"


def _checkpoint_spots(fn: Callable[[], Any]) -> list[int]:
    """Up to ``CHECKPOINT_SPOTS`` events of ``fn()``, spread evenly over the distinct lines it
    runs, each at its first reach (its waits loop long, so evenly spaced events would
    mostly land in them)."""
    _, spots, _ = events_of(fn)
    return spots[:: 2 * max(1, round(len(spots) / (2 * CHECKPOINT_SPOTS)))]


def _same(kind: str, got: list[Any], want: list[Any]) -> bool:
    """The same epoch: in order where the flow promises order, else the same multiset (a
    runner's workers each read the whole source, so only the count and range are fixed)."""
    if kind == "runner":
        return len(got) == len(want) and all(0 <= dp[0] < N for dp in got)
    key = repr
    if kind in ("map-unordered", "map-batch"):
        return sorted(map(key, _flat(kind, got))) == sorted(map(key, _flat(kind, want)))
    return list(map(key, got)) == list(map(key, want))


def _flat(kind: str, epoch: list[Any]) -> list[Any]:
    return [int(v) for b in epoch for v in b[0]] if kind == "map-batch" else epoch
