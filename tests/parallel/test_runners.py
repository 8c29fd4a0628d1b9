"""dataflow/parallel/_runners.py: MultiProcessRunnerZMQ and MultiProcessRunner."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from dataflow import DataFlowNotReset, DataFlowReentrantError, WorkerDied
from dataflow.parallel._runners import MultiProcessRunner, MultiProcessRunnerZMQ
from tests._leaks import pid_alive, wait_until
from tests.helpers import ListFlow
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)


# --- semantics ----------------------------------------------------------------------------


@pytest.mark.parametrize("num_proc", [1, 2])
def test_runner_len_epochs_values_and_pids(num_proc: int) -> None:
    with MultiProcessRunnerZMQ(u.Range(10), num_proc=num_proc) as df:
        assert len(df) == 10
        assert df.worker_pids == []
        df.reset_state()
        pids = df.worker_pids
        assert len(pids) == num_proc == len(set(pids))
        assert os.getpid() not in pids
        assert all(pid_alive(x) for x in pids)  # type: ignore[arg-type]
        for _ in range(3):
            out = list(df)
            assert len(out) == 10
            assert all(dp[0] in range(10) for dp in out)
    assert df.worker_pids == []
    assert wait_until(lambda: not any(pid_alive(x) for x in pids), 5)  # type: ignore[arg-type]


def test_runner_single_worker_keeps_order_and_loses_nothing_across_epochs() -> None:
    with MultiProcessRunnerZMQ(u.Range(7), num_proc=1) as df:
        df.reset_state()
        got = [dp for _ in range(5) for dp in df]
    # the worker repeats its flow; what was received but not yielded comes first next epoch
    assert got == [[i] for i in range(7)] * 5


def test_runner_each_worker_produces_the_whole_flow() -> None:
    with MultiProcessRunnerZMQ(u.Range(6), num_proc=2) as df:
        df.reset_state()
        got = [dp[0] for _ in range(40) for dp in df]
    assert set(got) == set(range(6))
    counts = Counter(got)
    assert all(c >= 30 for c in counts.values()), counts  # 240 results over 6 values


def test_runner_values_come_from_the_workers() -> None:
    class PidFlow(u.Range):
        def __iter__(self):  # type: ignore[no-untyped-def]
            for i in range(self.n):
                yield [i, os.getpid()]

    with MultiProcessRunnerZMQ(PidFlow(5), num_proc=2) as df:
        df.reset_state()
        pids = set(df.worker_pids)
        got = [dp for _ in range(20) for dp in df]
    assert {dp[1] for dp in got} <= pids
    assert os.getpid() not in {dp[1] for dp in got}


def test_runner_does_not_reset_flow_in_consumer() -> None:
    src = ListFlow([[i] for i in range(4)])
    with MultiProcessRunnerZMQ(src, num_proc=1) as df:
        df.reset_state()
        assert len(list(df)) == 4
    assert src.resets == 0 and src.epochs == 0  # the copies in the workers were used


def test_runner_unknown_length_iterates_forever() -> None:
    with MultiProcessRunnerZMQ(u.Counting(), num_proc=1) as df:
        df.reset_state()
        it = iter(df)
        got = [next(it)[0] for _ in range(1000)]
        it.close()
    assert got == list(range(1000))


def test_multiprocessrunner_tensorpack_signature() -> None:
    df = MultiProcessRunner(u.Range(8), 5, 2)  # (ds, num_prefetch, num_proc)
    assert isinstance(df, MultiProcessRunnerZMQ)
    assert df.num_proc == 2 and df.hwm == 5
    with df:
        df.reset_state()
        assert len(df.worker_pids) == 2
        for _ in range(2):
            out = list(df)
            assert len(out) == len(df) == 8
            assert {dp[0] for dp in out} <= set(range(8))


def test_runner_bulk_data_numpy() -> None:
    import numpy as np

    with MultiProcessRunnerZMQ(u.Range(50), num_proc=2) as df:
        df.reset_state()
        for dp in df:
            assert dp[0] in range(50)
    # arrays large enough for out-of-band frames arrive intact
    with MultiProcessRunnerZMQ(BigArrays(), num_proc=2) as df:
        df.reset_state()
        for dp in df:
            assert dp[1].shape == (300, 100)
            assert dp[1].dtype == np.float32
            assert (dp[1] == dp[0]).all()


class BigArrays(u.Range):
    def __init__(self) -> None:
        super().__init__(6)

    def __iter__(self):  # type: ignore[no-untyped-def]
        import numpy as np

        for i in range(self.n):
            yield [i, np.full((300, 100), i, dtype=np.float32)]


# --- failures -----------------------------------------------------------------------------


def test_exception_in_flow_arrives_as_its_own_type() -> None:
    """The flow's exception in a worker reaches the consumer as its own type, traceback once."""
    with MultiProcessRunnerZMQ(u.RaisingFlow(), num_proc=2) as df:
        df.reset_state()
        t0 = time.monotonic()
        with pytest.raises(u.MyError) as info:
            for _ in range(3):
                list(df)
        assert time.monotonic() - t0 < 5
    u.check_user_error(info.value, u.MyError, "flow broke at 2", "raising_flow_iter", "MultiProcessRunnerZMQ")


def test_datapoints_before_the_error_are_delivered() -> None:
    with MultiProcessRunnerZMQ(u.RaisingFlow(), num_proc=1) as df:
        df.reset_state()
        got = []
        with pytest.raises(u.MyError):
            for dp in df:
                got.append(dp)
    assert got == [[0], [1]]


def test_segfault_in_flow_raises_worker_died() -> None:
    with MultiProcessRunnerZMQ(u.SegfaultFlow(), num_proc=2) as df:
        df.reset_state()
        pids = df.worker_pids
        t0 = time.monotonic()
        with pytest.raises(WorkerDied) as info:
            list(df)
        assert time.monotonic() - t0 < 5
    err = info.value
    assert err.pid in pids
    assert err.exitcode == -11
    assert str(err.pid) in str(err) and "SIGSEGV" in str(err)


def test_os_exit_in_flow_raises_worker_died() -> None:
    with MultiProcessRunnerZMQ(u.ExitFlow(), num_proc=1) as df:
        df.reset_state()
        with pytest.raises(WorkerDied) as info:
            list(df)
    assert info.value.exitcode == 4
    assert "exit code 4" in str(info.value) and str(info.value.pid) in str(info.value)


@pytest.mark.timeout(15)
def test_death_noticed_while_another_worker_keeps_producing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A worker that dies must be reported even when the other worker keeps the consumer
    busy (issue: "detected ... within about two seconds; never a hang")."""
    with MultiProcessRunnerZMQ(u.OneWorkerCrashes(str(tmp_path / "claim")), num_proc=2) as df:
        df.reset_state()
        t0 = time.monotonic()
        with pytest.raises(WorkerDied) as info:
            for _ in df:
                if time.monotonic() - t0 > 6:
                    break
        assert time.monotonic() - t0 < 5
    assert info.value.exitcode == -11


def test_timeout_raises_timeout_error() -> None:
    with MultiProcessRunnerZMQ(u.SleepyFlow(), num_proc=1, timeout=0.5) as df:
        df.reset_state()
        it = iter(df)
        assert next(it) == [0]
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="timeout"):
            next(it)
        assert time.monotonic() - t0 < 2.9


# --- protocol and arguments ---------------------------------------------------------------


def test_iterating_before_reset_or_after_close_raises() -> None:
    df = MultiProcessRunnerZMQ(u.Range(3), num_proc=1)
    with pytest.raises(DataFlowNotReset):
        next(iter(df))
    df.reset_state()
    df.close()
    with pytest.raises(DataFlowNotReset):
        next(iter(df))


def test_not_reentrant() -> None:
    with MultiProcessRunnerZMQ(u.Range(5), num_proc=1) as df:
        df.reset_state()
        it = iter(df)
        next(it)
        with pytest.raises(DataFlowReentrantError):
            next(iter(df))
        it.close()
        assert len(list(df)) == 5


def test_an_epoch_whose_workers_reset_state_restarted_says_so() -> None:
    """Promise: an iterator held across ``reset_state()`` does not read the new workers'
    stream; it raises DataFlowNotReset, and a new epoch runs once it is dropped."""
    with MultiProcessRunnerZMQ(u.Range(50), num_proc=1) as df:
        df.reset_state()
        it = iter(df)
        next(it)
        df.reset_state()
        with pytest.raises(DataFlowNotReset, match="restarted the workers during this epoch"):
            list(it)
        assert len(list(df)) == 50


def test_reset_state_again_restarts_workers() -> None:
    with MultiProcessRunnerZMQ(u.Range(5), num_proc=2) as df:
        df.reset_state()
        old = df.worker_pids
        df.reset_state()
        new = df.worker_pids
        assert set(old).isdisjoint(new)
        assert wait_until(lambda: not any(pid_alive(x) for x in old), 5)  # type: ignore[arg-type]
        assert len(list(df)) == 5


def test_close_is_idempotent() -> None:
    df = MultiProcessRunnerZMQ(u.Range(5), num_proc=1)
    df.close()
    df.reset_state()
    df.close()
    df.close()


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"num_proc": 0}, "num_proc"),
        ({"num_proc": 1.5}, "num_proc"),
        ({"hwm": 0}, "hwm"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": -1}, "timeout"),
        ({"seed": -1}, "seed"),
        ({"start_method": "threads"}, "start_method"),
    ],
)
def test_bad_arguments_rejected_at_construction(kwargs: dict, word: str) -> None:
    """errors.py: bad arguments raise ValueError/TypeError at construction, naming the stage."""
    with pytest.raises((ValueError, TypeError), match=word) as info:
        MultiProcessRunnerZMQ(u.Range(3), **kwargs)
    assert "MultiProcessRunnerZMQ" in str(info.value)
