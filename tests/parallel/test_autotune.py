"""What the parallel maps tune by themselves (datapoints per task, datapoints in flight, the
worker count of ``num_proc="auto"``), from made-up measurements, and the maps that use them:
same results, exact resume, decisions logged, a map too cheap for processes told once."""

from __future__ import annotations

import logging
import re
import warnings
from typing import Any

import numpy as np
import pytest

import dataflow as D
from dataflow.parallel._map_base import TASK_SECONDS
from dataflow.parallel._maps import WORKER_BYTES, available_cores, memory_bound_workers
from tests.checkpoint._harness import check_resume

pytestmark = pytest.mark.timeout(240)


def ChunkTuner(stage: str, fixed: int | None, cap: int) -> Any:  # noqa: N802 - reads as the old name
    """A map (never started) whose chunk tuning is fed made-up measurements."""
    src = D.DataFromList([[0]], shuffle=False)
    m = type(stage, (D.MultiThreadMapData,), {})(src, 1, inc, chunk="auto" if fixed is None else fixed)
    m._chunk_cap = cap
    return _Tuner(m)


class _Tuner:
    """``observe``/``chunk``/``per_item`` over a map's ``_observe``/``_chunk``/``_per_item``."""

    def __init__(self, m: Any) -> None:
        self.m = m

    def observe(self, items: int, busy: float) -> None:
        self.m._observe(items, busy)

    @property
    def chunk(self) -> int:
        return int(self.m._chunk)

    @property
    def per_item(self) -> float | None:
        return self.m._per_item  # type: ignore[no-any-return]


# -- chunk tuning -----------------------------------------------------------------------------


def test_chunk_starts_at_one_and_groups_cheap_maps_up_to_the_cap() -> None:
    t = ChunkTuner("M", None, cap=50)
    assert t.chunk == 1
    t.observe(1, 2e-6)  # 2 us per datapoint: 1000 would fill a task, the cap wins
    assert t.chunk == 50


def test_chunk_stays_one_for_slow_maps() -> None:
    t = ChunkTuner("M", None, cap=50)
    for _ in range(20):
        t.observe(1, 0.004)
    assert t.chunk == 1


def test_chunk_targets_the_task_duration_between_the_bounds() -> None:
    t = ChunkTuner("M", None, cap=1000)
    per_item = TASK_SECONDS / 40
    for _ in range(30):
        t.observe(10, 10 * per_item)
    assert t.chunk == 40


def test_chunk_shrinks_when_the_map_becomes_slow() -> None:
    t = ChunkTuner("M", None, cap=64)
    t.observe(1, 1e-6)
    assert t.chunk == 64
    for _ in range(40):
        t.observe(64, 64 * 0.01)
    assert t.chunk == 1


def test_chunk_ignores_small_wobbles() -> None:
    t = ChunkTuner("M", None, cap=1000)
    for _ in range(30):
        t.observe(10, 10 * TASK_SECONDS / 40)
    assert t.chunk == 40
    t.observe(10, 10 * TASK_SECONDS / 30)  # estimate moves a little: no change of chunk
    assert t.chunk == 40


def test_a_first_one_datapoint_task_does_not_outweigh_the_large_task_after_it() -> None:
    t = ChunkTuner("M", None, cap=1000)
    t.observe(1, 50e-6)  # the first datapoint: caches cold, 50 us
    t.observe(500, 500 * 1e-6)  # then 500 at 1 us each
    assert t.per_item is not None and t.per_item < 1.2e-6
    for _ in range(20):
        t.observe(500, 500 * 1e-6)
    t.observe(500, 500 * 2e-6)  # once many are measured, one task moves it by a quarter
    assert t.per_item == pytest.approx(1.25e-6, rel=1e-3)


def test_fixed_chunk_never_changes() -> None:
    t = ChunkTuner("M", 4, cap=50)
    t.observe(4, 1e-6)
    t.observe(4, 10.0)
    assert t.chunk == 4


def test_chunk_decisions_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"):
        ChunkTuner("StageX", None, cap=8).observe(1, 1e-6)
    assert any("StageX: 8 datapoint(s) per task" in r.getMessage() for r in caplog.records)


def test_memory_bound() -> None:
    assert memory_bound_workers(2**30, available=8 * 2**30) == 4
    assert memory_bound_workers(2**30, available=2**20) == 1


# -- the process map with chunk="auto" -------------------------------------------------------


def inc(dp: list[int]) -> list[int]:
    return [dp[0] + 1]


def drop_odd(dp: list[int]) -> list[int] | None:
    return None if dp[0] % 2 else [dp[0]]


def _auto_map(n: int, func: Any = inc, size: int = 300, **kw: Any) -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(size)], shuffle=False)
    return D.MultiProcessMapDataZMQ(src, n, func, buffer_size=40, strict=True, ordered=True,
                                    timeout=60, **kw)


def test_auto_chunks_give_the_same_stream(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"), _auto_map(2, drop_odd) as df:
        df.reset_state()
        for _ in range(2):
            assert [dp[0] for dp in df] == list(range(0, 300, 2))
        assert df._chunk > 1  # a cheap map travels in groups
    assert any("per task" in r.getMessage() for r in caplog.records)


def test_auto_chunks_never_exceed_the_buffer() -> None:
    with _auto_map(2) as df:
        df.reset_state()
        it = iter(df)
        for _ in range(150):
            next(it)
            assert df._flight_items + df._pending_items <= df.buffer_size


def test_auto_chunks_resume_exactly() -> None:
    check_resume(lambda: _auto_map(2, drop_odd, size=120), epochs=2, max_cuts=8)


def test_bad_chunk_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk"):
        _auto_map(2, chunk=0)
    with pytest.raises((TypeError, ValueError), match="chunk"):
        _auto_map(2, chunk="fast")


# -- buffer_size="auto" ----------------------------------------------------------------------


def _auto_buffer(n: int = 2, budget: int = 128 * 2**20, batch: int = 0) -> Any:
    """A process map (never started) with ``buffer_size="auto"``, fed made-up result sizes."""
    src = D.DataFromList([[0]], shuffle=False)
    if batch:
        m: Any = D.MultiProcessMapAndBatchDataZMQ(src, n, inc, batch, "auto")
    else:
        m = D.MultiProcessMapDataZMQ(src, n, inc, buffer_size="auto")
    m._buffer_budget = budget
    return m


def test_auto_buffer_fits_large_results_in_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    b = _auto_buffer()
    assert b.buffer_size == 256  # 128 per worker
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"):
        b._size_buffer(1, 10 * 2**20)  # 10 MiB results: 12 in 128 MiB
    assert b.buffer_size == 12
    assert any("buffer_size 256 -> 12" in r.getMessage() for r in caplog.records)
    b._size_buffer(1, 10 * 2**20)
    assert b.buffer_size == 12
    huge = _auto_buffer(3, budget=2**20)
    huge._size_buffer(1, 2**30)
    assert huge.buffer_size == 6  # never under 2 per worker


def test_auto_buffer_keeps_two_batches_per_worker() -> None:
    b = _auto_buffer(2, budget=2**20, batch=64)  # MultiProcessMapAndBatchDataZMQ
    assert b.buffer_size == 256
    b._size_buffer(64, 64 * 2**20)  # 1 MiB per datapoint: the floor holds
    assert b.buffer_size == 256
    assert _auto_buffer(1, batch=64).buffer_size == 128


def test_auto_buffer_holds_few_tasks_of_a_slow_map() -> None:
    b = _auto_buffer()
    b._size_buffer(1, 100)  # one datapoint per task: 16 tasks per worker
    assert b.buffer_size == 32
    b._chunk = 64
    b._size_buffer(64, 6400)  # a cheap map's groups: the maximum
    assert b.buffer_size == 256


def test_auto_buffer_keeps_its_maximum_for_small_results() -> None:
    b = _auto_buffer()
    b._chunk = 64
    b._size_buffer(64, 64 * 100)
    assert b.buffer_size == 256


def big_array(dp: list[int]) -> list[Any]:
    import numpy as np

    return [dp[0], np.full(2**20, dp[0] % 256, dtype=np.uint8)]


def test_auto_buffer_shrinks_for_large_results() -> None:
    src = D.DataFromList([[i] for i in range(60)], shuffle=False)
    with D.MultiProcessMapDataZMQ(src, 1, big_array, buffer_size="auto", strict=True, ordered=True,
                                  timeout=60, shm_bytes=16 * 2**20) as df:
        df.reset_state()
        assert df.buffer_size == 128
        got = [(dp[0], int(dp[1][0])) for dp in df]
        assert got == [(i, i % 256) for i in range(60)]
        assert 2 <= df.buffer_size <= 8  # 8 MiB of results in flight at 1 MiB each


# -- num_proc="auto" -------------------------------------------------------------------------


def slow_inc(dp: list[int]) -> list[int]:
    import time

    time.sleep(0.005)  # slow enough that workers always pay, whatever the machine's speed
    return [dp[0] + 1]


def _num_auto(func: Any, size: int, **kw: Any) -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(size)], shuffle=False)
    return src.parallel_map(func, num_proc="auto", buffer_size="auto", timeout=60, **kw)


def test_auto_worker_count_is_the_cores_bounded_by_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    df = _num_auto(inc, 10)
    assert df.num_proc == "auto"
    assert df._workers == max(1, min(available_cores(), memory_bound_workers(WORKER_BYTES)))
    from dataflow.parallel import _maps as maps

    monkeypatch.setattr(maps, "available_cores", lambda: 64)
    monkeypatch.setattr(maps, "memory_bound_workers", lambda per_worker: 3)
    assert _num_auto(inc, 10)._workers == 3  # type: ignore[attr-defined]
    monkeypatch.setattr(maps, "memory_bound_workers", lambda per_worker: 1 << 16)
    assert _num_auto(inc, 10)._workers == 64  # type: ignore[attr-defined]


def test_auto_slow_map_uses_its_workers_keeps_order_and_does_not_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a map that gains from processes is not warned about
        with _num_auto(slow_inc, 120) as df:
            df.reset_state()
            assert [dp[0] for dp in df] == list(range(1, 121))
            pids = df.worker_pids
            assert len(pids) == df._workers  # type: ignore[attr-defined]
            assert [dp[0] for dp in df] == list(range(1, 121))
            assert df.worker_pids == pids  # the second epoch reuses them
    assert any("num_proc='auto' uses" in r.getMessage() for r in caplog.records)


def test_auto_cheap_map_warns_once_with_the_measured_costs_and_the_fix() -> None:
    import time

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _num_auto(inc, 5000) as df:
            df.reset_state()
            start = time.monotonic()  # judged once every worker started (lazily: ~0.1 s)
            while time.monotonic() - start < 1.0 or df._transport is not None:  # type: ignore[attr-defined]
                assert [dp[0] for dp in df] == list(range(1, 5001))  # still mapped, in order
                assert time.monotonic() - start < 60
    told = [w for w in caught if w.category is RuntimeWarning and "map_func takes" in str(w.message)]
    assert len(told) == 1, [str(w.message) for w in caught]
    text = str(told[0].message)
    assert re.search(
        r"takes [0-9.]+ us per datapoint in a worker, and moving the datapoint costs [0-9.]+ us in the "
        r"workers .* and [0-9.]+ us in this process .* at most [0-9.]+x as fast as in-process", text
    )
    assert ".map(f)" in text and ".batch(n)" in text
    assert told[0].filename == __file__  # attributed to the user's line


_BIG = np.zeros(4 * 2**20, np.uint8)  # made once per process: the map itself costs nothing


def big_view(dp: list[int]) -> list[Any]:
    return [dp[0], _BIG]  # 4 MiB that the worker copies into shared memory to send


def test_auto_map_dominated_by_moving_a_large_array_is_warned() -> None:
    """The map is free; the worker's copy of each result into shared memory is the cost."""
    import time

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _num_auto(big_view, 100) as df:
            df.reset_state()
            start = time.monotonic()
            while df._transport is not None:  # type: ignore[attr-defined]
                assert [dp[0] for dp in df] == list(range(100))
                assert time.monotonic() - start < 60
    told = [str(w.message) for w in caught if "map_func takes" in str(w.message)]
    assert len(told) == 1, [str(w.message) for w in caught]
    assert "in the workers (receiving it, sending the result)" in told[0] and ".map(f)" in told[0]


def test_fixed_worker_count_is_never_warned_about() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with _auto_map(2, inc, size=3000) as df:
            df.reset_state()
            assert len(list(df)) == 3000


def fails_at(bad: int, dp: list[int]) -> list[int]:
    if dp[0] == bad:
        raise KeyError(f"bad {dp[0]}")
    return dp


def test_auto_map_error_is_the_users_own() -> None:
    import functools

    with _num_auto(functools.partial(fails_at, 7), 20) as df:
        df.reset_state()
        with pytest.raises(KeyError, match="bad 7"):
            list(df)


def test_auto_map_resumes_exactly() -> None:
    check_resume(lambda: _num_auto(drop_odd, 40), epochs=2, max_cuts=8)


def test_auto_non_strict_map_resumes_exactly() -> None:
    def build() -> D.DataFlow:
        src = D.DataFromList([[i] for i in range(300)], shuffle=False)
        return D.MultiProcessMapData(src, "auto", drop_odd, ordered=True, timeout=60)

    check_resume(build, epochs=3, max_cuts=12)


def noisy(dp: list[int], rng: Any) -> list[Any]:
    return [dp[0], float(rng.random())]


def test_auto_map_with_item_rng_resumes_exactly() -> None:
    check_resume(lambda: _num_auto(noisy, 60, item_rng=True, seed=7), epochs=2, max_cuts=10)


def test_bad_num_proc_is_refused() -> None:
    src = D.DataFromList([[1]], shuffle=False)
    with pytest.raises(ValueError, match="num_proc"):
        D.MultiProcessMapDataZMQ(src, "many", inc)
    with pytest.raises(ValueError, match="buffer_size"):
        D.MultiProcessMapDataZMQ(src, 2, inc, buffer_size="big")


@pytest.mark.parametrize("func", [inc, slow_inc])
def test_auto_map_and_batch_gives_whole_batches_in_order(func: Any) -> None:
    src = D.DataFromList([[i] for i in range(100)], shuffle=False)
    with D.MultiProcessMapAndBatchDataZMQ(src, "auto", func, 8, "auto", strict=True, remainder=True,
                                          ordered=True, timeout=60) as df:
        df.reset_state()
        for _ in range(2):
            batches = [b[0].tolist() for b in df]
            assert batches == [list(range(i + 1, min(i + 9, 101))) for i in range(0, 100, 8)]
        assert df.buffer_size >= 16


# -- the thread map with chunk="auto" --------------------------------------------------------


def _thread_map(func: Any = inc, size: int = 300, **kw: Any) -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(size)], shuffle=False)
    return D.MultiThreadMapData(src, 2, func, buffer_size=40, strict=True, ordered=True, timeout=60, **kw)


def test_thread_map_groups_a_cheap_map_and_gives_the_same_stream() -> None:
    with _thread_map(drop_odd) as df:
        df.reset_state()
        for _ in range(2):
            assert [dp[0] for dp in df] == list(range(0, 300, 2))
        assert df._chunk == 10  # the cap: buffer_size / (2 * num_thread)
    with _thread_map(drop_odd, chunk=1) as df:
        df.reset_state()
        assert [dp[0] for dp in df] == list(range(0, 300, 2))
        assert df._chunk == 1


def test_thread_map_groups_resume_exactly() -> None:
    check_resume(lambda: _thread_map(drop_odd, size=120), epochs=2, max_cuts=8)
