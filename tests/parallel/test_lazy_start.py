"""Time to first batch of the process runners (dataflow/parallel/_pool.py, ``lazy=True``):
``reset_state()`` forks worker 0 only, and the consumer forks the others once the first
datapoint has reached it, or once it has waited ``LAZY_START_S`` for one. Whatever asks for
the workers (their pids, a checkpoint) starts them at once; every worker produces."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from dataflow import DataFlow, MultiProcessRunnerZMQ
from tests.parallel._util import SlowToStart

pytestmark = pytest.mark.timeout(60)


class Pids(DataFlow):
    """``[pid, i]`` forever, a few at a time (so the consumer comes back for more)."""

    def __iter__(self) -> Iterator[list[int]]:
        i = 0
        while True:
            yield [os.getpid(), i]
            i += 1
            if i % 8 == 0:
                time.sleep(0.002)


def started(df: MultiProcessRunnerZMQ) -> int:
    pool = df._pool
    assert pool is not None
    return len(pool.procs)


def test_first_datapoint_comes_before_the_other_workers_are_forked_then_all_produce() -> None:
    with MultiProcessRunnerZMQ(Pids(), num_proc=3) as df:
        df.reset_state()
        assert started(df) == 1  # reset_state forked worker 0 only
        it = iter(df)
        first = next(it)
        assert first[0] == df._pool.procs[0].pid  # type: ignore[union-attr]  # from worker 0
        pids = {first[0]}
        deadline = time.monotonic() + 30
        while len(pids) < 3 and time.monotonic() < deadline:
            pids.add(next(it)[0])
        assert started(df) == 3
        assert pids == set(df.worker_pids) and len(pids) == 3  # every worker produces


def test_a_slow_first_datapoint_does_not_hold_back_the_other_workers() -> None:
    """Worker 0 needs 1.5 s for its first datapoint; the consumer does not wait for it to
    fork the others: they are running by the time it arrives."""
    with MultiProcessRunnerZMQ(SlowToStart(1.5), num_proc=3) as df:
        df.reset_state()
        t0 = time.monotonic()
        next(iter(df))
        assert time.monotonic() - t0 > 1.0
        assert started(df) == 3


def test_worker_pids_start_every_worker() -> None:
    with MultiProcessRunnerZMQ(Pids(), num_proc=3) as df:
        df.reset_state()
        pids = df.worker_pids
        assert len(pids) == 3 and all(isinstance(p, int) for p in pids) and len(set(pids)) == 3
        assert started(df) == 3


def test_close_before_the_other_workers_started_leaves_nothing() -> None:
    from tests._leaks import assert_no_leaks, snapshot

    before = snapshot()
    df = MultiProcessRunnerZMQ(Pids(), num_proc=3)
    df.reset_state()
    assert started(df) == 1
    df.close()
    assert_no_leaks(before)
