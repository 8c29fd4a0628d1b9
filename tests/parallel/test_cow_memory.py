"""Copy-on-read memory of process maps (dataflow/parallel/_late_workers.py): a worker started
after the first batch is forked by worker 0, not by the consumer, so it does not inherit the
consumer's pass (its order of indices) and keeps no private copy of it once the consumer
writes to and frees it."""

from __future__ import annotations

import time

import pytest

from dataflow import DataFromList, MultiProcessMapAndBatchDataZMQ

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.timeout(180)

MB = 2**20
ITEMS = 400_000  # the consumer's order of a pass: ~16 MB of list and ints


def wrap(name: str) -> list[str]:
    return [name]


def uss(pid: int) -> float:
    return float(psutil.Process(pid).memory_full_info().uss)


def test_a_worker_started_late_keeps_no_private_copy_of_the_consumers_pass() -> None:
    names = [f"/data/class_{i % 100:03d}/image_{i:08d}.jpg" for i in range(ITEMS)]
    df = MultiProcessMapAndBatchDataZMQ(DataFromList(names, shuffle=True, seed=0), 2, wrap, 64, strict=True)
    with df:
        df.reset_state()
        it = iter(df)
        next(it)  # the pass's order exists in the consumer now
        first, late = df.worker_pids  # starts the second worker now, if it is not yet
        assert first is not None and late is not None
        assert psutil.Process(late).ppid() == first  # forked by worker 0
        start = uss(late)
        batches = 1 + sum(1 for _ in it)
        assert batches == ITEMS // 64
        time.sleep(0.2)
        growth = uss(late) - start
        # forked by the consumer at this point it grew by the pass's order (~16 MB here)
        assert growth < 5 * MB, f"the late worker's private memory grew by {growth / MB:.1f} MB"
        assert {first, late} == set(df.worker_pids)  # both still serve


def test_every_worker_maps_and_a_second_pass_reuses_them() -> None:
    def tagged(x: int) -> list[int]:
        import os

        return [x, os.getpid()]

    src = DataFromList(list(range(4000)), shuffle=False)
    df = MultiProcessMapAndBatchDataZMQ(src, 2, tagged, 8, strict=True)
    with df:
        df.reset_state()
        pids = set(df.worker_pids)
        for _ in range(2):
            seen, values = set(), []
            for batch in df:
                values.extend(int(v) for v in batch[0])
                seen.update(int(p) for p in batch[1])
            assert sorted(values) == list(range(4000))
            assert seen == pids  # the worker forked by worker 0 maps too
