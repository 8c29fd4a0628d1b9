"""What :class:`~dataflow.parallel.maps.MultiProcessMapDataZMQ` measures and decides in its
consumer for ``num_proc="auto"`` and ``buffer_size="auto"`` (and shows in traces): mapping in
the consumer while workers do not pay, timing it, going to the workers once they do, and
timing and sizing the results they send back.

- **measured stretches** (:func:`in_consumer`, :func:`stream_here`,
  :func:`stretch_measured`): a strict pass maps here in stretches of about
  :data:`STRETCH_SECONDS` of map time, each result yielded as it is made and one call of
  the map in :data:`~._map_passes.TIME_EVERY` timed (see :mod:`._map_passes`), for the
  :class:`~._autoworkers.AutoWorkers` that decide when workers pay.
- **groups** (:func:`map_here`, :func:`map_inline_task`): where items get their own RNG or
  a trace is recorded, a strict pass maps groups here instead, sized like tasks (about
  :data:`~._autotune.TASK_SECONDS` of map time, at most :data:`HERE_MAX` datapoints), each
  timed as a whole; a non-strict map's tasks wait in ``_inline`` and are mapped here when
  their result is wanted (:func:`map_inline`).
- **serial rest** (:func:`serial_rest`, :func:`serial_done`): a map too cheap for any worker
  count maps the rest of its pass in the passes' own ``.map``-like loop (see
  :mod:`._map_passes`), unmeasured; the next pass measures again.
- **going parallel**: when the measurements say workers pay, :func:`stretch_measured` starts
  them (or uses them again), sizes an automatic buffer and hands them the tasks queued here.
- **measured receives** (:func:`receive_measured`): each result's wait (for
  :class:`~._autoworkers.AutoWorkers`: one worker more or fewer, or back in-process) and
  bytes (for :class:`~._autoworkers.AutoBuffer`), and trace spans (:func:`trace_receive`).
  Without any of these the map's ``_receive`` takes its own short path.

The map's hook methods (``_in_consumer``, ``_stream_here``, ``_stretch_sample``,
``_stretch_measured``, ``_map_here``, ``_serial_rest``, ``_serial_done``) are these
functions, and its ``_receive`` calls :func:`receive_measured`.
"""
from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from .. import _trace
from . import _messages as msg
from ._autotune import TASK_SECONDS
from ._autoworkers import AutoBuffer, AutoWorkers
from ._map_passes import IN_CONSUMER
from ._map_worker import apply_map

if TYPE_CHECKING:
    from ._map_base import RngKey, TaskId
    from .maps import MultiProcessMapDataZMQ

__all__ = [
    "HERE_MAX",
    "MEASURED_FIRST",
    "MEASURE_GAP_S",
    "STRETCH_MAX",
    "STRETCH_SECONDS",
    "in_consumer",
    "map_here",
    "map_inline",
    "map_inline_task",
    "receive_measured",
    "serial_done",
    "serial_rest",
    "size_result",
    "stream_here",
    "stretch_measured",
    "stretch_sample",
    "trace_receive",
]

#: most datapoints a ``num_proc="auto"`` map maps at once in the consumer, in a group ...
HERE_MAX = 1024
#: ... and in a measured stretch, which holds nothing: about this much map time, ...
STRETCH_SECONDS = 0.01
#: ... at most this many datapoints (a cheap map's stretches, before the unmeasured rest,
#: cost it ~80 ns per datapoint more than ``.map``)
STRETCH_MAX = 1024
#: ``num_proc="auto"`` in-process: a map so cheap that workers cannot pay maps the rest of a
#: pass unmeasured when it was measured within this long (see :func:`serial_rest`) ...
MEASURE_GAP_S = 0.1
#: ... and at least this many groups were measured since the start (the first has one
#: datapoint, often slow: caches cold)
MEASURED_FIRST = 2


def in_consumer(m: MultiProcessMapDataZMQ) -> int:
    """``num_proc="auto"`` while in-process is faster: map groups here (not a batching map,
    whose batches are made by the tasks), sized like tasks (about 2 ms of map time), at
    most :data:`HERE_MAX` datapoints."""
    auto = m._auto
    if auto is None or auto.parallel or m._inline or m._batch_size:
        return 0
    est = m._tuner.per_item
    if m._tuner.fixed is not None:
        return m._tuner.fixed
    return 1 if est is None else max(1, min(HERE_MAX, int(TASK_SECONDS / max(est, 1e-9))))


def map_here(m: MultiProcessMapDataZMQ, chunk: list[Any], rng_key: RngKey) -> list[Any]:
    auto = m._auto
    if auto is None:  # _in_consumer() maps here only with num_proc="auto"
        raise RuntimeError(f"{type(m).__name__}: mapping in the consumer without num_proc='auto'")
    task_id, kind, out = map_inline_task(m, auto, chunk, rng_key)
    if kind == msg.ERROR:
        raise msg.error_for(type(m).__name__, out)
    return out  # type: ignore[no-any-return]


def serial_rest(m: MultiProcessMapDataZMQ) -> bool:
    """``num_proc="auto"`` in-process, when the map measured in the latest
    :data:`MEASURE_GAP_S` costs less per datapoint than receiving a result from a worker
    costs the consumer (:attr:`~._autotune.WorkerPlan.transport`): no worker count can be
    faster, so the rest of the pass is mapped as ``.map`` maps (no groups, no clock; the next
    pass measures again). Not with item RNGs or while tracing (each group is measured there)."""
    auto = m._auto
    if auto is None or auto.parallel or m.item_rng or m._batch_size or _trace.current:
        return False
    est = m._tuner.per_item
    if est is None or est >= auto.plan.transport or m._measures < MEASURED_FIRST:
        return False
    if time.perf_counter() - m._measured_at >= MEASURE_GAP_S:
        return False
    auto.too_cheap_for_workers(est)
    return True


def serial_done(m: MultiProcessMapDataZMQ) -> None:
    auto = m._auto
    if auto is not None:  # the loop was not measured: a new window begins
        auto.restart(time.perf_counter())


def map_inline(m: MultiProcessMapDataZMQ, auto: AutoWorkers) -> tuple[TaskId, bytes, Any]:
    task_id, chunk, rng_key = m._inline.popleft()
    return (task_id, *map_inline_task(m, auto, chunk, rng_key)[1:])


def map_inline_task(
    m: MultiProcessMapDataZMQ, auto: AutoWorkers, chunk: list[Any], rng_key: RngKey
) -> tuple[None, bytes, Any]:
    """``num_proc="auto"`` while in-process is faster: map a task here, measuring (see
    ``_autoworkers``); may start (or return to) the workers for the next tasks."""
    t0 = time.perf_counter()
    out: Any
    try:
        kind, out = msg.DATA, apply_map(m.map_func, chunk, rng_key)
    except Exception as e:
        kind, out = msg.ERROR, msg.capture_error(e, IN_CONSUMER, same_process=True)
    now = time.perf_counter()
    tr = _trace.current
    if tr is not None:
        tr.span(tr.stage_track(m), f"map in-process ({len(chunk)} datapoints)", t0, now)
    sample = out[:1] if kind == msg.DATA and out and stretch_sample(m) else None
    stretch_measured(m, len(chunk), now - t0, now, sample)
    return None, kind, out


def stream_here(m: MultiProcessMapDataZMQ, size: int) -> int:
    """Where :func:`in_consumer` gave ``size``: a measured stretch (see
    :mod:`._map_passes`) of about :data:`STRETCH_SECONDS` of map time, at
    most :data:`STRETCH_MAX` datapoints, at least ``size``. A pass (or a non-strict epoch)
    streams unless items get their own RNG (mapped in keyed groups) or a trace is recorded (a span per
    group)."""
    if m.item_rng or _trace.current is not None:
        return 0
    est = m._tuner.per_item
    if est is None:
        return size
    return max(size, min(STRETCH_MAX, int(STRETCH_SECONDS / max(est, 1e-9))))


def stretch_sample(m: MultiProcessMapDataZMQ) -> bool:
    """A result's bytes are measured once per window (the probe of what workers would copy
    costs ~50 us for a 10 MB array)."""
    auto = m._auto
    return auto is not None and time.perf_counter() - m._sized_at >= auto.window


def size_result(m: MultiProcessMapDataZMQ, result: Any, now: float) -> None:
    """What sending ``result`` would cost a worker (its large arrays' bytes), and whether
    workers started now would need shared memory for results like it."""
    m._sized_at = now
    nbytes = msg.large_bytes(result)
    m._results_small = nbytes == 0
    if m._auto is not None:
        m._auto.result_bytes = max(0, nbytes)


def stretch_measured(
    m: MultiProcessMapDataZMQ, items: int, busy: float, now: float, sample: list[Any] | None
) -> None:
    """A measured stretch or a group mapped here is over: ``items`` datapoints in ``busy`` s
    of map time, ending at ``now``; ``sample``: its first result, where one is to be sized.
    The map's time per datapoint is updated (tasks group a cheap map, in-process too), and
    the workers may start (or be used again) for the next tasks, with an automatic buffer
    sized from what was measured here, the tasks queued here going to them in order."""
    auto = m._auto
    if auto is None:  # only num_proc="auto" maps here
        raise RuntimeError(f"{type(m).__name__}: mapping in the consumer without num_proc='auto'")
    m._measured_at = now
    m._measures += 1
    m._tuner.observe(items, busy)
    if sample:
        size_result(m, sample[0], now)
    if not auto.mapped_inline(items, busy, now):
        return
    m._active = auto.plan.workers
    if m._pool is None:
        m._start_pool(m._results_small)
    abuf = m._abuf
    if abuf is not None:  # sized for the tasks measured here before the first result
        m.buffer_size = abuf.current = abuf.size(m._active, m._tuner.chunk)
        m._tuner.cap = max(m._tuner.chunk, m.buffer_size // (2 * m._active))
    queued, m._inline = m._inline, deque()
    for task in queued:  # the tasks waiting here go to the workers too, in order
        m._submit(*task)
    auto.restart(time.perf_counter())


def receive_measured(
    m: MultiProcessMapDataZMQ,
    auto: AutoWorkers | None,
    abuf: AutoBuffer | None,
    tr: _trace.Tracer | None,
) -> tuple[TaskId | None, bytes, Any]:
    """The map's ``_receive`` when something measures it: a task queued here (``num_proc="auto"``
    in-process) is mapped here; a worker's result is timed for the
    :class:`~._autoworkers.AutoWorkers`, its bytes sized for the
    :class:`~._autoworkers.AutoBuffer`, and traced."""
    if auto is not None and m._inline:
        return map_inline(m, auto)
    sizes: list[int] | None = [] if abuf is not None else None
    t0 = time.perf_counter()
    worker, kind, (task_id, payload, *busy) = m._task_message(sizes)
    now = time.perf_counter()
    m._load[worker] -= 1
    items = m._flight.get(task_id, 0)
    if busy:
        m._tuner.observe(items, busy[0])
    if tr is not None:
        trace_receive(m, tr, worker, t0, now, items, busy)
    if auto is not None and auto.parallel:
        new = auto.received(items, now - t0, now)
        if new:  # 0: the next tasks are mapped here; the workers idle until needed again
            m._active = new
    if abuf is not None and sizes:
        size = abuf.observe(items, sizes[0], m._active, m._tuner.chunk)
        if size is not None:
            m.buffer_size = size
            m._tuner.cap = max(1, size // (2 * m._active))
    return task_id, kind, payload


def trace_receive(
    m: MultiProcessMapDataZMQ,
    tr: _trace.Tracer,
    worker: int,
    t0: float,
    now: float,
    items: int,
    busy: list[float],
) -> None:
    """Trace spans: the consumer waiting for a result, the worker mapping its task."""
    tr.span(tr.stage_track(m), "waiting for workers", t0, now, "wait")
    if len(busy) >= 2:
        pids = m._pool.pids if m._pool is not None else []
        track = tr.worker_track(m, worker, pids[worker] if worker < len(pids) else None)
        start = busy[1]
        tr.worker_span(track, f"map {items} datapoint(s)", start, start + busy[0], {"datapoints": items})
