"""A soak (docs/failure_semantics.rst, "Long runs"): 200 epochs of small parallel flows,
some abandoned halfway, keep the consumer's RSS and fd count flat and leave nothing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dataflow as D
from tests.faults._leaks import assert_no_leaks, snapshot
from tests.faults._storm import big_pair
from tests.parallel import _util as u

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

EPOCHS = 200


def test_200_epochs_keep_rss_and_fds_flat() -> None:
    """Promise: no per-epoch leak. Over 200 epochs of a strict process map (arrays through
    shared memory), a non-strict one, a process runner and a thread map, every fourth epoch
    left with a ``break``, the RSS grows by under 20 MiB after warm-up, the fd count does
    not grow, and close() leaves nothing."""
    before = snapshot()
    flows = [
        D.MultiProcessMapDataZMQ(u.Range(40), 2, big_pair, strict=True, ordered=True),
        D.MultiProcessMapDataZMQ(u.Range(40), 2, u.double),
        D.MultiProcessRunnerZMQ(u.Range(40), num_proc=2),
        D.MultiThreadMapData(u.Range(40), 2, u.double, strict=True),
    ]
    for df in flows:
        df.reset_state()

    def epoch(i: int) -> None:
        for df in flows:
            if i % 4 == 3:  # abandoned halfway
                assert len(list(itertools.islice(df, 20))) == 20
            else:
                got = list(df)
                assert len(got) == 40
                if df is flows[0]:
                    assert all(np.array_equal(dp[1], np.full(16384, dp[0], np.float32)) for dp in got)

    for i in range(20):  # warm-up: allocator pools, caches and buffers reach their size
        epoch(i)
    start = snapshot()
    for i in range(20, EPOCHS):
        epoch(i)
    end = snapshot()
    for df in flows:
        df.close()
    assert len(end.fds) <= len(start.fds), f"fds grew over {EPOCHS - 20} epochs: {start.fds} -> {end.fds}"
    grown = (end.rss - start.rss) / 2**20
    assert grown < 20, f"RSS grew by {grown:.1f} MiB over {EPOCHS - 20} epochs"
    assert_no_leaks(before)
