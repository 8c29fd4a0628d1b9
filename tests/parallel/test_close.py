"""close() and ``with`` on every parallel stage release every process, thread, fd, socket
and shared-memory ring; many create/iterate/close cycles leak nothing."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import pytest

from dataflow import MultiProcessMapAndBatchDataZMQ, MultiProcessMapDataZMQ, WorkerDied
from dataflow.base import DataFlow
from dataflow.parallel._runners import MultiProcessRunner, MultiProcessRunnerZMQ
from dataflow.parallel._threads import MultiThreadMapData, MultiThreadRunner, ThreadPrefetchData
from tests._leaks import assert_no_leaks, pid_alive, snapshot, wait_until
from tests.helpers import ListFlow
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(120)


def _src(n: int = 20) -> ListFlow:
    return ListFlow([[i] for i in range(n)])


FACTORIES: dict[str, Callable[[], DataFlow]] = {
    "runner": lambda: MultiProcessRunnerZMQ(u.Range(20), num_proc=2),
    "runner_tp": lambda: MultiProcessRunner(u.Range(20), 10, 2),
    "proc_map": lambda: MultiProcessMapDataZMQ(_src(), 2, u.double, strict=True),
    "proc_map_nonstrict": lambda: MultiProcessMapDataZMQ(_src(), 2, u.double),
    "map_batch": lambda: MultiProcessMapAndBatchDataZMQ(_src(), 2, u.to_pair, 4),
    "thread_map": lambda: MultiThreadMapData(_src(), 2, u.double),
    "thread_runner": lambda: MultiThreadRunner(u.make_range_5, 4, 2),
    "prefetch": lambda: ThreadPrefetchData(_src(), 2),
}


# --- close() and with ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FACTORIES))
def test_close_leaves_nothing(name: str) -> None:
    before = snapshot()
    df = FACTORIES[name]()
    df.reset_state()
    for _ in range(2):
        assert len(list(df)) == len(df)
    df.close()
    assert_no_leaks(before)
    df.close()  # idempotent


@pytest.mark.parametrize("name", list(FACTORIES))
def test_with_block_leaves_nothing_even_after_abandoned_epoch(name: str) -> None:
    before = snapshot()
    with pytest.raises(KeyError):
        with FACTORIES[name]() as df:
            df.reset_state()
            for i, _ in enumerate(df):
                if i == 2:
                    raise KeyError("leave the block")
    assert_no_leaks(before)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_close_leaves_nothing_with_start_method(method: str) -> None:
    # warm-up: multiprocessing's own long-lived helpers (forkserver, resource tracker) start
    # with the first use of a start method; they are not ours to stop
    with MultiProcessRunnerZMQ(u.Range(2), num_proc=1, start_method=method) as warm:
        warm.reset_state()
        list(warm)
    before = snapshot()
    with MultiProcessRunnerZMQ(u.Range(10), num_proc=2, start_method=method) as df:
        df.reset_state()
        pids = df.worker_pids
        list(df)
    with MultiProcessMapDataZMQ(_src(), 2, u.double, strict=True, start_method=method) as dm:
        dm.reset_state()
        pids += dm.worker_pids
        list(dm)
    assert not any(pid_alive(x) for x in pids)  # type: ignore[arg-type]
    assert_no_leaks(before)


@pytest.mark.parametrize(
    "make, exc",
    [
        (lambda: MultiProcessRunnerZMQ(u.RaisingFlow(), num_proc=2), u.MyError),
        (lambda: MultiProcessRunnerZMQ(u.SegfaultFlow(), num_proc=2), WorkerDied),
        (lambda: MultiProcessMapDataZMQ(_src(), 2, u.fail_on_3, strict=True), u.MyError),
        (lambda: MultiProcessMapDataZMQ(_src(), 2, u.exit_on_3, strict=True), WorkerDied),
        (lambda: MultiThreadMapData(_src(), 2, u.fail_on_3, strict=True), u.MyError),
    ],
    ids=["runner_error", "runner_segv", "map_error", "map_exit", "thread_map_error"],
)
def test_close_after_failure_leaves_nothing(make: Callable[[], DataFlow], exc: type) -> None:
    before = snapshot()
    with make() as df:
        df.reset_state()
        with pytest.raises(exc):
            for _ in range(3):
                list(df)
    assert_no_leaks(before)


def test_garbage_collection_stops_workers() -> None:
    before = snapshot()
    df = MultiProcessRunnerZMQ(u.Range(10), num_proc=2)
    df.reset_state()
    pids = df.worker_pids
    list(df)
    del df
    gc.collect()
    assert wait_until(lambda: not any(pid_alive(x) for x in pids), 5)  # type: ignore[arg-type]
    assert_no_leaks(before)


# --- many cycles -------------------------------------------------------------------------


def _cycles(make: Callable[[], DataFlow], n: int, budget_s: float = 30.0) -> None:
    """Up to ``n`` start/iterate/close cycles, fewer (but at least 12) when the machine is so
    busy that they take more than ``budget_s``: a leak of one cycle shows after a few."""
    list_before = snapshot()
    deadline = time.monotonic() + budget_s
    for i in range(n):
        with make() as df:
            df.reset_state()
            assert len(list(df)) == len(df)
        if i == 4:  # after warm-up (imports, lazily created caches)
            warm = snapshot()
        if i >= 11 and time.monotonic() > deadline:
            break
    assert_no_leaks(list_before)
    after = snapshot()
    assert len(after.fds) <= len(warm.fds), (warm.fds, after.fds)
    assert after.rss - warm.rss < 50 * 2**20, f"RSS grew by {(after.rss - warm.rss) / 2**20:.1f} MiB"


# 30 cycles: 25 after the warm-up, so a leak of one fd or thread per cycle shows 25 times over
def test_runner_30_cycles_leak_nothing() -> None:
    _cycles(lambda: MultiProcessRunnerZMQ(u.Range(10), num_proc=2), 30)


def test_process_map_30_cycles_leak_nothing() -> None:
    _cycles(lambda: MultiProcessMapDataZMQ(_src(10), 2, u.double, strict=True), 30)


def test_thread_map_30_cycles_leak_nothing() -> None:
    _cycles(lambda: MultiThreadMapData(_src(10), 2, u.double, strict=True), 30)
