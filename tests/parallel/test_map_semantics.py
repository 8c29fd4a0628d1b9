"""Epochs, ordering, errors and timeouts shared by the parallel maps
(dataflow/parallel/_map_base.py): every test runs on MultiThreadMapData ("thread") and on
MultiProcessMapDataZMQ ("proc"), 2 workers each."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

import dataflow as D
from dataflow import DataFlowNotReset, DataFlowReentrantError, WorkerError
from tests.helpers import ListFlow
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)

KINDS = ["thread", "proc"]
N = 30


def _src(n: int = N) -> ListFlow:
    return ListFlow([[i] for i in range(n)])


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --- strict: one exact pass per __iter__ ---------------------------------------------------


@pytest.mark.parametrize("ordered", [False, True])
def test_strict_each_input_mapped_once_per_epoch(kind: str, ordered: bool) -> None:
    src = _src()
    expected = sorted([i * 2] for i in range(N) if i % 3)
    with u.make_map(kind, src, u.drop_multiples_of_3, strict=True, ordered=ordered) as df:
        df.reset_state()
        assert len(df) == N  # an upper bound when map_func drops
        for epoch in range(3):
            out = list(df)  # ends by itself: one pass
            if ordered:
                assert out == expected
            else:
                assert sorted(out) == expected
            # nothing read ahead into the next epoch
            assert src.epochs == epoch + 1
            assert src.produced == N * (epoch + 1)
    assert src.resets == 1


@pytest.mark.parametrize("ordered", [False, True])
def test_strict_abandoned_epoch_leaves_no_stale_results(kind: str, ordered: bool) -> None:
    src = _src()
    with u.make_map(kind, src, u.double, strict=True, ordered=ordered, buffer_size=8) as df:
        df.reset_state()
        it = iter(df)
        first = [next(it) for _ in range(5)]
        assert all(dp[0] % 2 == 0 for dp in first)
        it.close()  # abandon the epoch midway, with results in flight
        out = list(df)
        expected = [[i * 2] for i in range(N)]
        assert (out if ordered else sorted(out)) == expected
        out2 = list(df)
        assert (out2 if ordered else sorted(out2)) == expected


def test_strict_break_in_for_loop_then_full_epoch(kind: str) -> None:
    with u.make_map(kind, _src(), u.double, strict=True, buffer_size=4) as df:
        df.reset_state()
        for n, _ in enumerate(df):
            if n == 2:
                break
        assert sorted(df) == [[i * 2] for i in range(N)]


def test_strict_with_tiny_buffer(kind: str) -> None:
    with u.make_map(kind, _src(), u.double, strict=True, ordered=True, buffer_size=1) as df:
        df.reset_state()
        assert list(df) == [[i * 2] for i in range(N)]


# --- non-strict: len(ds) results per epoch, nothing lost -------------------------------------


def test_non_strict_ordered_is_exact_over_epochs(kind: str) -> None:
    k = 4
    with u.make_map(kind, _src(), u.double, strict=False, ordered=True, buffer_size=8) as df:
        df.reset_state()
        got = [list(df) for _ in range(k)]
    assert [len(e) for e in got] == [N] * k
    # results carried over from one epoch into the next are neither lost nor duplicated
    assert [dp for e in got for dp in e] == [[i * 2] for i in range(N)] * k


def test_non_strict_unordered_loses_nothing(kind: str) -> None:
    k, buffer_size = 5, 4
    with u.make_map(kind, _src(), u.double, strict=False, buffer_size=buffer_size) as df:
        df.reset_state()
        got = [list(df) for _ in range(k)]
    assert [len(e) for e in got] == [N] * k
    counts = Counter(dp[0] for e in got for dp in e)
    assert set(counts) == {i * 2 for i in range(N)}  # every input appears
    # out of order by at most the tasks in flight: each value k-1..k+1 times
    assert all(k - 1 <= c <= k + 1 for c in counts.values()), counts
    assert sum(k - c for c in counts.values() if c < k) <= buffer_size


def test_non_strict_epoch_length_with_drops(kind: str) -> None:
    with u.make_map(kind, _src(), u.drop_multiples_of_3, strict=False) as df:
        df.reset_state()
        for _ in range(2):
            out = list(df)
            assert len(out) == N
            assert {dp[0] for dp in out} <= {i * 2 for i in range(N) if i % 3}


def test_ordered_reorder_buffer_is_bounded_by_buffer_size(kind: str) -> None:
    """One slow datapoint must not let the other worker read the whole upstream into the
    reorder buffer: ``buffer_size`` bounds the datapoints held (module docstring of
    maps.py / _map_base.py: "bounds memory and the reorder buffer")."""
    u.reset_stall()
    src = _src(3000)
    with u.make_map(kind, src, u.stall_first_zero, strict=True, ordered=True, buffer_size=4) as df:
        df.reset_state()
        it = iter(df)
        assert next(it) == [0]  # arrives after the 1.5 s stall
        assert src.produced <= 4 * 4, f"{src.produced} upstream datapoints read ahead with buffer_size=4"
        it.close()
    u.reset_stall()


# --- failures -----------------------------------------------------------------------------


def test_exception_in_map_func_arrives_as_its_own_type(kind: str) -> None:
    """A map_func exception reaches the consumer as the type the user's code raised, with
    the worker's traceback once and the stage named."""
    with u.make_map(kind, _src(), u.fail_on_3, strict=True) as df:
        df.reset_state()
        t0 = time.monotonic()
        with pytest.raises(u.MyError) as info:
            list(df)
        assert time.monotonic() - t0 < 5
    u.check_user_error(info.value, u.MyError, "bad value 3", "fail_on_3", type(df).__name__)


class FailOnceOn3:
    """Raises on 3 the first time any worker or thread sees it (claimed through a file)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, dp: list[Any]) -> list[Any]:
        if dp[0] == 3 and u._claim(self.path):
            raise u.MyError("bad 3")
        return dp


def test_ordered_non_strict_stream_goes_on_after_an_error(kind: str, tmp_path: Any) -> None:
    """An error ends the epoch, not the endless stream: the next epoch of an ordered
    non-strict map goes on in order past the failed datapoint (its reorder buffer used to
    wait for the failed task's results forever)."""
    stream = [d for d in range(N) if d != 3] + list(range(N))  # two passes; 3 failed in the first
    fail = FailOnceOn3(str(tmp_path / "claim"))
    # one datapoint per task, and few in flight: the first 3 mapped is the first pass's
    kw: dict[str, Any] = {"chunk": 1, "buffer_size": 8, "timeout": 10}
    with u.make_map(kind, _src(), fail, strict=False, ordered=True, **kw) as df:
        df.reset_state()
        head: list[int] = []
        with pytest.raises(u.MyError, match="bad 3"):
            for dp in df:
                head.append(dp[0])
        assert head == stream[: len(head)]
        assert [dp[0] for dp in df] == stream[len(head) : len(head) + N]


def test_a_checkpoint_after_an_error_does_not_map_the_failed_task_again(kind: str, tmp_path: Any) -> None:
    """The error was the failed task's delivery: a checkpoint taken after it holds what was
    not yet yielded, not the failed task, so the resumed stream goes on as the uninterrupted
    one does (before, the failed datapoint came back first after a resume). Ordered, so that
    the streams compare exactly (the ledger is the same code for an unordered map)."""
    fail = FailOnceOn3(str(tmp_path / "claim"))
    kw: dict[str, Any] = {"chunk": 1, "buffer_size": 8, "timeout": 10, "strict": False, "ordered": True}
    with u.make_map(kind, D.DataFromList([[i] for i in range(N)], shuffle=False), fail, **kw) as df:
        df.reset_state()
        with pytest.raises(u.MyError, match="bad 3"):
            for _ in df:
                pass
        it = iter(df)
        [next(it) for _ in range(5)]
        state = df.state_dict()
        rest = [dp[0] for dp in it] + [dp[0] for dp in df]  # this epoch's end, the next epoch
    with u.make_map(kind, D.DataFromList([[i] for i in range(N)], shuffle=False), fail, **kw) as again:
        again.reset_state()
        again.load_state_dict(state)
        resumed = [dp[0] for dp in again] + [dp[0] for dp in again]
    assert len(rest) == 2 * N - 5
    assert resumed == rest


@pytest.mark.parametrize("func", [u.fail_unpicklable, u.fail_bad_init], ids=["unpicklable", "bad_init"])
def test_unpicklable_exception_still_arrives(kind: str, func: object) -> None:
    """An exception that cannot cross processes arrives as WorkerError naming its type (from
    a thread, as itself: nothing is pickled)."""
    with u.make_map(kind, _src(), func, strict=True) as df:  # type: ignore[arg-type]
        df.reset_state()
        with pytest.raises(Exception) as info:
            list(df)
    err = info.value
    name = "UnpicklableError" if func is u.fail_unpicklable else "BadInitError"
    if kind == "thread":
        assert type(err).__name__ == name
        return
    assert isinstance(err, WorkerError)
    assert err.type_name.endswith(name)
    assert func.__name__ in err.worker_traceback  # type: ignore[attr-defined]


def test_timeout_raises_timeout_error(kind: str) -> None:
    with u.make_map(kind, _src(4), u.sleep_3s, strict=True, timeout=0.5) as df:
        df.reset_state()
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="timeout"):
            list(df)
        assert time.monotonic() - t0 < 2.9


def test_bad_timeout_is_rejected(kind: str) -> None:
    with pytest.raises(ValueError, match="timeout"):
        u.make_map(kind, _src(), u.double, timeout=0)


# --- protocol -----------------------------------------------------------------------------


def test_iterating_before_reset_raises(kind: str) -> None:
    df = u.make_map(kind, _src(), u.double, strict=True)
    with pytest.raises(DataFlowNotReset):
        next(iter(df))
    df.close()


def test_iterating_after_close_raises(kind: str) -> None:
    df = u.make_map(kind, _src(), u.double, strict=True)
    df.reset_state()
    df.close()
    with pytest.raises(DataFlowNotReset):
        next(iter(df))


def test_not_reentrant(kind: str) -> None:
    with u.make_map(kind, _src(), u.double, strict=True) as df:
        df.reset_state()
        it1 = iter(df)
        next(it1)
        with pytest.raises(DataFlowReentrantError):
            next(iter(df))
        it1.close()
        assert len(list(df)) == N  # usable again once the first iterator is closed


def test_map_func_must_be_callable(kind: str) -> None:
    with pytest.raises(TypeError, match="map_func"):
        u.make_map(kind, _src(), 42)  # type: ignore[arg-type]


def test_reset_state_twice_restarts_cleanly(kind: str) -> None:
    src = _src()
    with u.make_map(kind, src, u.double, strict=True, ordered=True) as df:
        df.reset_state()
        it = iter(df)
        next(it)
        it.close()
        df.reset_state()
        assert list(df) == [[i * 2] for i in range(N)]
    assert src.resets == 2
