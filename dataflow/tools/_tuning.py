"""A short search for the best configuration of a pipeline's process maps: :func:`tune`
(``python -m dataflow tune --pipeline module:make_flow``).

For every candidate — ``num_proc="auto", buffer_size="auto"``, then each ``num_proc`` from 1
to the cores this process may use times each ``buffer_size`` of ``(50, 200, 800)`` — the
pipeline is built afresh by ``make_flow()``, its :class:`~dataflow.MultiProcessMapDataZMQ`
stages (found through the ``.ds`` chain from the top) are rebuilt with that configuration,
and ``size`` datapoints are timed after ``warmup`` (worker start-up excluded). The result
lists every candidate's rate, names the best, and holds the per-stage times of the best
configuration (:func:`~dataflow.tools._profiling.profile`, where the slowest stage is the
bottleneck; a process map's time includes its workers').

**A memory budget** (``ram_budget=``, bytes or a string such as ``"4GiB"``): every process
map is rebuilt with it (see ``ram_budget`` of :class:`~dataflow.MultiProcessMapDataZMQ`:
it bounds ``num_proc="auto"``, the shared memory and the buffer), every candidate's peak
memory is measured while it runs (this process's RSS plus its child processes' USS, sampled
every 50 ms by :class:`~dataflow.tools._workers.MemorySampler`), and the best is the fastest
candidate whose measured peak stayed within the budget (the fastest of all, flagged in the
result, if none did). A candidate whose worker count the budget cannot hold is skipped.
The peaks are measured, so the budget holds for the runs measured; a later run with larger
datapoints may need more.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._checks import check_int
from ..base import DataFlow
from ..parallel._budget import parse_bytes
from ._profiling import ProfileResult, profile
from ._speed import epochs
from ._workers import MemorySampler

__all__ = ["TuneResult", "tune"]

BUFFERS = (50, 200, 800)
Config = tuple[Any, Any]  # num_proc, buffer_size


@dataclass
class TuneResult:
    """What :func:`tune` measured: ``rates`` (datapoints/s per configuration, in the order
    tried), ``peaks`` (the peak memory of each, in bytes, in the same order), ``best`` and the
    per-stage ``profile`` of the best; ``ram_budget`` in bytes (``None``: no budget)."""

    stages: int
    rates: list[tuple[Config, float]] = field(default_factory=list)
    profile: ProfileResult | None = None
    peaks: list[int] = field(default_factory=list)
    ram_budget: int | None = None

    def _within(self) -> list[tuple[Config, float]]:
        budget = self.ram_budget
        if budget is None or len(self.peaks) != len(self.rates):
            return self.rates
        return [cr for cr, peak in zip(self.rates, self.peaks) if peak <= budget] or self.rates

    @property
    def best(self) -> Config:
        """The fastest configuration (with a budget: of those whose peak stayed within it)."""
        return max(self._within(), key=lambda cr: cr[1])[0]

    def __str__(self) -> str:
        if not self.stages:
            return "no MultiProcessMapDataZMQ stage found: nothing to tune"
        top = max(rate for _, rate in self.rates)
        peaks = self.peaks if len(self.peaks) == len(self.rates) else [0] * len(self.rates)
        lines = [
            "| num_proc | buffer_size | datapoints/s | vs best | peak memory (MiB) |",
            "|---|---|---|---|---|",
        ]
        for ((p, b), rate), peak in zip(self.rates, peaks):
            lines.append(f"| {p} | {b} | {rate:,.0f} | {rate / top:.2f}x | {peak / 2**20:,.0f} |")
        p, b = self.best
        lines.append(f"\nbest: num_proc={p!r}, buffer_size={b!r} (for {self.stages} process map stage(s))")
        if self.ram_budget is not None:
            over = self._within() is self.rates and any(peak > self.ram_budget for peak in peaks)
            note = "; no configuration stayed within it" if over else ""
            lines.append(f"ram_budget: {self.ram_budget / 2**20:,.0f} MiB{note}")
        if self.profile is not None:
            lines.append(f"\nper-stage times of the best configuration (source first):\n{self.profile}")
        return "\n".join(lines)


def _maps(df: DataFlow[Any]) -> list[tuple[Any, Any]]:
    """``(parent, stage)`` for each exact MultiProcessMapDataZMQ in the ``.ds`` chain (parent
    ``None`` for the top)."""
    from ..parallel._maps import MultiProcessMapDataZMQ

    found: list[tuple[Any, Any]] = []
    parent: Any = None
    node: Any = df
    seen: set[int] = set()
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if type(node) is MultiProcessMapDataZMQ:
            found.append((parent, node))
        parent, node = node, getattr(node, "ds", None)
    return found


def configured(
    make_flow: Callable[[], DataFlow[Any]], num_proc: Any, buffer_size: Any,
    ram_budget: int | str | None = None,
) -> tuple[DataFlow[Any], int]:
    """``make_flow()`` with every process map rebuilt as ``(num_proc, buffer_size)`` (and
    ``ram_budget``, if given); and how many there were."""
    df = make_flow()
    found = _maps(df)
    for parent, stage in found:
        new = type(stage)(
            stage.ds, num_proc, stage.map_func, buffer_size, stage.strict, ordered=stage.ordered,
            item_rng=stage.item_rng, start_method=stage.options.start_method, seed=stage.seed,
            timeout=stage.timeout, shm_bytes=stage.shm_bytes, copy=stage.copy,
            chunk="auto" if stage._chunk_fixed is None else stage._chunk_fixed,
            ram_budget=stage.ram_budget if ram_budget is None else ram_budget,
        )
        if parent is None:
            df = new
        else:
            parent.ds = new
    return df, len(found)


def _rate(df: DataFlow[Any], size: int, warmup: int) -> tuple[float, int]:
    """Datapoints/s after ``warmup``, and the peak memory from the reset to the end."""
    sampler = MemorySampler().start()
    try:
        df.reset_state()
        stream = epochs(df, f"tune: {type(df).__name__}")
        for _ in itertools.islice(stream, warmup):
            pass
        t0 = time.perf_counter()
        for _ in itertools.islice(stream, size):
            pass
        stream.close()
        return size / max(time.perf_counter() - t0, 1e-9), sampler.stop()
    finally:
        sampler.stop()
        df.close()


def tune(
    make_flow: Callable[[], DataFlow[Any]], size: int = 2000, warmup: int = 100,
    trace: str | os.PathLike[str] | None = None, *, ram_budget: int | str | None = None,
) -> TuneResult:
    """Try the configurations listed in :mod:`dataflow.tools._tuning` on ``make_flow()``; see
    :class:`TuneResult`. ``make_flow`` is called once per configuration (and once more for
    the profile): it must build a fresh pipeline each time. ``trace``: write a Chrome trace
    of the best configuration's profile run to this file (see :mod:`dataflow.tools._tracing`).
    ``ram_budget``: the memory the pipeline may hold (see :mod:`dataflow.tools._tuning`); a budget
    too small for even the first candidate (one worker) is the process map's ``ValueError``."""
    size = check_int("tune", "size", size, 1)
    warmup = check_int("tune", "warmup", warmup, 0)
    budget = None if ram_budget is None else parse_bytes("tune", "ram_budget", ram_budget)
    _, stages = configured(make_flow, "auto", "auto", ram_budget)
    result = TuneResult(stages, ram_budget=budget)
    if not stages:
        return result
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    candidates: list[Config] = [("auto", "auto")]
    candidates += [(p, b) for p in range(1, cores + 1) for b in BUFFERS]
    for config in candidates:
        try:
            df, _ = configured(make_flow, *config, ram_budget)
        except ValueError as e:
            if budget is None or config[0] == "auto" or "ram_budget" not in str(e):
                raise
            continue  # this many workers do not fit in the budget
        rate, peak = _rate(df, size, warmup)
        result.rates.append((config, rate))
        result.peaks.append(peak)
    df, _ = configured(make_flow, *result.best, ram_budget)
    try:
        result.profile = profile(df, size=size, warmup=warmup, trace=trace)
    finally:
        df.close()
    return result
