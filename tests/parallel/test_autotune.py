"""The autotune decisions (datapoints per task, worker count) from made-up measurements, and
the maps that use them: same results, exact resume, decisions logged."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import dataflow as D
from dataflow.parallel._autotune import (
    TASK_SECONDS,
    ChunkTuner,
    WorkerPlan,
    memory_bound_workers,
)
from dataflow.parallel._autoworkers import AutoBuffer, AutoWorkers
from tests.checkpoint._harness import check_resume

pytestmark = pytest.mark.timeout(240)


# -- ChunkTuner -----------------------------------------------------------------------------


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


# -- WorkerPlan -----------------------------------------------------------------------------


def test_cheap_map_stays_in_process() -> None:
    plan = WorkerPlan("M", max_workers=2, cores=2)
    assert plan.decide(work=2e-6, own=3e-6) == 0  # parallel would not pay
    assert plan.workers == 0


def test_slow_map_uses_every_core() -> None:
    assert WorkerPlan("M", max_workers=4, cores=4).decide(work=0.004, own=1e-6) == 4


def test_large_results_that_workers_must_copy_keep_the_map_in_process() -> None:
    # 9.6 MB made in 2.5 ms; a worker also copies it into shared memory (2.4 ms at 4 GB/s)
    assert WorkerPlan("M", max_workers=2, cores=2).decide(work=0.0025, own=1e-5, ship=0.0024) == 0
    assert WorkerPlan("M", max_workers=2, cores=2).decide(work=0.0025, own=1e-5) == 2


def test_worker_count_is_capped_by_max_workers() -> None:
    assert WorkerPlan("M", max_workers=2, cores=16).decide(work=0.004, own=1e-6) == 2


def test_consumer_bound_map_takes_no_more_workers_than_it_can_feed() -> None:
    # the map costs 4x the consumer's part: ~4 workers keep up; more would only wait
    n = WorkerPlan("M", max_workers=16, cores=16).decide(work=40e-6, own=10e-6)
    assert 3 <= n <= 5


def test_predicted_parallel_rate_never_exceeds_the_consumer_rate() -> None:
    plan = WorkerPlan("M", max_workers=8, cores=8)
    for n in range(1, 9):
        assert plan.predicted_rate(n, work=1e-3, own=1e-4) <= 1 / (1e-4 + plan.transport) + 1e-6


def test_adjust_grows_when_the_consumer_waits_and_shrinks_when_it_is_the_bottleneck() -> None:
    plan = WorkerPlan("M", max_workers=3, cores=3, workers=2)
    assert plan.adjust(0.6) == 3
    assert plan.adjust(0.6) == 3  # at the bound
    assert plan.adjust(0.0) == 2  # consumer saturated and no core left to it
    assert plan.adjust(0.1) == 2  # in between: unchanged
    assert WorkerPlan("M", max_workers=3, cores=3, workers=0).adjust(0.9) == 0  # in-process


def test_plan_decisions_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"):
        WorkerPlan("StageY", max_workers=2, cores=2).decide(work=2e-6, own=3e-6)
    assert any("StageY: maps in-process" in r.getMessage() for r in caplog.records)


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
        assert df._tuner.chunk > 1  # a cheap map travels in groups
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


# -- AutoWorkers (the running side of num_proc="auto"), on a made-up clock --------------------


def _auto(most: int = 2, cores: int = 2) -> AutoWorkers:
    return AutoWorkers(WorkerPlan("M", max_workers=most, cores=cores))


def test_probe_waits_for_enough_items_and_time() -> None:
    a = _auto()
    a.restart(0.0)
    assert not a.mapped_inline(4, 0.02, 0.021)  # 4 items: too few to judge
    assert not a.mapped_inline(4, 0.02, 0.042)  # 8 items, but not yet probe_seconds
    assert not a.decided
    assert a.mapped_inline(42, 0.21, a.probe_seconds)  # 50 items of 5 ms each: workers pay
    assert a.decided and a.plan.workers == 2


def test_probe_keeps_a_cheap_map_in_process_and_decides_again_later() -> None:
    a = _auto()
    a.restart(0.0)
    t = 0.0
    while not a.decided:
        t += 0.003
        assert not a.mapped_inline(1000, 0.001, t)  # 1 us per datapoint, 2 us the consumer's own
    assert a.plan.workers == 0
    went = []
    for _ in range(200):  # the map became slow: 5 ms per datapoint, decided again per window
        t += 0.0051
        went.append(a.mapped_inline(1, 0.005, t))
    assert went.index(True) >= 50  # not before a window has passed
    assert a.plan.workers == 2


def test_probe_lasts_as_long_as_starting_workers_costs() -> None:
    a = _auto()
    a.restart(0.0)
    assert not a.mapped_inline(100_000, 0.05, 0.1)  # many datapoints, but too soon
    assert not a.decided
    a.mapped_inline(100_000, 0.05, a.probe_seconds)
    assert a.decided


def _windows(
    a: AutoWorkers, t: float, rates: list[float], wait: float = 0.25
) -> tuple[float, list[int | None]]:
    """Parallel windows delivering ``rates`` datapoints/s; (the time after, the answers)."""
    out = []
    for r in rates:
        t += 1.001 * a.window  # a hair more than a window, whatever the rounding
        out.append(a.received(round(r * a.window), wait, t))
    return t, out


def test_waiting_consumer_gets_another_worker_per_window() -> None:
    a = _auto(most=3, cores=4)
    a.plan.workers = 1
    a.restart(0.0)
    assert a.received(100, 0.3, 0.3) is None  # window not over
    t, out = _windows(a, 0.0, [200], wait=0.5)
    assert out == [2]  # waited the whole window: one more
    t, out = _windows(a, t, [400, 400, 400], wait=0.0)  # settle, then a trial of 2 windows
    assert out == [None, None, None] and a.plan.workers == 2  # 2 workers faster: kept
    t, out = _windows(a, t, [400], wait=0.4)
    assert out == [3]


def _parallel_after_probe(a: AutoWorkers, per_item: float = 0.005) -> float:
    """Probe in-process at ``per_item`` s per datapoint until workers are chosen, then let
    the settling window pass; the time."""
    a.restart(0.0)
    t = 0.0
    while True:
        t += per_item
        if a.mapped_inline(1, per_item, t):
            break
    a.restart(t)
    t, out = _windows(a, t, [50.0])  # settling: whatever it measured
    assert out == [None]
    return t


def test_workers_slower_than_in_process_are_undone_and_tried_again_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a = _auto()
    t = _parallel_after_probe(a)  # in-process: 200/s
    assert a.plan.workers == 2 and a.rates[0] == pytest.approx(200, rel=0.05)
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"):
        # a loaded machine: the workers deliver 120/s, clearly below in-process: undone
        t, out = _windows(a, t, [120, 120])
    assert out == [None, 0] and not a.parallel
    assert any("back to in-process" in r.getMessage() for r in caplog.records)
    went = []
    for _ in range(2000):  # in-process windows; the model keeps proposing workers
        t += 0.005
        went.append(a.mapped_inline(1, 0.005, t))
    first = went.index(True) * 0.005
    assert a.retry <= first <= a.retry + 2 * a.window  # not before the retry delay


def test_a_small_wobble_or_one_bad_window_is_no_loss() -> None:
    a = _auto()
    t = _parallel_after_probe(a)  # in-process: 200/s
    t, out = _windows(a, t, [190, 160])  # within the 25% kept
    assert out == [None, None] and a.parallel
    b = _auto()
    t = _parallel_after_probe(b)
    t, out = _windows(b, t, [60, 400])  # one bad window, one good: the mean wins
    assert out == [None, None] and b.parallel


def test_repeated_losses_double_the_retry_delay() -> None:
    a = _auto()
    t = _parallel_after_probe(a)
    delays = []
    for _ in range(3):
        t, out = _windows(a, t, [100, 100])  # slower than in-process: undone
        assert out == [None, 0]
        lost_at = t
        while not a.mapped_inline(1, 0.005, t + 0.005):
            t += 0.005
        t += 0.005
        delays.append(t - lost_at)
        a.restart(t)
        t, _ = _windows(a, t, [50.0])  # settling
    assert delays[1] > 1.6 * delays[0] and delays[2] > 1.6 * delays[1]


def test_workers_that_win_stay_and_give_way_when_the_load_rises() -> None:
    a = _auto()
    t = _parallel_after_probe(a)
    t, out = _windows(a, t, [380] * 6)  # 380/s > 200/s in-process: kept
    assert out == [None] * 6 and a.parallel
    t, out = _windows(a, t, [120, 120])  # the median of the last 3 falls below in-process
    assert out == [None, 0] and not a.parallel


def test_in_process_that_loses_to_the_workers_it_replaced_is_undone() -> None:
    a = _auto()
    t = _parallel_after_probe(a)  # in-process: 200/s
    t, out = _windows(a, t, [380, 380])
    a.rates[0] = 1e9  # as if in-process had been measured far faster
    t, out = _windows(a, t, [380])
    assert out == [0]  # gives way
    for _ in range(3):  # settling, then a trial of 2 windows at 200/s: back to the workers
        done = False
        while not done:
            t += 0.005
            done = a.mapped_inline(1, 0.005, t) or a._start == t
    assert a.parallel and 0 in a._avoid(t)


def test_a_fallback_in_process_must_match_the_workers_it_replaced() -> None:
    a = _auto()
    t = _parallel_after_probe(a)  # in-process: 200/s
    t, out = _windows(a, t, [380, 380])
    a.rates[0] = 1e9  # as if in-process had been measured far faster
    t, out = _windows(a, t, [380])
    assert out == [0]
    a.restart(t)
    went = []
    while len(went) < 3 * 100:  # settling, then a trial at 320/s: 84% of the workers' rate
        t += 0.00625
        went.append(a.mapped_inline(2, 0.0062, t))
    assert any(went) and a.parallel  # not enough for a move against the model: workers again
    assert 2 not in a._avoid(t)


def test_a_losing_extra_worker_is_undone() -> None:
    a = _auto(most=3, cores=4)
    a.plan.workers = 2
    a.restart(0.0)
    t, out = _windows(a, 0.0, [400], wait=0.4)
    assert out == [3]  # waited: one more
    t, out = _windows(a, t, [250, 250, 250], wait=0.4)  # settle, trial: slower, back to 2
    assert out == [None, None, 2]
    t, out = _windows(a, t, [400, 400], wait=0.4)  # settle, then: 3 is not tried again yet
    assert out == [None, None] and a.plan.workers == 2


# -- AutoBuffer -----------------------------------------------------------------------------


def test_auto_buffer_fits_large_results_in_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    b = AutoBuffer("M", most=256, budget_bytes=128 * 2**20)
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"):
        assert b.observe(1, 10 * 2**20, workers=2) == 12  # 10 MiB results: 12 in 128 MiB
    assert any("buffer_size 256 -> 12" in r.getMessage() for r in caplog.records)
    assert b.observe(1, 10 * 2**20, workers=2) is None
    huge = AutoBuffer("M", most=256, budget_bytes=2**20)
    assert huge.observe(1, 2**30, workers=3) == 6  # never under 2 per worker


def test_auto_buffer_keeps_two_batches_per_worker() -> None:
    b = AutoBuffer("M", most=256, budget_bytes=2**20, unit=64)  # MultiProcessMapAndBatchDataZMQ
    assert b.observe(64, 64 * 2**20, workers=2) is None  # 1 MiB per datapoint: the floor holds
    assert b.size(2) == 256 and b.size(3) == 384
    assert AutoBuffer("M", most=8, budget_bytes=2**20, unit=64).most == 128


def test_auto_buffer_holds_few_tasks_of_a_slow_map() -> None:
    b = AutoBuffer("M", most=256, budget_bytes=128 * 2**20)
    assert b.observe(1, 100, workers=2, chunk=1) == 32  # one datapoint per task: 16 tasks per worker
    assert b.observe(64, 6400, workers=2, chunk=64) == 256  # a cheap map's groups: the maximum


def test_auto_buffer_keeps_its_maximum_for_small_results() -> None:
    b = AutoBuffer("M", most=256, budget_bytes=128 * 2**20)
    assert b.observe(64, 64 * 100, workers=2) is None
    assert b.current == 256


# -- the process map with num_proc="auto" ---------------------------------------------------


def slow_inc(dp: list[int]) -> list[int]:
    import time

    time.sleep(0.005)  # slow enough that workers always pay, whatever the machine's speed
    return [dp[0] + 1]


def _num_auto(func: Any, size: int, **kw: Any) -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(size)], shuffle=False)
    return src.parallel_map(func, num_proc="auto", buffer_size="auto", timeout=60, **kw)


def test_auto_cheap_map_stays_in_process(caplog: pytest.LogCaptureFixture) -> None:
    import time

    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"), _num_auto(inc, 5000) as df:
        df.reset_state()
        deadline = time.monotonic() + 60
        while not df._auto.decided or time.monotonic() < deadline - 59:  # past the probe, >= 1 s
            assert [dp[0] for dp in df] == list(range(1, 5001))
            assert time.monotonic() < deadline
        assert df.worker_pids == []  # no process was started
    assert any("maps in-process" in r.getMessage() for r in caplog.records)


def test_auto_slow_map_starts_workers_and_keeps_order(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"), _num_auto(slow_inc, 60) as df:
        df.reset_state()
        assert [dp[0] for dp in df] == list(range(1, 61))
        pids = df.worker_pids
        assert len(pids) >= 1
        assert [dp[0] for dp in df] == list(range(1, 61))
        assert df.worker_pids == pids  # the second epoch reuses them
    assert any("worker(s)" in r.getMessage() for r in caplog.records)


def fails_at(bad: int, dp: list[int]) -> list[int]:
    if dp[0] == bad:
        raise KeyError(f"bad {dp[0]}")
    return dp


@pytest.mark.parametrize("bad", [1, 7, 9])  # in a measured stretch: its timed call, untimed, timed
def test_auto_in_process_error_is_the_users_own(bad: int) -> None:
    import functools

    with _num_auto(functools.partial(fails_at, bad), 20) as df:
        df.reset_state()
        with pytest.raises(KeyError, match=f"bad {bad}") as info:
            list(df)
    assert any("map_func (in-process" in note for note in getattr(info.value, "__notes__", []))


def test_auto_map_resumes_exactly() -> None:
    check_resume(lambda: _num_auto(drop_odd, 40), epochs=2, max_cuts=8)


def test_bad_num_proc_is_refused() -> None:
    src = D.DataFromList([[1]], shuffle=False)
    with pytest.raises(ValueError, match="num_proc"):
        D.MultiProcessMapDataZMQ(src, "many", inc)
    with pytest.raises(ValueError, match="buffer_size"):
        D.MultiProcessMapDataZMQ(src, 2, inc, buffer_size="big")


def test_auto_map_falls_back_in_process_and_keeps_order(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="dataflow.autotune"), _num_auto(slow_inc, 150) as df:
        df.reset_state()
        auto = df._auto
        out = []
        went_back = False
        for dp in df:
            out.append(dp[0])
            if auto.parallel and len(out) >= 20 and not went_back:
                auto.rates[0] = 1e9  # as if in-process had been measured far faster
                auto.window = 0.05
                went_back = True
        assert out == list(range(1, 151))  # whole and in order across the switches
        assert went_back and df.worker_pids  # the workers were kept
        assert [dp[0] for dp in df] == list(range(1, 151))  # the next epoch is whole too
    messages = [r.getMessage() for r in caplog.records]
    assert any("below the 1000000000/s" in m and "in-process" in m for m in messages)  # gave way


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


# -- the thread map with chunk="auto" --------------------------------------------------------


def _thread_map(func: Any = inc, size: int = 300, **kw: Any) -> D.DataFlow:
    src = D.DataFromList([[i] for i in range(size)], shuffle=False)
    return D.MultiThreadMapData(src, 2, func, buffer_size=40, strict=True, ordered=True, timeout=60, **kw)


def test_thread_map_groups_a_cheap_map_and_gives_the_same_stream() -> None:
    with _thread_map(drop_odd) as df:
        df.reset_state()
        for _ in range(2):
            assert [dp[0] for dp in df] == list(range(0, 300, 2))
        assert df._tuner.chunk == 10  # the cap: buffer_size / (2 * num_thread)
    with _thread_map(drop_odd, chunk=1) as df:
        df.reset_state()
        assert [dp[0] for dp in df] == list(range(0, 300, 2))
        assert df._tuner.chunk == 1


def test_thread_map_groups_resume_exactly() -> None:
    check_resume(lambda: _thread_map(drop_odd, size=120), epochs=2, max_cuts=8)


def slow_big(dp: list[int]) -> list[Any]:
    import time

    import numpy as np

    time.sleep(0.005)
    return [dp[0], np.full(2**16, dp[0] % 256, dtype=np.uint8)]


def test_auto_workers_get_shared_memory_only_for_large_results() -> None:
    with _num_auto(slow_inc, 120) as df:
        df.reset_state()
        assert [dp[0] for dp in df] == list(range(1, 121))
        assert df._pool is not None and df._pool.rings is None  # small results: no rings to reserve
    with _num_auto(slow_big, 120) as df:
        df.reset_state()
        assert [int(dp[1][0]) for dp in df] == [i % 256 for i in range(120)]
        assert df._pool is not None and df._pool.rings is not None


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


def noisy(dp: list[int], rng: Any) -> list[Any]:
    return [dp[0], float(rng.random())]


def test_auto_in_process_groups_with_item_rng_resume_exactly() -> None:
    check_resume(lambda: _num_auto(noisy, 60, item_rng=True, seed=7), epochs=2, max_cuts=10)


# -- num_proc="auto" in-process: measured stretches, each result yielded as it is made ------


class _SpinCalls:
    """A map of ~20 us (spinning on the clock: never cheaper, whatever the machine), dearer
    than receiving a worker's result, so it is measured; it counts its calls."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, dp: list[int]) -> list[int] | None:
        import time

        self.n += 1
        end = time.perf_counter() + 20e-6
        while time.perf_counter() < end:
            pass
        return None if dp[0] % 3 == 2 else [dp[0]]


def test_auto_measured_in_process_map_reads_nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    # While in-process (here the probe never ends, however slow the machine), each datapoint
    # is mapped when the consumer asks for it, and not held in a group.
    monkeypatch.setattr(AutoWorkers, "probe_seconds", 1e9)
    calls, n = _SpinCalls(), 400
    with _num_auto(calls, n) as df:
        df.reset_state()
        for _ in range(2):
            start, out = calls.n, []
            for dp in df:
                assert calls.n - start == dp[0] + 1  # mapped exactly up to the one yielded
                out.append(dp[0])
            assert out == [i for i in range(n) if i % 3 != 2]
        # measured stretches (the first of one datapoint, then up to ~10 ms of map time), not
        # the unmeasured rest of a cheap map
        assert df._measures >= 3
        assert df._tuner.per_item is not None and df._tuner.per_item >= 20e-6
        assert df.worker_pids == []


def test_measured_stretches_time_shifting_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    # One call in 8 is timed in a long stretch; the timed positions shift by one each stretch,
    # so an upstream whose cost repeats every few datapoints is sampled at every point of its
    # period, not always at the same one (which would skew the map's measured cost).
    import time
    import types

    from dataflow.parallel import _map_auto, _map_passes

    events: list[int | None] = []  # None: the pass read the clock; i: it mapped datapoint i

    def perf_counter() -> float:
        events.append(None)
        return time.perf_counter()

    def mapped(dp: list[int]) -> list[int] | None:
        events.append(dp[0])
        return spin(dp)

    spin = _SpinCalls()
    monkeypatch.setattr(AutoWorkers, "probe_seconds", 1e9)  # in-process throughout
    monkeypatch.setattr(_map_auto, "STRETCH_MAX", 64)  # a multiple of 8: fixed positions would repeat
    monkeypatch.setattr(_map_auto, "TASK_SECONDS", 1e-9)  # no minimum from the group size
    monkeypatch.setattr(_map_passes, "time", types.SimpleNamespace(perf_counter=perf_counter))
    n = 64 * 8
    with _num_auto(mapped, n) as df:
        df.reset_state()
        for _ in range(3):
            assert len(list(df)) == len([i for i in range(n) if i % 3 != 2])
    # a timed call is the only one with a clock read right before and right after it
    triples = zip(events, events[1:], events[2:])
    timed = [e for a, e, b in triples if a is None and e is not None and b is None]
    assert len(timed) >= 3 * n // 8 - 8
    passes: list[list[int]] = [[]]
    for i in timed:
        if passes[-1] and i < passes[-1][-1]:
            passes.append([])  # the datapoint index starts again: a new pass
        passes[-1].append(i)
    assert len(passes) == 3
    for timed_in_pass in passes:
        # 8 stretches of 64 per pass: all 8 positions of the period (fixed positions: 1 or 2;
        # a stretch shortened by a slow measure on a loaded machine shifts them, hence >= 5)
        assert len({i % 8 for i in timed_in_pass}) >= 5


def test_auto_measured_in_process_map_resumes_exactly() -> None:
    check_resume(lambda: _num_auto(_SpinCalls(), 300), epochs=2, max_cuts=12)


def test_auto_measured_in_process_upstream_error_is_not_blamed_on_the_map() -> None:
    with D.MultiProcessMapData(_FailsAt(300, 200), "auto", _SpinCalls(), strict=True, timeout=60) as df:
        df.reset_state()
        assert len(list(df)) == 200
        with pytest.raises(LookupError, match="upstream broke at 200") as err:
            list(df)
        assert not getattr(err.value, "__notes__", [])


# -- num_proc="auto": a map too cheap for workers maps the rest of a pass as .map does ------


class _Calls:
    """A cheap map that counts its calls (it runs in this process: no worker pays for it)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, dp: list[int]) -> list[int] | None:
        self.n += 1
        return None if dp[0] % 3 == 2 else [dp[0]]


def test_auto_cheap_map_maps_the_rest_of_a_pass_without_reading_ahead() -> None:
    # Groups mapped here are mapped ahead of the consumer; the rest of a pass of a map that
    # no worker count can speed up is mapped one datapoint at a time, as .map does.
    import time

    calls, n = _Calls(), 3000
    src = D.DataFromList([[i] for i in range(n)], shuffle=False)
    expected = [i for i in range(n) if i % 3 != 2]
    with src.parallel_map(calls, num_proc="auto", timeout=60) as df:
        df.reset_state()
        deadline = time.monotonic() + 60
        while True:  # a loaded machine may measure a group slow: another pass measures again
            out, lazy_from = [], None
            start = calls.n
            for dp in df:
                out.append(dp[0])
                mapped = calls.n - start  # inputs mapped so far this pass
                lazy = mapped == dp[0] + 1  # exactly up to the one just yielded
                lazy_from = (lazy_from if lazy_from is not None else len(out)) if lazy else None
            assert out == expected
            assert df.worker_pids == []
            if lazy_from is not None and lazy_from <= len(expected) // 2:
                break  # the second half of the pass was mapped as it was consumed
            assert time.monotonic() < deadline, "the pass was never mapped without reading ahead"


def test_auto_cheap_map_resumes_exactly_from_inside_the_unmeasured_rest() -> None:
    check_resume(lambda: _num_auto(drop_odd, 3000), epochs=2, max_cuts=12)


class _FailsAt(D.DataFlow):
    """``[0] .. [n-1]``, raising ``LookupError`` at ``bad`` from the second epoch on."""

    def __init__(self, n: int, bad: int) -> None:
        self.n, self.bad, self.epochs = n, bad, 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Any:
        self.epochs += 1
        for i in range(self.n):
            if self.epochs > 1 and i == self.bad:
                raise LookupError(f"upstream broke at {i}")
            yield [i]


def _fails_in_map_at_2500(dp: list[int]) -> list[int]:
    armed = getattr(_fails_in_map_at_2500, "armed", None)
    if dp[0] == 2500 and armed is not None:
        raise armed(f"map broke at {dp[0]}")
    return dp


@pytest.mark.parametrize("strict", [True, False])
def test_auto_cheap_map_errors_name_the_map_only_when_it_raised(
    strict: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The map's own error is the user's type, noted as raised by map_func in-process (a
    # StopIteration, which would end a generator silently, is a WorkerError as from a
    # worker); the upstream's error goes through untouched (no note blaming the map).
    def build(src: D.DataFlow, func: Any) -> D.DataFlow:
        return D.MultiProcessMapData(src, "auto", func, strict=strict, ordered=True, timeout=60)

    for raised, expected in ((KeyError, KeyError), (StopIteration, D.WorkerError)):
        monkeypatch.setattr(_fails_in_map_at_2500, "armed", None, raising=False)
        with build(D.DataFromList([[i] for i in range(3000)], shuffle=False), _fails_in_map_at_2500) as df:
            df.reset_state()
            assert len(list(df)) == 3000  # measured, then the rest unmeasured
            monkeypatch.setattr(_fails_in_map_at_2500, "armed", raised, raising=False)
            with pytest.raises(expected, match="map broke at 2500") as info:
                for _ in range(3):  # non-strict: the upstream's epochs do not start at pass starts
                    list(df)
            if expected is KeyError:
                notes = getattr(info.value, "__notes__", [])
                assert any("map_func (in-process" in note for note in notes)
    with build(_FailsAt(3000, 2500), inc) as df:
        df.reset_state()
        assert len(list(df)) == 3000
        with pytest.raises(LookupError, match="upstream broke at 2500") as err:
            for _ in range(3):
                list(df)
        assert not getattr(err.value, "__notes__", [])


def test_auto_cheap_non_strict_map_maps_the_rest_of_an_epoch_without_reading_ahead() -> None:
    import time

    calls, n = _Calls(), 3000
    src = D.DataFromList([[i] for i in range(n)], shuffle=False)
    expected = [i for i in range(n) if i % 3 != 2]  # len(ds) results per epoch: wraps around
    with D.MultiProcessMapData(src, "auto", calls, ordered=True, timeout=60) as df:
        df.reset_state()
        deadline = time.monotonic() + 60
        got: list[int] = []
        while True:
            got.extend(dp[0] for dp in df)
            # non-strict epochs carry on where the last stopped: one endless ordered stream
            assert got == [expected[i % len(expected)] for i in range(len(got))]
            assert df.worker_pids == []
            reached = (len(got) - 1) // len(expected) * n + got[-1] + 1  # inputs up to the last
            if calls.n == reached:
                break  # the epoch ended with nothing mapped ahead of the consumer
            assert time.monotonic() < deadline, "the epoch was never mapped without reading ahead"


def test_auto_cheap_non_strict_map_resumes_exactly() -> None:
    def build() -> D.DataFlow:
        src = D.DataFromList([[i] for i in range(3000)], shuffle=False)
        return D.MultiProcessMapData(src, "auto", drop_odd, ordered=True, timeout=60)

    check_resume(build, epochs=3, max_cuts=12)


# -- num_proc="auto", strict=False (the classes' default): measured stretches too ----------


def _non_strict_auto(func: Any, upstream: D.DataFlow) -> D.DataFlow:
    return D.MultiProcessMapData(upstream, "auto", func, ordered=True, timeout=60)


def test_auto_non_strict_measured_map_reads_nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    # A non-strict epoch is len(ds) results of the upstream repeated forever; in-process, each
    # is mapped when the consumer asks for it, over epochs that wrap around the upstream.
    monkeypatch.setattr(AutoWorkers, "probe_seconds", 1e9)
    calls, n = _SpinCalls(), 400
    kept = [i for i in range(n) if i % 3 != 2]
    with _non_strict_auto(calls, D.DataFromList([[i] for i in range(n)], shuffle=False)) as df:
        df.reset_state()
        got: list[int] = []
        for _ in range(3):
            for dp in df:
                got.append(dp[0])
                laps = (len(got) - 1) // len(kept)  # whole upstream passes before this one
                assert calls.n == laps * n + dp[0] + 1  # mapped exactly up to the one yielded
            assert len(got) % n == 0  # len(ds) results per epoch
        assert got == [kept[i % len(kept)] for i in range(len(got))]
        assert df._measures >= 3 and df.worker_pids == []


def test_auto_non_strict_measured_map_resumes_exactly() -> None:
    check_resume(
        lambda: _non_strict_auto(_SpinCalls(), D.DataFromList([[i] for i in range(300)], shuffle=False)),
        epochs=3,
        max_cuts=12,
    )


@pytest.mark.parametrize("bad", [1, 7, 9])
def test_auto_non_strict_in_process_error_is_the_users_own(bad: int) -> None:
    import functools

    upstream = D.DataFromList([[i] for i in range(20)], shuffle=False)
    with _non_strict_auto(functools.partial(fails_at, bad), upstream) as df:
        df.reset_state()
        with pytest.raises(KeyError, match=f"bad {bad}") as info:
            list(df)
    assert any("map_func (in-process" in note for note in getattr(info.value, "__notes__", []))


def test_auto_non_strict_upstream_error_is_not_blamed_on_the_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AutoWorkers, "probe_seconds", 1e9)  # in-process throughout: no read-ahead
    with _non_strict_auto(_SpinCalls(), _FailsAt(300, 200)) as df:
        df.reset_state()
        # len(ds) results: 450 inputs, into the upstream's second epoch (which breaks at 200)
        assert len(list(df)) == 300
        with pytest.raises(LookupError, match="upstream broke at 200") as err:
            list(df)
        assert not getattr(err.value, "__notes__", [])
