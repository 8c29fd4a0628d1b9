"""Throughput of a flow: :class:`TestDataSpeed` and its result :class:`SpeedResult`.

``TestDataSpeed(df, size=5000, warmup=0).start()`` (or ``df.speed_test()``) resets the flow,
draws ``warmup`` untimed datapoints, then times ``size`` datapoints and returns a
:class:`SpeedResult`. The measuring loop does one ``time.perf_counter()`` and one list store
per datapoint; the progress bar is refreshed at most ten times a second, so the helper's
own cost is a fraction of a microsecond per datapoint.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import check_int
from .._progress import UNIT, check_progress, progress_bar
from ..base import DataFlow, ProxyDataFlow, close_iterator
from ._workers import WorkerUsage, worker_usage

__all__ = ["SpeedResult", "TestDataSpeed", "epochs"]

_UI_INTERVAL = 0.1  # seconds between progress-bar refreshes


def format_seconds(seconds: float) -> str:
    """A duration with a readable unit: ``'850 ns'``, ``'12.3 µs'``, ``'4.56 ms'``, ``'1.23 s'``."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


@dataclass(frozen=True)
class SpeedResult:
    """What :meth:`TestDataSpeed.start` measured.

    Attributes:
        count: datapoints timed (the ``size`` asked for).
        seconds: wall time from just before the first timed datapoint was requested to the
            receipt of the last one.
        items_per_sec: ``count / seconds``.
        latency_p50, latency_p90, latency_p99, latency_max: percentiles, in seconds, of the
            time between two consecutive datapoints received (the first one counted from the
            start of the timed part).
        warmup: datapoints drawn, untimed, before timing started.
        epochs: epochs started in total (warmup included); more than 1 when the flow
            ended before ``warmup + size`` datapoints and was iterated again.
        workers: the memory and CPU of each worker process of the flow's stages, measured
            at the end of the test (empty for a flow without workers); ``str()`` adds a line
            per worker after the one-line summary.
    """

    count: int
    seconds: float
    items_per_sec: float
    latency_p50: float
    latency_p90: float
    latency_p99: float
    latency_max: float
    warmup: int = 0
    epochs: int = 1
    workers: tuple[WorkerUsage, ...] = ()

    def __str__(self) -> str:
        extra = [f"{self.warmup} warmup"] if self.warmup else []
        if self.epochs > 1:
            extra.append(f"{self.epochs} epochs")
        tail = f" ({', '.join(extra)})" if extra else ""
        return (
            f"{self.count} {UNIT} in {self.seconds:.3f} s: {self.items_per_sec:,.1f} {UNIT}/s; "
            f"latency p50 {format_seconds(self.latency_p50)}, "
            f"p90 {format_seconds(self.latency_p90)}, p99 {format_seconds(self.latency_p99)}, "
            f"max {format_seconds(self.latency_max)}{tail}"
        ) + "".join(f"\n  {w}" for w in self.workers)


class TestDataSpeed(ProxyDataFlow):
    """Measure how fast ``ds`` produces datapoints (tensorpack's name and arguments).

    :meth:`start` runs the test and returns a :class:`SpeedResult`. Iterating a
    ``TestDataSpeed`` yields the upstream's datapoints unchanged (no test is run then).

    Args:
        ds: the flow to measure.
        size: number of datapoints to time (> 0). When ``ds`` ends earlier, a new epoch is
            started, as many times as needed; an epoch with no datapoint raises ``ValueError``.
        warmup: datapoints to draw, untimed, before timing (>= 0), e.g. to let workers start.
        progress: show a tqdm progress bar on stderr (``TQDM_DISABLE=1`` hides it too).
    """

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self, ds: DataFlow[Any], size: int = 5000, warmup: int = 0, *, progress: bool = True
    ) -> None:
        super().__init__(ds)
        self.test_size = check_int("TestDataSpeed", "size", size, 1)
        self.warmup = check_int("TestDataSpeed", "warmup", warmup, 0)
        self.progress = check_progress("TestDataSpeed", progress)
        self._reset_called = False

    def reset_state(self) -> None:
        self._reset_called = True
        super().reset_state()

    def start(self) -> SpeedResult:
        """Reset ``ds`` (unless this flow was already reset), skip ``warmup`` datapoints and
        time ``size`` more, then measure the flow's worker processes (memory and CPU). The
        iterator is closed before returning, so ``ds`` can be iterated again afterwards."""
        if not self._reset_called:
            self.ds.reset_state()
            self._reset_called = True
        size, clock, begun = self.test_size, time.perf_counter, [0]
        times = [0.0] * (size + 1)
        stream = epochs(self.ds, f"TestDataSpeed: {type(self.ds).__name__}", begun)
        try:
            if self.warmup:
                with progress_bar(
                    "TestDataSpeed", self.progress, total=self.warmup, desc="warmup", leave=False
                ) as bar:
                    for _ in itertools.islice(stream, self.warmup):
                        bar.update()
            with progress_bar("TestDataSpeed", self.progress, total=size, smoothing=0.2, leave=True) as bar:
                shown, next_ui = 0, clock() + _UI_INTERVAL
                times[0] = clock()
                for i, _ in enumerate(itertools.islice(stream, size), 1):
                    times[i] = t = clock()
                    if t >= next_ui:
                        bar.update(i - shown)
                        shown, next_ui = i, t + _UI_INTERVAL
                bar.update(size - shown)
            workers = worker_usage(self.ds)  # before the epoch's close: nothing stops them
        finally:
            stream.close()
        stamps = np.asarray(times, dtype=np.float64)
        latencies = np.diff(stamps)
        seconds = float(stamps[-1] - stamps[0])
        p50, p90, p99 = (float(x) for x in np.percentile(latencies, [50, 90, 99]))
        return SpeedResult(
            count=size,
            seconds=seconds,
            items_per_sec=size / seconds if seconds > 0 else float("inf"),
            latency_p50=p50,
            latency_p90=p90,
            latency_p99=p99,
            latency_max=float(latencies.max()),
            warmup=self.warmup,
            epochs=begun[0],
            workers=workers,
        )


def epochs(flow: DataFlow[Any], what: str, begun: list[int] | None = None) -> Generator[Any, None, None]:
    """The datapoints of ``flow``, epoch after epoch (``begun[0]`` counts the epochs begun);
    ``ValueError`` naming ``what`` (``"stage: flow"``) on an epoch without any. Closing it
    closes the epoch's iterator."""
    while True:
        if begun is not None:
            begun[0] += 1
        n = 0
        it = iter(flow)
        try:
            for dp in it:
                n += 1
                yield dp
        finally:
            close_iterator(it)
        if n == 0:
            raise ValueError(f"{what} produced no datapoint in an epoch; measuring needs a flow with data")
