"""The in-process chain of a flow and the timing proxies put under its stages (shared by
:func:`~dataflow.tools._profiling.profile` and :func:`~dataflow.tools._tracing.trace`)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from .. import _trace
from ..base import DataFlow, ProxyDataFlow


def chain_of(df: DataFlow[Any]) -> list[Any]:
    """``df`` and its single upstreams down to the source (see :func:`_upstream_of`)."""
    chain: list[Any] = [df]
    while (up := _upstream_of(chain[-1])) is not None and all(up is not c for c in chain):
        chain.append(up)
    return chain


class _TimedUpstream(ProxyDataFlow):
    """Wraps an upstream; accumulates the wall time spent inside its ``iter()``/``next()``.
    With a ``tracer``, also records each ``next()`` as a ``busy`` span on the upstream's
    ``track``, and as a ``wait`` span on the track of the stage reading it (``reader``;
    ``None`` for the top, read by the user's loop)."""

    def __init__(
        self,
        ds: DataFlow[Any],
        tracer: _trace.Tracer | None = None,
        track: tuple[int, int] = (0, 0),
        reader: tuple[int, int] | None = None,
        label: str = "",
    ) -> None:
        super().__init__(ds)
        self.tracer, self.track, self.reader, self.label = tracer, track, reader, label
        self.zero()

    def zero(self) -> None:
        self.seconds = 0.0
        self.items = 0
        self.calls = 0  # next() calls, the final StopIteration of each epoch included

    def __getattr__(self, name: str) -> Any:  # stages may read attributes of their upstream
        if name == "ds":
            raise AttributeError(name)
        return getattr(self.ds, name)

    def __iter__(self) -> Iterator[Any]:
        clock, tr = time.perf_counter, self.tracer
        track, reader, label = self.track, self.reader, self.label
        wait = f"waiting for {label}"
        t0 = clock()
        for dp in self.ds:
            t1 = clock()
            self.seconds += t1 - t0
            self.items += 1
            self.calls += 1
            if tr is not None:
                tr.span(track, label, t0, t1)
                if reader is not None:
                    tr.span(reader, wait, t0, t1, "wait")
            yield dp
            t0 = clock()
        t1 = clock()
        self.seconds += t1 - t0
        self.calls += 1
        if tr is not None:
            tr.span(track, f"{label}: end of epoch", t0, t1)


Proxy = Callable[[Any, int], "_TimedUpstream"]  # (the flow to time, its position in the chain)


def timed(ds: Any, k: int) -> _TimedUpstream:
    return _TimedUpstream(ds)


def _proxy_cost(n: int = 20000, rounds: int = 5, make: Proxy = timed) -> float:
    """Seconds per ``next()`` that the timing proxy adds outside its own window (a lower
    bound: the minimum over a few rounds over a free iterator)."""

    class _Free(DataFlow[Any]):
        def __iter__(self) -> Iterator[Any]:
            return itertools.repeat(None, n)

    best = float("inf")
    for _ in range(rounds):
        proxy = make(_Free(), 0)
        t = time.perf_counter()
        for _ in proxy:
            pass
        proxied = time.perf_counter() - t
        t = time.perf_counter()
        for _ in _Free():
            pass
        plain = time.perf_counter() - t
        best = min(best, (proxied - plain - proxy.seconds) / (n + 1))
    return max(best, 0.0)


def _upstream_of(flow: object) -> Any:
    """The single upstream of ``flow`` to descend into, or ``None`` for a source."""
    if hasattr(flow, "df_lists"):
        return None
    try:
        up = flow.ds  # type: ignore[attr-defined]
    except Exception:  # no .ds, or a property that fails
        return None
    return up if hasattr(up, "__iter__") and hasattr(up, "reset_state") else None


def _detail(flow: object) -> str:
    func = getattr(flow, "func", None) or getattr(flow, "predicate", None)
    if func is None or not callable(func):
        return ""
    return str(getattr(func, "__name__", None) or type(func).__name__)


def _install(
    chain: list[Any], make: Proxy = timed
) -> tuple[list[Any], list[_TimedUpstream], list[tuple[Any, Any]]]:
    """Put a timing proxy (``make(flow, k)``) under each stage; returns the chain actually
    separated, the proxies (``proxies[k]`` times ``chain[k]``) and what to restore."""
    proxies = [make(chain[0], 0)]
    installed: list[tuple[Any, Any]] = []
    for k in range(len(chain) - 1):
        stage, orig = chain[k], chain[k + 1]
        proxy = make(orig, k + 1)
        try:
            stage.ds = proxy
            ok = stage.ds is proxy
        except Exception:  # read-only property, __slots__, validating setter...
            ok = False
        if not ok:
            try:
                stage.ds = orig
            except Exception:
                pass
            return chain[: k + 1], proxies, installed
        installed.append((stage, orig))
        proxies.append(proxy)
    return chain, proxies, installed
