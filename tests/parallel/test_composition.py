"""Parallel stages inside parallel stages: threads inside a worker process work; a process
runner or map inside a worker process is refused with a clear message."""

from __future__ import annotations

from collections import Counter

import pytest

from dataflow import WorkerDied, WorkerError
from dataflow.parallel._maps import MultiProcessMapDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ
from dataflow.parallel._threads import MultiThreadMapData
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)


def test_thread_map_inside_process_runner_one_worker() -> None:
    with MultiProcessRunnerZMQ(u.ThreadMapInside(20), num_proc=1) as df:
        df.reset_state()
        got = [list(df) for _ in range(3)]
    # one worker repeating a strict, ordered thread map: exact passes, in order
    assert got == [[[2 * i] for i in range(20)]] * 3


def test_thread_map_inside_process_runner_two_workers() -> None:
    with MultiProcessRunnerZMQ(u.ThreadMapInside(20), num_proc=2) as df:
        df.reset_state()
        got = [dp[0] for _ in range(6) for dp in df]
    counts = Counter(got)
    assert set(counts) == {2 * i for i in range(20)}
    assert sum(counts.values()) == 120


def test_thread_map_around_process_runner() -> None:
    inner = MultiProcessRunnerZMQ(u.Range(10), num_proc=2)
    with MultiThreadMapData(inner, 2, u.double, strict=True) as df:
        df.reset_state()
        for _ in range(2):
            out = list(df)
            assert len(out) == 10 and {dp[0] for dp in out} <= {2 * i for i in range(10)}


def test_process_map_over_process_runner() -> None:
    inner = MultiProcessRunnerZMQ(u.Range(10), num_proc=1)
    with MultiProcessMapDataZMQ(inner, 2, u.double, strict=True, ordered=True) as df:
        df.reset_state()
        assert list(df) == [[2 * i] for i in range(10)]


@pytest.mark.parametrize("inner", ["runner", "map"])
def test_process_stage_inside_worker_is_refused(inner: str) -> None:
    if inner == "runner":
        nested = MultiProcessRunnerZMQ(u.Range(5), num_proc=1)
    else:
        nested = MultiProcessMapDataZMQ(u.Range(5), 1, u.double, strict=True)
    with MultiProcessRunnerZMQ(nested, num_proc=1) as df:
        df.reset_state()
        with pytest.raises(RuntimeError) as info:
            list(df)
    err = info.value
    assert not isinstance(err, (WorkerDied, WorkerError))
    assert "inside a worker process" in str(err)
    assert type(nested).__name__ in str(err)
