"""Per-stage time breakdown of an in-process chain: :func:`profile`.

``profile(df)`` walks the chain from ``df`` down through the ``.ds`` attribute of each
stage (every :class:`~dataflow.ProxyDataFlow` has one) and stops at the *source*: a flow
without ``.ds``. A flow with several upstreams (one with a ``df_lists`` attribute, such as
``ConcatData`` or ``JoinData``) is treated as a source too: its time includes its upstreams'.

Method: each stage's ``.ds`` is temporarily replaced by a timing proxy that accumulates the
wall time spent inside the upstream's ``next()``. A stage's *own* time is the time spent in
its ``next()`` minus the time spent in its upstream's, minus the (calibrated) cost of the
proxy itself. The original ``.ds`` objects are put back when profiling ends, even on error.

Limits: only stages that pull from ``self.ds`` in the iterating thread are separated. A
stage whose ``.ds`` cannot be replaced (a read-only property), or that reads its upstream
some other way (another process, an iterator captured elsewhere), is reported with its
upstream's time included (``includes_upstream``); the stages below it then show no items.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from .. import _trace
from .._checks import check_int
from .._progress import UNIT, progress_bar
from ..base import DataFlow
from ._chain import (
    Proxy,
    _detail,
    _install,
    _proxy_cost,
    _TimedUpstream,
    _upstream_of,
    chain_of,
    timed,
)
from ._speed import epochs, format_seconds
from ._tracing import recording, stage_proxies
from ._workers import WorkerUsage, worker_usage

__all__ = ["ProfileResult", "StageTiming", "profile"]


@dataclass(frozen=True)
class StageTiming:
    """The cost of one stage.

    Attributes:
        index: position in the chain, 0 for the source.
        name: the stage's class name.
        detail: the function it applies (``MapData``, ``FilterData``, ...), else ``""``.
        own_seconds: time spent in this stage itself, upstream excluded.
        items: datapoints it produced while timed.
        us_per_item: ``own_seconds`` in microseconds per produced datapoint (``nan`` if none).
        share: ``own_seconds`` as a percentage of the whole chain's.
        includes_upstream: its upstream could not be timed separately, so ``own_seconds``
            contains it (multi-upstream flows, read-only ``.ds``, out-of-thread upstreams).
        flow: the stage object itself.
    """

    index: int
    name: str
    detail: str
    own_seconds: float
    items: int
    us_per_item: float
    share: float
    includes_upstream: bool = False
    flow: Any = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        """``Name(detail)`` or ``Name``."""
        return f"{self.name}({self.detail})" if self.detail else self.name


@dataclass(frozen=True)
class ProfileResult:
    """Per-stage timings, from the source (``stages[0]``) to the top (``stages[-1]``).

    Attributes:
        stages: one :class:`StageTiming` per stage.
        count: datapoints of the top stage timed.
        seconds: wall time to produce them, profiling overhead included.
        warmup: top-stage datapoints drawn, untimed, before.
        workers: the memory (RSS, USS) and CPU of each worker process of the chain's stages,
            measured at the end of the run; a line each in ``str()``, after the table.
    """

    stages: tuple[StageTiming, ...]
    count: int
    seconds: float
    warmup: int = 0
    workers: tuple[WorkerUsage, ...] = ()

    @property
    def slowest(self) -> StageTiming:
        """The stage with the largest own time."""
        return max(self.stages, key=lambda s: s.own_seconds)

    def __str__(self) -> str:
        width = max(len("stage"), *(len(s.label) + 1 for s in self.stages)) + 4
        lines = [f"{'#':>2}  {'stage':<{width}}{'items':>10}{'own time':>12}{'µs/item':>11}{'share':>8}"]
        for s in self.stages:
            mark = "*" if s.includes_upstream else ""
            lines.append(
                f"{s.index:>2}  {s.label + mark:<{width}}{s.items:>10}"
                f"{format_seconds(s.own_seconds):>12}{s.us_per_item:>11.2f}{s.share:>7.1f}%"
            )
        slow = self.slowest
        lines.append(
            f"slowest: #{slow.index} {slow.label} ({slow.share:.1f}% of the time); "
            f"{self.count} {UNIT} in {self.seconds:.3f} s with profiling on"
        )
        if any(s.includes_upstream for s in self.stages):
            lines.append("* includes the time of its upstream(s), which could not be timed separately")
        lines.extend(str(w) for w in self.workers)
        return "\n".join(lines)


def profile(
    df: DataFlow[Any],
    size: int = 2000,
    warmup: int = 100,
    progress: bool = False,
    *,
    reset: bool = True,
    trace: str | os.PathLike[str] | None = None,
) -> ProfileResult:
    """Time each stage of the in-process chain ending at ``df``; see :mod:`dataflow.tools._profiling`.

    Args:
        df: the top of the chain.
        size: datapoints of ``df`` to time (> 0); ``df`` is iterated again if it ends earlier.
        warmup: datapoints of ``df`` drawn, untimed, first (>= 0).
        progress: show a tqdm progress bar on stderr (``TQDM_DISABLE=1`` hides it too).
        reset: call ``df.reset_state()`` first (once). Pass ``False`` if it was already reset.
        trace: also write a Chrome trace of the whole run (reset and warmup included) to this
            file: one track per stage and per worker, busy and waiting spans (see
            :mod:`dataflow.tools._tracing`).

    Returns:
        a :class:`ProfileResult`; ``str()`` of it is a table that names the slowest stage.
    """
    size = check_int("profile", "size", size, 1)
    warmup = check_int("profile", "warmup", warmup, 0)
    chain = chain_of(df)
    if trace is None:
        return _profile(df, chain, size, warmup, progress, reset, timed, _proxy_cost())
    def probe(ds: Any, k: int) -> _TimedUpstream:  # a traced proxy whose events are dropped
        return _TimedUpstream(ds, _trace.Tracer(max_events=0), (0, 0), (0, 0), "probe")

    cost = _proxy_cost(make=probe)
    with recording() as tracer:
        try:
            return _profile(df, chain, size, warmup, progress, reset, stage_proxies(tracer, chain), cost)
        finally:
            tracer.write(trace)


def _profile(
    df: DataFlow[Any], chain: list[Any], size: int, warmup: int, progress: bool, reset: bool, make: Proxy,
    cost: float,
) -> ProfileResult:
    chain, proxies, installed = _install(chain, make)
    stream: Generator[Any, None, None] | None = None
    try:
        if reset:
            df.reset_state()
        stream = epochs(proxies[0], f"profile: {type(df).__name__}")
        for _ in itertools.islice(stream, warmup):
            pass
        for p in proxies:
            p.zero()
        with progress_bar("profile", progress, total=size) as bar:
            step, done = max(1, size // 100), 0
            t = time.perf_counter()
            while done < size:
                chunk = min(step, size - done)
                for _ in itertools.islice(stream, chunk):
                    pass
                done += chunk
                bar.update(chunk)
            seconds = time.perf_counter() - t
        workers = worker_usage(df)
    finally:
        if stream is not None:
            stream.close()
        for stage, orig in reversed(installed):
            stage.ds = orig
    # a stage's own time: its proxy's, less the proxy below it and that proxy's own cost
    own: list[float] = []
    opaque: list[bool] = []
    for k, p in enumerate(proxies):
        below = proxies[k + 1] if k + 1 < len(proxies) else None
        if below is None:
            own.append(p.seconds)
            opaque.append(_upstream_of(chain[k]) is not None or hasattr(chain[k], "df_lists"))
        else:
            own.append(max(p.seconds - below.seconds - cost * below.calls, 0.0))
            opaque.append(below.calls == 0 and p.items > 0)
    total = sum(own) or 1.0
    n = len(chain)
    stages = tuple(
        StageTiming(
            index=n - 1 - k,
            name=type(chain[k]).__name__,
            detail=_detail(chain[k]),
            own_seconds=own[k],
            items=proxies[k].items,
            us_per_item=own[k] * 1e6 / proxies[k].items if proxies[k].items else float("nan"),
            share=100.0 * own[k] / total,
            includes_upstream=opaque[k],
            flow=chain[k],
        )
        for k in reversed(range(n))
    )
    return ProfileResult(stages=stages, count=size, seconds=seconds, warmup=warmup, workers=workers)
