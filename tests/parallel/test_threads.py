"""dataflow/parallel/_threads.py: MultiThreadMapData, MultiThreadRunner, ThreadPrefetchData.
(Epoch/ordering/error semantics of MultiThreadMapData are in test_map_semantics.py.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from dataflow import DataFlowNotReset, DataFlowReentrantError
from dataflow.parallel._threads import MultiThreadMapData, MultiThreadRunner, ThreadPrefetchData
from tests._leaks import wait_until
from tests.helpers import ListFlow
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)


def _src(n: int = 20) -> ListFlow:
    return ListFlow([[i] for i in range(n)])


def _threads_back_to(baseline: int) -> bool:
    return wait_until(lambda: threading.active_count() <= baseline, 5)


# --- MultiThreadMapData -------------------------------------------------------------------


def test_thread_map_tensorpack_signature_and_any_callable() -> None:
    seen: set[str] = set()

    def f(dp: list) -> list:  # a closure: fine for threads
        seen.add(threading.current_thread().name)
        time.sleep(0.001)
        return [dp[0] + 100]

    df = MultiThreadMapData(_src(), 2, f)  # (ds, num_thread, map_func)
    assert df.num_thread == 2 and df.buffer_size == 200 and df.strict is False
    baseline = threading.active_count()
    existing = set(threading.enumerate())
    with df:
        df.reset_state()
        assert len(set(threading.enumerate()) - existing) == 2
        for _ in range(2):
            out = list(df)
            assert len(out) == len(df) == 20
            assert {dp[0] for dp in out} <= set(range(100, 120))
    assert threading.main_thread().name not in seen
    assert _threads_back_to(baseline)


def test_thread_map_bad_num_thread() -> None:
    with pytest.raises(ValueError, match="num_thread"):
        MultiThreadMapData(_src(), 0, u.double)


# --- MultiThreadRunner --------------------------------------------------------------------


def test_thread_runner_len_epochs_values() -> None:
    baseline = threading.active_count()
    existing = set(threading.enumerate())
    df = MultiThreadRunner(u.make_range_5, 10, 2)  # (get_df, num_prefetch, num_thread)
    assert len(df) == 5
    with df:
        df.reset_state()
        assert len(set(threading.enumerate()) - existing) == 2
        for _ in range(4):
            out = list(df)
            assert len(out) == 5
            assert {dp[0] for dp in out} <= set(range(5))
    assert _threads_back_to(baseline)


def test_thread_runner_single_thread_order_across_epochs() -> None:
    with MultiThreadRunner(u.make_range_5, 3, 1) as df:
        df.reset_state()
        got = [dp[0] for _ in range(4) for dp in df]
    assert got == list(range(5)) * 4


def test_thread_runner_each_thread_builds_its_own_flow() -> None:
    made: list[ListFlow] = []
    lock = threading.Lock()

    def get_df() -> ListFlow:
        flow = ListFlow([[i] for i in range(3)])
        with lock:
            made.append(flow)
        return flow

    with MultiThreadRunner(get_df, 4, 2) as df:
        df.reset_state()
        for _ in range(5):
            list(df)
    workers = [f for f in made if f.resets]
    assert len(workers) == 2 and all(f.resets == 1 for f in workers)


def test_thread_runner_error_arrives_as_itself() -> None:
    """An exception in a runner thread is raised in the consumer as itself, stage noted."""
    with MultiThreadRunner(u.make_raising, 4, 2) as df:
        df.reset_state()
        t0 = time.monotonic()
        with pytest.raises(u.MyError) as info:
            for _ in range(3):
                list(df)
        assert time.monotonic() - t0 < 5
    u.check_user_error(info.value, u.MyError, "flow broke at 2", "raising_flow_iter", "MultiThreadRunner")


def test_thread_runner_timeout() -> None:
    with MultiThreadRunner(u.make_sleepy, 4, 1, timeout=0.5) as df:
        df.reset_state()
        it = iter(df)
        assert next(it) == [0]
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            next(it)
        assert time.monotonic() - t0 < 2.9


def test_thread_runner_protocol() -> None:
    df = MultiThreadRunner(u.make_range_5, 4, 1)
    with pytest.raises(DataFlowNotReset):
        next(iter(df))
    with df:
        df.reset_state()
        it = iter(df)
        next(it)
        with pytest.raises(DataFlowReentrantError):
            next(iter(df))
        it.close()
    with pytest.raises(DataFlowNotReset):
        next(iter(df))


@pytest.mark.parametrize(
    "kwargs, word",
    [({"num_prefetch": 0}, "num_prefetch"), ({"num_thread": 0}, "num_thread"), ({"timeout": 0}, "timeout")],
)
def test_thread_runner_bad_arguments(kwargs: dict, word: str) -> None:
    args = {"num_prefetch": 4, "num_thread": 1, **kwargs}
    with pytest.raises(ValueError, match=word):
        MultiThreadRunner(u.make_range_5, **args)


def test_thread_runner_get_df_must_be_callable() -> None:
    with pytest.raises(TypeError, match="get_df"):
        MultiThreadRunner(u.Range(3), 4, 1)  # type: ignore[arg-type]


# --- ThreadPrefetchData -------------------------------------------------------------------


def test_prefetch_is_epoch_preserving() -> None:
    src = _src(50)
    baseline = threading.active_count()
    with ThreadPrefetchData(src, 3) as df:
        assert len(df) == 50
        df.reset_state()
        for _ in range(3):
            assert list(df) == [[i] for i in range(50)]
    assert src.resets == 1 and src.closes == 1 and src.finished == 3
    assert _threads_back_to(baseline)


def test_prefetch_leaving_early_stops_the_thread() -> None:
    src = _src(1000)
    baseline = threading.active_count()
    df = ThreadPrefetchData(src, 2)
    df.reset_state()
    for i, _ in enumerate(df):
        if i == 3:
            break
    assert _threads_back_to(baseline)
    assert src.produced < 20  # it read at most num_prefetch (+ a few) ahead
    assert list(df) == [[i] for i in range(1000)]


def test_prefetch_upstream_error_arrives_as_itself() -> None:
    """An upstream exception behind .prefetch() is raised as itself, after the datapoints
    read before it."""
    df = ThreadPrefetchData(u.RaisingFlow(), 2)
    df.reset_state()
    got = []
    with pytest.raises(u.MyError) as info:
        for dp in df:
            got.append(dp)
    assert got == [[0], [1]]
    u.check_user_error(info.value, u.MyError, "flow broke at 2", "raising_flow_iter", "ThreadPrefetchData")


def test_prefetch_timeout() -> None:
    df = ThreadPrefetchData(u.SleepyFlow(), 2, timeout=0.5)
    it = iter(df)
    assert next(it) == [0]
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        next(it)
    assert time.monotonic() - t0 < 2.9


def test_prefetch_not_reentrant() -> None:
    df = ThreadPrefetchData(_src(), 2)
    it = iter(df)
    next(it)
    with pytest.raises(DataFlowReentrantError):
        next(iter(df))
    it.close()


@pytest.mark.parametrize(
    "kwargs, word", [({"num_prefetch": 0}, "num_prefetch"), ({"timeout": -1}, "timeout")]
)
def test_prefetch_bad_arguments(kwargs: dict, word: str) -> None:
    args = {"num_prefetch": 2, **kwargs}
    with pytest.raises(ValueError, match=word):
        ThreadPrefetchData(_src(), **args)


def _thread_map() -> Any:
    return MultiThreadMapData(u.Range(50), 2, u.double, strict=True, chunk=1)


def _thread_runner() -> Any:
    return MultiThreadRunner(u.make_range_5, 2, 2)


def _thread_prefetch() -> Any:
    return ThreadPrefetchData(u.Range(50), 2)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("build", "threads"),
    [
        (_thread_map, "dataflow-map-"),
        (_thread_runner, "dataflow-runner-"),
        (_thread_prefetch, "dataflow-prefetch"),
    ],
)
def test_a_ctrl_c_inside_the_consumers_queue_calls_never_strands_a_thread(build: Any, threads: str) -> None:
    """A KeyboardInterrupt raised as each of the first 40 functions of the ``queue``,
    ``threading`` and our queue modules that the consumer calls during a pass returns (where
    a real Ctrl-C can land: CPython checks for signals on returns from Python functions),
    then close(): the stage's threads stop. With ``queue.Queue`` one such point is right
    after its lock was taken in ``Condition.__enter__``: the lock stayed held and the
    threads (and ``close()``'s drain) waited on it forever."""
    import queue as queue_module
    import signal
    import sys

    from dataflow.parallel import _bounded_queue, _thread_util

    files = {queue_module.__file__, threading.__file__, _bounded_queue.__file__, _thread_util.__file__}

    def stage_threads_alive() -> bool:
        return any(t.name.startswith(threads) and t.is_alive() for t in threading.enumerate())

    for k in range(1, 41):
        df = build()
        df.reset_state()
        returns, fired = 0, False

        def tracer(frame: Any, event: str, arg: Any, at: int = k) -> Any:
            nonlocal returns, fired
            if event == "call":
                return tracer if frame.f_code.co_filename in files else None
            # where deferred_sigint() holds SIGINT (its handler swapped), no Ctrl-C lands
            deferred = signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            if event == "return" and not fired and not deferred:
                returns += 1
                if returns == at:
                    fired = True
                    raise KeyboardInterrupt
            return tracer

        sys.settrace(tracer)
        try:
            for _ in df:
                pass
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        closer = threading.Thread(target=df.close, daemon=True)  # close() itself must not hang
        closer.start()
        closer.join(5)
        assert not closer.is_alive(), f"close() hung (interrupt at return {k})"
        stopped = wait_until(lambda: not stage_threads_alive(), 3)
        assert stopped, f"threads left running (interrupt at return {k})"
        if not fired:
            break  # a pass has fewer such returns than k: every one was tried
