"""The parallel methods of the fluent API (dataflow/_fluent.py): .parallel_map, .parallel,
.prefetch."""

from __future__ import annotations

import pytest

from dataflow import DataFromList
from dataflow.parallel._maps import MultiProcessMapDataZMQ
from dataflow.parallel._runners import MultiProcessRunnerZMQ
from dataflow.parallel._threads import MultiThreadMapData, ThreadPrefetchData
from tests.parallel import _util as u

pytestmark = pytest.mark.timeout(60)


def _src(n: int = 40) -> DataFromList:
    return DataFromList([[i] for i in range(n)], shuffle=False)


def _epochs(df, n: int) -> list:  # type: ignore[no-untyped-def]
    with df:
        df.reset_state()
        return [list(df) for _ in range(n)]


@pytest.mark.parametrize("how", [{"num_proc": 2}, {"num_thread": 2}], ids=["proc", "thread"])
@pytest.mark.parametrize("func", [u.double, u.drop_multiples_of_3])
def test_parallel_map_defaults_equal_map(how: dict, func: object) -> None:
    df = _src().parallel_map(func, **how)  # type: ignore[arg-type]
    cls = MultiProcessMapDataZMQ if "num_proc" in how else MultiThreadMapData
    assert type(df) is cls
    assert df.ordered is True and df.strict is True  # type: ignore[attr-defined]
    want = _epochs(_src().map(func), 1)[0]  # type: ignore[arg-type]
    assert _epochs(df, 3) == [want] * 3


def test_parallel_map_passes_options() -> None:
    df = _src().parallel_map(u.double, num_proc=2, ordered=False, strict=False, buffer_size=7, timeout=9.0)
    assert isinstance(df, MultiProcessMapDataZMQ)
    assert (df.ordered, df.strict, df.buffer_size, df.timeout, df.num_proc) == (False, False, 7, 9.0, 2)
    assert all(len(e) == 40 for e in _epochs(df, 2))


@pytest.mark.parametrize("kwargs", [{}, {"num_proc": 2, "num_thread": 2}])
def test_parallel_map_needs_exactly_one_of_proc_or_thread(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="num_proc"):
        _src().parallel_map(u.double, **kwargs)


def test_parallel_is_a_process_runner() -> None:
    df = _src(10).parallel(2)
    assert isinstance(df, MultiProcessRunnerZMQ) and df.num_proc == 2
    for e in _epochs(df, 2):
        assert len(e) == 10 and {dp[0] for dp in e} <= set(range(10))


def test_parallel_passes_options() -> None:
    df = _src(10).parallel(1, hwm=7, timeout=5.0)
    assert isinstance(df, MultiProcessRunnerZMQ)
    assert (df.num_proc, df.hwm, df.timeout) == (1, 7, 5.0)
    assert _epochs(df, 2) == [[[i] for i in range(10)]] * 2


def test_prefetch_is_thread_prefetch_and_preserves_epochs() -> None:
    df = _src(25).map(u.double).prefetch(3)
    assert isinstance(df, ThreadPrefetchData) and df.num_prefetch == 3
    assert _epochs(df, 2) == [[[2 * i] for i in range(25)]] * 2


def test_fluent_chain_builds_and_runs() -> None:
    df = _src(32).parallel_map(u.double, num_thread=2).batch(8).prefetch(2)
    out = _epochs(df, 1)[0]
    assert [b[0].tolist() for b in out] == [[2 * i for i in range(j, j + 8)] for j in range(0, 32, 8)]
