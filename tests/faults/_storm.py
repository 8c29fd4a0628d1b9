"""Child process of the interrupt tests: iterates one parallel flow while a thread sends this
process SIGINTs at random moments, and checks every epoch that completes.

The contract (docs/failure_semantics.rst, "Ctrl-C"): after a ``KeyboardInterrupt`` the next
``iter()`` either gives an intact epoch or raises :class:`~dataflow.DataFlowNotReset`
telling to call ``reset_state()``; after ``reset_state()`` (retried here until no SIGINT cuts
it) epochs are intact again.

Run as ``python -m tests.faults._storm KIND SEED SECONDS MIN_GAP MAX_GAP`` (gaps between two
SIGINTs drawn log-uniformly in between: bursts that cut the recovery itself, and pauses that
let epochs end, in one run). Prints
``KIND <kind> <complete> <interrupted> <resets>`` when done, then ``LEAKS [...]`` after
``close()``; ``BAD <kind> <why>`` and exit code 3 on a corrupt epoch; exit code 4 on any other
exception (the traceback on stderr); a hang dumps every thread's stack and exits
(``faulthandler``), so the test sees the stall instead of timing out blind.
"""

from __future__ import annotations

import faulthandler
import functools
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

import dataflow as D
from dataflow import DataFlowNotReset
from tests._leaks import leaks, snapshot
from tests.parallel import _util as u

N = 40


def big_pair(dp: list[Any]) -> list[Any]:
    """``[i] -> [i, 64 KiB array filled with i]``: goes through the shared-memory ring."""
    return [dp[0], np.full(16384, dp[0], dtype=np.float32)]


class BigRange(u.Range):
    """``[i, 64 KiB array of i]``: runner datapoints that travel through shared memory."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i in range(self.n):
            yield [i, np.full(16384, i, dtype=np.float32)]


def make_range() -> D.DataFlow:
    return u.Range(N)


FLOWS: dict[str, Callable[[], D.DataFlow]] = {
    "runner": lambda: D.MultiProcessRunnerZMQ(u.Range(N), num_proc=2),
    "runner-shm": lambda: D.MultiProcessRunnerZMQ(BigRange(N), num_proc=2),
    "map": lambda: D.MultiProcessMapDataZMQ(u.Range(N), 2, u.double, strict=True, ordered=True),
    "map-unordered": lambda: D.MultiProcessMapDataZMQ(u.Range(N), 2, u.double, strict=True),
    "map-nonstrict": lambda: D.MultiProcessMapDataZMQ(u.Range(N), 2, u.double),
    "map-shm": lambda: D.MultiProcessMapDataZMQ(u.Range(N), 2, big_pair, strict=True, ordered=True),
    "map-batch": lambda: D.MultiProcessMapAndBatchDataZMQ(u.Range(N), 2, u.to_pair, 4, strict=True),
    "thread-map": lambda: D.MultiThreadMapData(u.Range(N), 2, u.double, strict=True, ordered=True),
    "thread-map-nonstrict": lambda: D.MultiThreadMapData(u.Range(N), 2, u.double),
    "thread-runner": lambda: D.MultiThreadRunner(make_range, 4, 2),
    "prefetch": lambda: D.ThreadPrefetchData(u.Range(N), 4),
}


def problem(kind: str, epoch: list[Any]) -> str | None:
    """Why ``epoch`` is not an intact epoch of ``kind`` (``None`` if it is)."""
    if kind == "map-batch":
        if len(epoch) != N // 4:
            return f"{len(epoch)} batches"
        firsts = sorted(int(v) for b in epoch for v in b[0])
        if firsts != list(range(N)):
            return f"values {firsts}"
        ok = all(np.array_equal(b[1], np.repeat(b[0][:, None], 3, 1).astype(np.float32)) for b in epoch)
        return None if ok else "arrays do not match their values"
    if len(epoch) != N:
        return f"{len(epoch)} datapoints, expected {N}"
    if kind in ("map-shm", "runner-shm"):
        if not all(np.array_equal(dp[1], np.full(16384, dp[0], np.float32)) for dp in epoch):
            return "an array does not match its value (shared memory reused too early?)"
        values = [dp[0] for dp in epoch]
        return None if kind == "runner-shm" or values == list(range(N)) else f"order {values}"
    values = [dp[0] for dp in epoch]
    if kind.startswith("runner") or kind == "thread-runner":  # copies interleave
        return None if all(0 <= v < N for v in values) else f"values {values}"
    doubled = kind.startswith("map") or kind.startswith("thread-map")
    want = [2 * i for i in range(N)] if doubled else list(range(N))
    if kind.endswith("nonstrict"):  # the endless stream: any values of the flow, N of them
        return None if all(v in want for v in values) else f"values {values}"
    if kind == "map-unordered":
        values = sorted(values)
    return None if values == want else f"values {values}"


def uninterrupted(fn: Callable[[], Any]) -> Any:
    """``fn()``, run again if a stray SIGINT of the storm lands inside it."""
    while True:
        try:
            return fn()
        except KeyboardInterrupt:
            pass


def main() -> None:
    kind, seed, seconds, lo, hi = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:6])
    faulthandler.dump_traceback_later(45, exit=True)  # a hang shows where, then exits 1
    before = snapshot()
    rng = random.Random(seed)
    df = FLOWS[kind]()
    df.reset_state()
    stop = time.monotonic() + seconds

    armed = [False]  # set by the main thread once inside its loop: Thread.start() is not cut

    def storm() -> None:
        while not armed[0]:
            time.sleep(0.001)
        while time.monotonic() < stop:
            time.sleep(lo * (hi / lo) ** rng.random())
            os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=storm, daemon=True)
    complete = interrupted = resets = 0
    try:
        t.start()
        while True:
            try:  # a SIGINT may land anywhere in here, the check included: the epoch is then retried
                armed[0] = True
                if not (t.is_alive() or complete == 0):
                    break
                try:
                    epoch = list(df)
                except DataFlowNotReset as e:  # the documented answer to an interrupt: reset_state()
                    if "reset_state()" not in str(e):
                        raise
                    resets += 1
                    uninterrupted(df.reset_state)
                    continue
                why = uninterrupted(functools.partial(problem, kind, epoch))
                if why is not None:
                    print("BAD", kind, why, flush=True)
                    os._exit(3)
                complete += 1
            except KeyboardInterrupt:
                interrupted += 1
                continue
        t.join()
        while True:  # a SIGINT may still be on its way: close outside the storm
            try:
                time.sleep(0.05)
                break
            except KeyboardInterrupt:
                pass
        df.close()
        del epoch  # its arrays may view shared memory: a user's arrays keep it mapped
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(4)
    faulthandler.cancel_dump_traceback_later()
    print("KIND", kind, complete, interrupted, resets, flush=True)
    left = leaks(before)
    if left:  # name what holds the leftover fds, for whoever debugs a failure
        for fd in sorted(os.listdir("/proc/self/fd"), key=int):
            try:
                print("FD", fd, os.readlink(f"/proc/self/fd/{fd}"), file=sys.stderr)
            except OSError:
                pass
    print("LEAKS", left, flush=True)


if __name__ == "__main__":
    main()
