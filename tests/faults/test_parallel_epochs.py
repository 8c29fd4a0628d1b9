"""Leaving an epoch early (docs/failure_semantics.rst, "break out of an epoch"): a strict
map's abandoned pass is discarded, data and errors; a non-strict map's stream goes on, so
what was in flight — an error included — arrives in the epochs that follow.

The failing datapoint is the pass's first, so it is in flight from the first task sent,
whatever the map's measured speed (with ``chunk="auto"`` a slow first measurement keeps
few tasks in flight: a datapoint further in the pass may not be sent before the consumer
leaves); it waits at a gate that the test opens once it has left the epoch, so its error
cannot arrive before the ``break``."""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Any

import pytest

from tests._leaks import assert_no_leaks, snapshot, wait_until
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)

GATE_S = 20.0  # a failing item left at a closed gate raises after this long: a broken test fails, never hangs
ARRIVAL_S = 20.0  # the error's arrival is waited for this long (epochs go on meanwhile)


class FailOnceOn0AtGate:
    """Raises on 0 the first time any worker or thread sees it (claimed through a file), once
    the gate (another file) exists; ``cold``: the first datapoint each worker or thread maps
    takes 20 ms more (a cold start, which made the map autotune keep few tasks in flight)."""

    def __init__(self, tmp_path: Any, cold: bool) -> None:
        self.claim, self.gate = str(tmp_path / "claim"), str(tmp_path / "gate")
        self.cold = cold
        self.warm: set[tuple[int, int]] = set()  # (pid, thread) that mapped a datapoint

    def __call__(self, dp: list[Any]) -> list[Any]:
        me = (os.getpid(), threading.get_ident())
        if self.cold and me not in self.warm:
            self.warm.add(me)
            time.sleep(0.02)
        if dp[0] == 0 and u._claim(self.claim):
            wait_until(lambda: os.path.exists(self.gate), GATE_S, interval=0.005)
            raise u.MyError("bad 0")
        return dp

    def open_gate(self) -> None:
        with open(self.gate, "w"):
            pass


def leave_with_0_in_flight(df: Any, fail: FailOnceOn0AtGate) -> None:
    """Take 3 results of an epoch and break out while datapoint 0 waits at the gate; then
    open it."""
    it = iter(df)
    first = list(itertools.islice(it, 3))
    it.close()  # what a `break` does once the loop's iterator is dropped (done here, not left to GC)
    assert len(first) == 3 and [0] not in first
    assert wait_until(lambda: os.path.exists(fail.claim), 10), "datapoint 0 never reached a worker"
    fail.open_gate()


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
@pytest.mark.parametrize("kind", ["proc", "thread"])
def test_strict_break_discards_the_failing_rest_of_the_pass(kind: str, cold: bool, tmp_path: Any) -> None:
    """Promise: strict=True: the error of an item of an abandoned pass never surfaces
    later; the next passes are complete."""
    before = snapshot()
    fail = FailOnceOn0AtGate(tmp_path, cold)
    df = u.make_map(kind, u.Range(20), fail, strict=True, buffer_size=20)
    try:
        df.reset_state()
        leave_with_0_in_flight(df, fail)
        for _ in range(2):  # the abandoned error is dropped whichever pass it arrives in
            assert sorted(list(df)) == [[i] for i in range(20)]
    finally:
        df.close()
    assert_no_leaks(before)


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
@pytest.mark.parametrize("kind", ["proc", "thread"])
def test_non_strict_break_carries_the_stream_and_its_error_over(kind: str, cold: bool, tmp_path: Any) -> None:
    """Promise: strict=False (tensorpack's default): nothing in flight is discarded, so the
    error of an item in flight when the consumer left still reaches it, in a later epoch.
    Which one is the machine's speed: an unordered map yields results as they complete, and
    the other workers may deliver whole epochs while the failing item is still being mapped
    (an error that never came would have been discarded: item 0 fails only once)."""
    before = snapshot()
    fail = FailOnceOn0AtGate(tmp_path, cold)
    df = u.make_map(kind, u.Range(20), fail, strict=False, buffer_size=20)
    try:
        df.reset_state()
        leave_with_0_in_flight(df, fail)
        deadline = time.monotonic() + ARRIVAL_S
        with pytest.raises(u.MyError, match="bad 0"):
            while time.monotonic() < deadline:
                assert len(list(df)) == 20
    finally:
        df.close()
    assert_no_leaks(before)
