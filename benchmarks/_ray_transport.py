"""The ``batch`` and ``large`` scenarios of ``ray_scale.py``: runner transport on Ray.

``batch`` is ``mp_batch``'s work: 2 workers, each an endless source of ``[int, float32[10]]``
batched by 64 inside the worker; items/s (= batches/s x 64) received by a consumer that
only counts. Contenders:

- ``dataflow processes``: ``MultiProcessRunnerZMQ(source.batch(64), num_proc=2)``;
- ``dataflow on Ray``: ``RayRunner(source.batch(64), 2, chunk=c)`` (copies), for each ``c`` of
  ``--batch-chunk`` (batches per pull; default 1024, the runner's default, and 64);
- ``Ray Data map_batches``: ``ray.data.range(N).map_batches(f, batch_size=64)`` on a pool of
  2 tasks (``TaskPoolStrategy``), where ``f`` builds each batch the same way (64
  ``[i, array]`` items from the same source code, stacked), iterated with
  ``iter_batches(batch_size=64)``.

``large`` is ``mp_large``'s work: 2 workers each yield preallocated ``(64, 224, 224, 3)``
uint8 arrays (9.6 MB) forever; the consumer reads one byte of each and drops it. GB/s
beside single-thread memcpy measured in the same run. Contenders: memcpy; ``dataflow
processes`` (shared-memory rings; each worker yields the same array); ``dataflow on Ray``
(``RayRunner`` with its defaults: workers on this node write into shared-memory rings,
``chunk_bytes`` decides how many arrays a pull carries) and with ``copy=True`` (one more
memcpy per array, in the consumer); ``dataflow on Ray, map`` (``RayMapData`` with its
defaults over counters, whose ``map_func`` returns an array). The Ray workers cycle through
:data:`DISTINCT` arrays and yield a new view of one each time: a pull or call carrying
several datapoints pickles a repeated object once, which would send one array for many.

Every run starts its pipeline, receives untimed for ``--warmup`` s, times ``--seconds`` s and
stops it. Ray itself (raylet, object store) keeps running between runs: its start is not
timed. Others' CPU is what processes outside this one and its descendants (Ray's included)
used during the timed windows.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from benchmarks._harness import Result, TimedContender, drain_for, note
from benchmarks.mp_large import NBYTES, Contender, _cpu_snapshot, make_array, memcpy, pipeline
from benchmarks.mp_large import ours as ours_large
from benchmarks.mp_small import NUM_PROC, small_items

BATCH = 64
OURS = "dataflow processes"
RAY = "dataflow on Ray"


# -- batch -----------------------------------------------------------------------------------

#: CPU microseconds per item of each contender's timed windows (this process and all its
#: descendants: workers, and Ray's raylet, object store and actors): robust to other load
CPU_US: dict[str, list[float]] = {}


def _timed(name: str, it: Iterator[Any], warmup: float, seconds: float) -> tuple[int, float]:
    drain_for(it, warmup, BATCH, 1)
    cpu0 = _cpu_snapshot()[1]
    n, elapsed = drain_for(it, seconds, BATCH, 1)
    CPU_US.setdefault(name, []).append((_cpu_snapshot()[1] - cpu0) / n * 1e6)
    return n, elapsed


def _source() -> Any:
    from dataflow import DataFlow

    class Source(DataFlow):
        def __iter__(self) -> Iterator[list]:
            return small_items()

    return Source()


def ours_batch(warmup: float, seconds: float) -> TimedContender:
    from dataflow import MultiProcessRunnerZMQ

    def run() -> tuple[int, float]:
        df = MultiProcessRunnerZMQ(_source().batch(BATCH), num_proc=NUM_PROC)
        df.reset_state()
        it = iter(df)
        try:
            return _timed(OURS, it, warmup, seconds)
        finally:
            it.close()
            df.close()

    return TimedContender(OURS, run)


def ray_batch(warmup: float, seconds: float, chunk: int, name: str) -> TimedContender:
    from dataflow.on_ray import RayRunner

    def run() -> tuple[int, float]:
        df = RayRunner(_source().batch(BATCH), NUM_PROC, chunk=chunk)
        df.reset_state()
        it = iter(df)
        try:
            return _timed(name, it, warmup, seconds)
        finally:
            it.close()
            df.close()

    return TimedContender(name, run)


_ITEMS: Iterator[list] | None = None  # per Ray Data worker process


def _make_batch(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Ray Data's batch function: each row id becomes ``[i, array]`` from the same source
    code as the other contenders, and 64 of them are stacked as ``BatchData`` does."""
    global _ITEMS
    if _ITEMS is None:
        _ITEMS = small_items()
    dps = [next(_ITEMS) for _ in batch["id"]]
    return {"i": np.array([dp[0] for dp in dps]), "x": np.stack([dp[1] for dp in dps])}


def ray_data_batch(warmup: float, seconds: float) -> TimedContender:
    import ray

    def run() -> tuple[int, float]:
        # a pool of tasks, not actors: with 2 CPUs, 2 actors would leave none to the reads
        ds = ray.data.range(1 << 26).map_batches(
            _make_batch, batch_size=BATCH, compute=ray.data.TaskPoolStrategy(size=NUM_PROC)
        )
        it = iter(ds.iter_batches(batch_size=BATCH))
        try:
            return _timed("Ray Data map_batches", it, warmup, seconds)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
            del it, ds

    return TimedContender("Ray Data map_batches", run)


def batch_contenders(
    warmup: float, seconds: float, chunks: list[int], ray_data: bool
) -> list[TimedContender]:
    made = [ours_batch(warmup, seconds)] + [
        ray_batch(warmup, seconds, c, RAY if i == 0 else f"{RAY}, chunk {c}") for i, c in enumerate(chunks)
    ]
    return made + ([ray_data_batch(warmup, seconds)] if ray_data else [])


# -- large -----------------------------------------------------------------------------------

#: distinct arrays each Ray worker cycles through (see the module docstring)
DISTINCT = 4
_ARRAYS: list[np.ndarray] = []


def _distinct_arrays() -> list[np.ndarray]:
    if not _ARRAYS:
        first = make_array()
        _ARRAYS.extend([first] + [first.copy() for _ in range(DISTINCT - 1)])
    return _ARRAYS


def _large_array(dp: list) -> list:
    """The map of the ``RayMapData`` contender: a view of one of the worker's arrays."""
    return [_distinct_arrays()[dp[0] % DISTINCT].view()]


def _distinct_items() -> Iterator[list]:
    """The ``RayRunner`` contenders' source: the worker's preallocated arrays in turn."""
    arrays = _distinct_arrays()
    i = 0
    while True:
        yield [arrays[i % DISTINCT].view()]
        i += 1


def _counters() -> Iterator[list]:
    i = 0
    while True:
        yield [i]
        i += 1


def ray_large(name: str, a: tuple, **kwargs: Any) -> Contender:
    from dataflow import DataFlow
    from dataflow.on_ray import RayRunner

    class Source(DataFlow):
        def __iter__(self) -> Iterator[list]:
            return _distinct_items()

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        df = RayRunner(Source(), NUM_PROC, **kwargs)
        df.reset_state()
        it = iter(df)
        return it, lambda: (it.close(), df.close())

    return pipeline(name, open_, *a)


def ray_map_large(name: str, a: tuple) -> Contender:
    from dataflow import DataFromGenerator
    from dataflow.on_ray import RayMapData

    def open_() -> tuple[Iterator[Any], Callable[[], None]]:
        df = RayMapData(DataFromGenerator(_counters), NUM_PROC, _large_array)
        df.reset_state()
        it = iter(df)
        return it, lambda: (it.close(), df.close())

    return pipeline(name, open_, *a)


def large_contenders(warmup: float, seconds: float, chunk_mb: list[int] | None = None) -> list[Contender]:
    """memcpy first, our processes second (the tables' references); ``chunk_mb``: more
    ``RayRunner`` contenders, with ``chunk_bytes`` of these many MiB."""
    a = (warmup, seconds, make_array())
    return [
        memcpy(*a),
        ours_large(OURS, *a),
        ray_large(RAY, a),
        *[ray_large(f"{RAY}, chunk_bytes {mb} MiB", a, chunk_bytes=mb << 20) for mb in chunk_mb or []],
        ray_large(f"{RAY} copy=True", a, copy=True),
        ray_map_large(f"{RAY}, map", a),
    ]


def run_large(contenders: list[Contender], rounds: int) -> None:
    """Interleaved rounds (no waiting for a quiet machine: Ray's own processes stay up)."""
    for r in range(rounds):
        for c in contenders:
            w = c.run()
            c.gbps.append(w.items * NBYTES / w.seconds / 1e9)
            if w.foreign is not None:
                c.foreign.append(w.foreign)
        note(f"round {r + 1}/{rounds} done")


def large_table(contenders: list[Contender]) -> str:
    ref = statistics.median(contenders[0].gbps)
    ours = statistics.median(contenders[1].gbps)
    rows = [
        f"| contender | median GB/s | min–max GB/s | median items/s | vs memcpy | vs {OURS} "
        "| others' CPU (cores) |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in contenders:
        med = statistics.median(c.gbps)
        foreign = f"{statistics.median(c.foreign):.2f}" if c.foreign else "n/a"
        rows.append(
            f"| {c.name} | {med:.2f} | {min(c.gbps):.2f}–{max(c.gbps):.2f} | {med * 1e9 / NBYTES:,.0f} "
            f"| {med / ref:.2f}x | {med / ours:.2f}x | {foreign} |"
        )
    return "\n".join(rows)


def run_timed(contenders: list[TimedContender], rounds: int) -> list[Result]:
    results = [Result(c.name) for c in contenders]
    for r in range(rounds):
        for c, res in zip(contenders, results):
            t0 = time.perf_counter()
            n, seconds = c.run()
            res.rates.append(n / seconds)
            note(f"{c.name}: {n / seconds:,.0f} items/s ({time.perf_counter() - t0:.1f} s with set-up)")
        note(f"round {r + 1}/{rounds} done")
    return results


__all__ = ["batch_contenders", "large_contenders", "large_table", "run_large", "run_timed"]
