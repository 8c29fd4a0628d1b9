"""``ram_budget=``: budgets parsed or refused by name, worker counts, shared memory and
buffers that shrink with the budget, a measured peak within a generous budget, and the
per-worker memory and CPU in the profiler's, the speed test's and the tuner's reports."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import dataflow as D
from dataflow.parallel._budget import MIN_RING_BYTES, WORKER_GUESS_BYTES, RamBudget, parse_bytes
from dataflow.parallel._maps import available_cores
from dataflow.tools import MemorySampler, WorkerUsage, profile, tune
from dataflow.tools._speed import TestDataSpeed

pytestmark = pytest.mark.timeout(240)

MiB = 2**20


def big(i: int) -> np.ndarray:
    """A 1 MiB datapoint."""
    return np.full(MiB // 8, float(i))


def inc(dp: list[int]) -> list[int]:
    return [dp[0] + 1]


@pytest.mark.parametrize(
    ("value", "nbytes"),
    [(1, 1), (4096, 4096), ("4GiB", 4 * 2**30), ("512MB", 512 * 10**6), ("1.5 GiB", 3 * 2**29),
     ("100", 100), ("2kib", 2048), ("3 TB", 3 * 10**12)],
)
def test_budgets_are_bytes_or_sizes(value: int | str, nbytes: int) -> None:
    assert parse_bytes("S", "ram_budget", value) == nbytes


@pytest.mark.parametrize("value", ["4 GiBs", "lots", "", "-1GiB", "GiB", 0, -5])
def test_bad_budgets_name_the_stage_and_the_value(value: object) -> None:
    with pytest.raises(ValueError, match=r"MultiProcessMapDataZMQ: ram_budget") as info:
        D.MultiProcessMapDataZMQ(D.DataFromList([1]), "auto", inc, ram_budget=value)  # type: ignore[arg-type]
    assert repr(value) in str(info.value)


def test_a_budget_of_another_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"MultiProcessMapDataZMQ: ram_budget .* float \(1\.5\)"):
        D.MultiProcessMapDataZMQ(D.DataFromList([1]), 2, inc, ram_budget=1.5)  # type: ignore[arg-type]


def test_a_budget_below_the_documented_minimum_is_refused_with_the_numbers() -> None:
    consumer = RamBudget.consumer_bytes()
    too_small = r"ram_budget='1MiB' .* too small: this process already holds"
    with pytest.raises(ValueError, match=too_small) as info:
        D.MultiProcessMapDataZMQ(D.DataFromList([1]), "auto", inc, ram_budget="1MiB")
    least = (consumer + WORKER_GUESS_BYTES + MIN_RING_BYTES) / MiB
    assert "give at least" in str(info.value) and abs(float(str(info.value).split()[-2]) - least) < 64
    with pytest.raises(ValueError, match=r"too small for num_proc=64"):
        D.MultiProcessMapDataZMQ(D.DataFromList([1]), 64, inc, ram_budget=consumer + 3 * WORKER_GUESS_BYTES)


def test_workers_and_shared_memory_shrink_as_the_budget_shrinks() -> None:
    consumer = 100 * MiB
    budgets = [RamBudget("S", consumer + k * 16 * MiB) for k in range(64, 1, -4)]
    workers = [b.workers(8, consumer) for b in budgets]
    rings = [b.ring(w, consumer, 256 * MiB) for b, w in zip(budgets, workers)]
    for seq in (workers, rings):
        assert all(a >= b for a, b in zip(seq, seq[1:])), seq
    assert workers[0] == 8 and workers[-1] == 1
    assert rings[0] == 256 * MiB and MIN_RING_BYTES <= rings[-1] <= 64 * MiB
    for b, w, r in zip(budgets, workers, rings):  # the model's total stays within the budget
        assert consumer + w * b.worker_bytes + b.results(w, consumer, r, 0) <= b.total
    for w in (1, 2):  # at a given worker count, the results in flight shrink with the budget
        results = [b.results(w, consumer, b.ring(w, consumer, 256 * MiB), 4 * MiB) for b in budgets]
        assert all(a >= b for a, b in zip(results, results[1:])) and results[-1] < results[0], results


def test_num_proc_auto_follows_the_budget() -> None:
    consumer = RamBudget.consumer_bytes()
    roomy = D.MultiProcessMapDataZMQ(D.DataFromList([1]), "auto", inc, ram_budget=consumer + 2**34)
    tight = D.MultiProcessMapDataZMQ(
        D.DataFromList([1]), "auto", inc, ram_budget=consumer + WORKER_GUESS_BYTES + MIN_RING_BYTES + MiB
    )
    assert tight._workers == 1 and roomy._workers == available_cores()


def _run_big(budget: int | None, n: int = 120) -> tuple[int, int, int]:
    """Run 1 MiB datapoints through 2 workers: (buffer_size at the end, shared memory, peak)."""
    df = D.MultiProcessMapDataZMQ(
        D.DataFromList(list(range(n)), shuffle=False), 2, big, buffer_size=200, strict=True,
        ordered=True, timeout=60, ram_budget=budget,
    )
    with MemorySampler(0.005) as sampler, df:
        df.reset_state()
        got = [float(dp[0]) for dp in df]
        buffer, ring = df.buffer_size, df._ring_bytes
    assert got == [float(i) for i in range(n)]
    return buffer, ring, sampler.peak


def test_buffers_and_shared_memory_shrink_with_the_budget_and_the_data_is_intact() -> None:
    consumer = RamBudget.consumer_bytes()
    free, _, _ = _run_big(None)
    wide = _run_big(consumer + 2 * WORKER_GUESS_BYTES + 96 * MiB)
    narrow = _run_big(consumer + 2 * WORKER_GUESS_BYTES + 24 * MiB)
    assert free == 200  # no budget: the buffer asked for
    assert narrow[0] <= wide[0] < 200 and narrow[1] < wide[1]
    assert narrow[0] >= 4  # the floor: two tasks per worker


_PEAK_IN_A_FRESH_PROCESS = """
from dataflow.parallel._budget import WORKER_GUESS_BYTES, RamBudget
from tests.tools.test_ram_budget import MiB, _run_big
budget = RamBudget.consumer_bytes() + 2 * WORKER_GUESS_BYTES + 64 * MiB
print(_run_big(budget, n=200)[2], budget)
"""


def test_measured_peak_stays_within_a_generous_budget() -> None:
    """In a fresh interpreter: inside this test session the consumer is pytest with every
    framework loaded (~1.8 GB), whose own RSS and its forked workers' copied pages move by
    more than the 64 MiB of room this budget leaves, whatever the map does."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_IN_A_FRESH_PROCESS], capture_output=True, text=True, env=env,
        cwd=root, timeout=200,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    peak, budget = map(int, done.stdout.split()[-2:])
    assert 0 < peak <= budget


def _workers_flow() -> D.DataFlow:
    return D.DataFromList([[i] for i in range(400)], shuffle=False).parallel_map(
        inc, num_proc=2, timeout=60, ram_budget="64GiB"
    )


def test_speed_test_and_profile_report_each_workers_memory_and_cpu() -> None:
    df = _workers_flow()
    with df:
        result = TestDataSpeed(df, size=200, warmup=10, progress=False).start()
        prof = profile(df, size=100, warmup=0, reset=False)
    for workers, text in ((result.workers, str(result)), (prof.workers, str(prof))):
        assert [w.index for w in workers] == [0, 1]
        assert all(isinstance(w, WorkerUsage) and 0 < w.uss <= w.rss and w.cpu_seconds >= 0 for w in workers)
        assert text.count("MultiProcessMapDataZMQ (pid") == 2 and "USS" in text and "% of a core" in text
    assert str(result).splitlines()[0].startswith("200 dp in")  # the summary line is unchanged


def test_tune_keeps_the_best_within_the_budget_and_reports_peaks() -> None:
    budget = RamBudget.consumer_bytes() + 2**30
    result = tune(_workers_flow, size=50, warmup=5, ram_budget=budget)
    assert len(result.peaks) == len(result.rates) > 0 and result.ram_budget == budget
    assert all(peak > 0 for peak in result.peaks)
    best = dict(result.rates)
    assert result.best in best
    assert result.peaks[[c for c, _ in result.rates].index(result.best)] <= budget
    assert "peak memory (MiB)" in str(result) and "ram_budget:" in str(result)
    with pytest.raises(ValueError, match=r"tune: ram_budget"):
        tune(_workers_flow, ram_budget="much")


def test_the_buffer_is_cut_only_while_the_measured_total_grows_over_the_budget() -> None:
    ram = RamBudget("S", "100MiB")
    assert not ram.over(90 * MiB)
    assert ram.over(120 * MiB)  # over: cut
    assert not ram.over(120 * MiB) and not ram.over(110 * MiB)  # stopped growing: no second cut
    assert ram.over(130 * MiB)  # grew again: cut again


def test_map_and_batch_takes_a_budget_too() -> None:
    df = D.MultiProcessMapAndBatchDataZMQ(
        D.DataFromList([[i] for i in range(40)], shuffle=False), "auto", inc, 8, strict=True,
        timeout=60, ram_budget=RamBudget.consumer_bytes() + 2**30,
    )
    with df:
        df.reset_state()
        got = sorted(int(v) for b in df for v in b[0])
    assert got == list(range(1, 41))
    assert df.ram_budget is not None and df.buffer_size >= 2 * df._workers * 8  # the floor: two batches
