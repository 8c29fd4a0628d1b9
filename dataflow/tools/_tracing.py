"""Chrome traces of a pipeline: :func:`trace` (also ``profile(..., trace=path)``,
``python -m dataflow profile --trace out.json`` and ``python -m dataflow tune --trace
out.json``).

The file is Chrome trace-event JSON: open it in Perfetto (``ui.perfetto.dev``, "Open trace
file") or ``chrome://tracing``. What it shows:

- **one track per stage** of the in-process chain of the flow given (``#0`` is the source),
  in the consumer process: a ``busy`` span per ``next()`` of the stage, and nested in it the
  ``wait`` spans where the stage waited for its upstream (``waiting for #1 ...``) or for its
  workers (``waiting for workers``). What a stage's span does not cover with waits is its own
  time; a stage that is mostly wait is not the bottleneck.
- **one track per worker**: each worker process of a process map (busy spans: the tasks it
  mapped, with their datapoints; ``idle`` spans: no task to map), each thread of a thread map.
- **autotune decisions** (the ``dataflow.autotune`` debug log) as instant events on a track
  of their own.

A process runner's own workers are not traced (they run copies of a whole flow, not tasks);
its stage track shows the consumer waiting for them.

With tracing off (the default) nothing is recorded: the instrumented code checks one module
attribute per task or receive. While a trace records, each span costs about a microsecond
(the per-stage times of ``profile(trace=...)`` are corrected for it, as for the timing
proxies); at most ``max_events`` events are kept.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import _trace
from ..base import DataFlow
from ._chain import Proxy, _detail, _install, _TimedUpstream, chain_of

__all__ = ["TraceSession", "trace"]

PathLike = str | os.PathLike[str]


@dataclass
class TraceSession:
    """What :func:`trace` yields: the :class:`~dataflow._trace.Tracer` recording, and ``flow``,
    the flow to iterate (the ``df`` given, with its top stage timed too; ``None`` without)."""

    tracer: _trace.Tracer
    flow: Any = None


class _Decisions(logging.Handler):
    """Autotune log records as instant events."""

    def __init__(self, tracer: _trace.Tracer) -> None:
        super().__init__(logging.DEBUG)
        self.tracer = tracer
        self.track = tracer.stage_track(self, "autotune decisions", sort=-1)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record must not break the pipeline
            return
        self.tracer.instant(self.track, text.split(" (", 1)[0], time.perf_counter(), {"message": text})


@contextlib.contextmanager
def recording(max_events: int = 1_000_000) -> Iterator[_trace.Tracer]:
    """Make a tracer :data:`dataflow._trace.current` (and the autotune log its instant events)
    while the block runs. One at a time: a second raises ``RuntimeError``."""
    if _trace.current is not None:
        raise RuntimeError("trace: a trace is already recording in this process; one at a time")
    tracer = _trace.Tracer(max_events)
    logger = logging.getLogger("dataflow.autotune")
    handler, level = _Decisions(tracer), logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
    _trace.current = tracer
    try:
        yield tracer
    finally:
        _trace.current = None
        logger.removeHandler(handler)
        logger.setLevel(level)


def stage_proxies(tracer: _trace.Tracer, chain: list[Any]) -> Proxy:
    """The proxy factory for :func:`~._chain._install` that traces each stage of ``chain``
    on its own track (named ``#index Name(func)``, the source ``#0``)."""
    n = len(chain)
    tracks = []
    for k in reversed(range(n)):  # source first: tracks are created, and sorted, in that order
        flow = chain[k]
        detail = _detail(flow)
        label = f"#{n - 1 - k} {type(flow).__name__}" + (f"({detail})" if detail else "")
        tracks.append((tracer.stage_track(flow, label, sort=n - 1 - k), label))
    tracks.reverse()

    def make(ds: Any, k: int) -> _TimedUpstream:
        track, label = tracks[k]
        reader = tracks[k - 1][0] if k > 0 else None
        return _TimedUpstream(ds, tracer, track, reader, label)

    return make


@contextlib.contextmanager
def trace(
    path: PathLike | None, df: DataFlow[Any] | None = None, *, max_events: int = 1_000_000
) -> Iterator[TraceSession]:
    """Record a Chrome trace of what runs inside the block; written to ``path`` (if not
    ``None``) when the block ends, also when it raises. See :mod:`dataflow.tools._tracing`.

    Args:
        path: the JSON file to write.
        df: a flow whose in-process stages get a track each: while the block runs, each
            stage's ``.ds`` is replaced by a tracing proxy (put back at the end, even on
            error). Iterate ``session.flow`` (``df``, with its top stage traced too).
        max_events: events kept at most (later ones are counted, not kept).

    Example::

        with trace("out.json", df) as t:
            df.reset_state()
            for dp in itertools.islice(t.flow, 2000):
                pass
    """
    with recording(max_events) as tracer:
        installed: list[tuple[Any, Any]] = []
        try:
            session = TraceSession(tracer)
            if df is not None:
                chain = chain_of(df)
                _, proxies, installed = _install(chain, stage_proxies(tracer, chain))
                session.flow = proxies[0]
            yield session
        finally:
            for stage, orig in reversed(installed):
                stage.ds = orig
            if path is not None:
                tracer.write(path)
