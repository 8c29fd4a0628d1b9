"""A soak (docs/failure_semantics.rst, "Long runs"): 200 epochs of small parallel flows,
some abandoned halfway, while two other processes keep both cores busy, keep the consumer's
RSS and fd count flat and leave nothing.

Each worker process holds three of the consumer's descriptors: the two pipes multiprocessing
keeps per child (its exit sentinel, and the end whose closing tells the child its parent is
gone) and the ZMQ connection the consumer's socket accepts from it. Workers start lazily and
connect asynchronously: on a loaded machine one could connect (+1) or even start (+3) after a
warm-up of a fixed number of epochs, which is not a leak. So the measured epochs begin only
once every worker has delivered a datapoint (its datapoints carry its pid): from then on the
count must not grow at all.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

import dataflow as D
from tests._leaks import assert_no_leaks, snapshot
from tests.parallel import _util as u

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EPOCHS = 200
_BUSY_LOOP = "import time\nend = time.monotonic() + 240\nwhile time.monotonic() < end: pass"


def big_pair_pid(dp: list[Any]) -> list[Any]:
    """``[i] -> [i, 64 KiB array of i, worker pid]``: the array goes through shared memory."""
    return [dp[0], np.full(16384, dp[0], dtype=np.float32), os.getpid()]


def double_pid(dp: list[Any]) -> list[Any]:
    return [dp[0] * 2, os.getpid()]


class PidRange(u.Range):
    """``[i, pid]`` for ``i`` in ``range(n)``: a runner's datapoints say which worker made them."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i in range(self.n):
            yield [i, os.getpid()]


def test_200_epochs_keep_rss_and_fds_flat_under_load() -> None:
    """Promise: no per-epoch leak. Over 200 epochs of a strict process map (arrays through
    shared memory), a non-strict one, a process runner and a thread map, every fourth epoch
    left with a ``break``, with both cores busy: once every worker has started, the fd count
    does not grow, the RSS grows by under 20 MiB, and close() leaves nothing."""
    before = snapshot()
    loads = [subprocess.Popen([sys.executable, "-c", _BUSY_LOOP]) for _ in range(2)]
    flows: list[D.DataFlow] = [
        D.MultiProcessMapDataZMQ(u.Range(40), 2, big_pair_pid, strict=True, ordered=True),
        D.MultiProcessMapDataZMQ(u.Range(40), 2, double_pid),
        D.MultiProcessRunnerZMQ(PidRange(40), num_proc=2),
        D.MultiThreadMapData(u.Range(40), 2, u.double, strict=True),
    ]
    try:
        for df in flows:
            df.reset_state()
        workers = [set(getattr(df, "worker_pids", [])) for df in flows]  # forks them all now
        seen: list[set[int]] = [set() for _ in flows]

        def epoch(i: int) -> None:
            for k, df in enumerate(flows):
                if i % 4 == 3:  # abandoned halfway
                    got = list(itertools.islice(df, 20))
                    assert len(got) == 20
                else:
                    got = list(df)
                    assert len(got) == 40
                    if k == 0:
                        assert all(np.array_equal(dp[1], np.full(16384, dp[0], np.float32)) for dp in got)
                if workers[k]:
                    seen[k].update(dp[-1] for dp in got)

        deadline = time.monotonic() + 120
        warm = 0
        while warm < 20 or any(s != w for s, w in zip(seen, workers)):  # warm-up: every worker in
            assert time.monotonic() < deadline, f"workers never delivered: {seen} of {workers}"
            epoch(warm)
            warm += 1
        start = snapshot()
        for i in range(warm, warm + EPOCHS - 20):
            epoch(i)
        end = snapshot()
    finally:
        for df in flows:
            df.close()
        for load in loads:
            load.kill()
            load.wait(10)
    new = {fd: what for fd, what in end.fds.items() if start.fds.get(fd) != what}
    assert len(end.fds) <= len(start.fds), f"fds grew over {EPOCHS - 20} epochs: new {new}"
    grown = (end.rss - start.rss) / 2**20
    assert grown < 20, f"RSS grew by {grown:.1f} MiB over {EPOCHS - 20} epochs"
    assert_no_leaks(before)
