"""The recorder behind Chrome traces (:func:`dataflow.tools._profiling.trace`): spans on tracks,
written as Chrome trace-event JSON (opens in Perfetto, ``ui.perfetto.dev``, or
``chrome://tracing``).

Instrumented code (the parallel maps and runners, the profiler's stage proxies) asks for
:data:`current` and records only when it is not ``None``, so with tracing off the cost is one
module attribute read per task or per receive, nothing per datapoint. Times are
``time.perf_counter()`` seconds: on Linux (``CLOCK_MONOTONIC``), macOS and Windows that clock
is the same in every process of the machine, so spans that workers measured line up with the
consumer's.

Tracks: each stage of the consumer's pipeline is a thread of the consumer process (track
"#2 MapData(decode)"), each worker process is a process of its own ("MultiProcessMapDataZMQ
worker 0"), each worker thread a thread of the consumer process. A span has a category:
``busy`` (working: a stage's ``next()``, a worker mapping a task), ``wait`` (waiting for an
upstream or for the workers; drawn nested inside the busy span of the stage that waits, so
what a stage's span does not cover with a wait is its own time) or ``idle`` (a worker with
no task). Autotune decisions are instant events on a track of their own.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

__all__ = ["Tracer", "current"]

#: the tracer recording now, or ``None`` (tracing off): read it, never cache it
current: Tracer | None = None


class Tracer:
    """Collects trace events; see the module docstring. Thread-safe (worker threads of a
    thread map record too). At most ``max_events`` events are kept; later ones are counted
    in ``dropped``."""

    def __init__(self, max_events: int = 1_000_000) -> None:
        self.origin = time.perf_counter()
        self.max_events = max_events
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self.pid = os.getpid()
        self._meta: list[dict[str, Any]] = [_meta("process_name", self.pid, 0, f"consumer (pid {self.pid})")]
        self._meta.append(_meta("process_sort_index", self.pid, 0, -1))
        self._tracks: dict[Any, tuple[int, int]] = {}
        self._last_end: dict[tuple[int, int], float] = {}
        self._lock = threading.Lock()
        self._next_tid = 1

    # -- tracks ---------------------------------------------------------------------------
    def stage_track(self, stage: object, name: str | None = None, sort: int | None = None) -> tuple[int, int]:
        """The track of a pipeline stage (registered with ``name`` on first use)."""
        return self._thread_track(("stage", id(stage)), name or type(stage).__name__, sort)

    def thread_track(self, stage: object, index: int) -> tuple[int, int]:
        """The track of worker thread ``index`` of ``stage``."""
        name = f"{type(stage).__name__} thread {index}"
        return self._thread_track(("thread", id(stage), index), name, 10_000 + index)

    def worker_track(self, stage: object, index: int, pid: int | None) -> tuple[int, int]:
        """The track of worker process ``index`` of ``stage`` (its OS ``pid``)."""
        key = ("worker", id(stage), index, pid)
        track = self._tracks.get(key)
        if track is None:
            with self._lock:
                wpid = pid if pid is not None else -(len(self._tracks) + 1)
                track = self._tracks[key] = (wpid, wpid)
                name = f"{type(stage).__name__} worker {index} (pid {pid})"
                self._meta.append(_meta("process_name", wpid, 0, name))
                self._meta.append(_meta("process_sort_index", wpid, 0, index))
                self._meta.append(_meta("thread_name", wpid, wpid, "map tasks"))
        return track

    def _thread_track(self, key: Any, name: str, sort: int | None) -> tuple[int, int]:
        """The consumer-thread track ``key``, made on first use (once, whatever the threads)."""
        track = self._tracks.get(key)
        if track is not None:
            return track
        with self._lock:
            track = self._tracks.get(key)
            if track is None:
                tid = self._next_tid
                self._next_tid += 1
                track = self._tracks[key] = (self.pid, tid)
                self._meta.append(_meta("thread_name", self.pid, tid, name))
                self._meta.append(_meta("thread_sort_index", self.pid, tid, tid if sort is None else sort))
        return track

    # -- events ---------------------------------------------------------------------------
    def span(
        self, track: tuple[int, int], name: str, t0: float, t1: float, cat: str = "busy",
        args: dict[str, Any] | None = None,
    ) -> None:
        """A complete span from ``t0`` to ``t1`` (``perf_counter`` seconds)."""
        event: dict[str, Any] = {
            "name": name, "cat": cat, "ph": "X", "pid": track[0], "tid": track[1],
            "ts": round((t0 - self.origin) * 1e6, 3), "dur": round(max(0.0, t1 - t0) * 1e6, 3),
        }
        if args:
            event["args"] = args
        self._add(event)

    def worker_span(
        self, track: tuple[int, int], name: str, t0: float, t1: float, args: dict[str, Any]
    ) -> None:
        """A worker's busy span, preceded by an ``idle`` span since its previous one ended."""
        with self._lock:
            last = self._last_end.get(track)
            self._last_end[track] = t1
        if last is not None and t0 > last:
            self.span(track, "idle (no task)", last, t0, "idle")
        self.span(track, name, t0, t1, "busy", args)

    def instant(
        self, track: tuple[int, int], name: str, t: float, args: dict[str, Any] | None = None
    ) -> None:
        """An instant event (an autotune decision) at ``t``."""
        event: dict[str, Any] = {
            "name": name, "cat": "decision", "ph": "i", "s": "t", "pid": track[0], "tid": track[1],
            "ts": round((t - self.origin) * 1e6, 3),
        }
        if args:
            event["args"] = args
        self._add(event)

    def _add(self, event: dict[str, Any]) -> None:
        with self._lock:
            if len(self.events) < self.max_events:
                self.events.append(event)
            else:
                self.dropped += 1

    # -- output ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The trace as a Chrome trace-event JSON object (events sorted by time)."""
        with self._lock:
            events = sorted(self.events, key=lambda e: (e["ts"], -e.get("dur", 0)))
            return {
                "traceEvents": [*self._meta, *events],
                "displayTimeUnit": "ms",
                "otherData": {"generator": "dataflow", "dropped_events": self.dropped},
            }

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_json` to ``path``."""
        data = self.to_json()
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))


def _meta(what: str, pid: int, tid: int, value: Any) -> dict[str, Any]:
    key = "sort_index" if what.endswith("sort_index") else "name"
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": {key: value}}
