"""Thread-based parallelism: :class:`MultiThreadMapData` (and, re-exported here,
:class:`~dataflow.parallel._thread_runner.MultiThreadRunner` and
:class:`~dataflow.parallel._prefetch.ThreadPrefetchData`).

Threads share the process: no pickling, no copies, cheap start — and the GIL, so they help
when the work releases it (I/O, decoding in C, numpy on large arrays) or to overlap
preparation with the consumer. Every wait is a poll loop, so a ``timeout=`` is honoured and
closing never deadlocks; a thread stuck inside user code cannot be interrupted, so
``close()`` waits for it at most one second and leaves it as a daemon. An exception in a
thread is raised in the consumer as itself (its traceback shows the thread's frames), with
a note naming the stage and the thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import _trace
from .._checks import check_int
from ..base import DataFlow
from . import _messages as msg
from ._interrupts import deferred_sigint
from ._map_base import ParallelMapBase, RngKey, TaskId, apply_map
from ._prefetch import ThreadPrefetchData
from ._thread_runner import MultiThreadRunner
from ._thread_util import POLL_S, get, start_thread, stop_threads

__all__ = ["MultiThreadMapData", "MultiThreadRunner", "ThreadPrefetchData"]


def _map_thread(
    tasks: queue.SimpleQueue[Any],
    results: queue.SimpleQueue[Any],
    func: Callable[..., Any],
    where: str,
    stop: threading.Event,
    index: int = 0,
) -> None:
    """Map tasks until ``None`` or ``stop``. Waits with a timeout: a Ctrl-C in the consumer
    while it held the queue's condition can lose a wake-up, and a thread waiting without one
    would then never see the end."""
    clock = time.perf_counter
    while not stop.is_set():
        try:
            item = tasks.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if item is None:
            return
        task_id, chunk, rng_key = item
        t0 = clock()
        try:
            out = apply_map(func, chunk, rng_key)
        except BaseException as e:
            results.put((task_id, msg.ERROR, msg.capture_error(e, where, same_process=True), 0.0, t0, index))
        else:  # the map time sizes the next tasks (ParallelMapBase._observe); t0 and index: traces
            results.put((task_id, msg.DATA, out, clock() - t0, t0, index))


class MultiThreadMapData(ParallelMapBase):
    """Apply ``map_func`` to every datapoint in ``num_thread`` threads.

    Same arguments, epochs (``strict``), ordering (``ordered``), ``item_rng``, checkpoints,
    ``chunk`` and ``len`` as :class:`~dataflow.MultiProcessMapDataZMQ`, with threads instead
    of processes: nothing is pickled, ``map_func`` may be any callable, and it must be
    thread-safe. With ``chunk="auto"`` (the default) a cheap map's datapoints travel to the
    threads in groups (one queue operation and one wake-up per group instead of per
    datapoint), a slow map's one by one.
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        num_thread: int,
        map_func: Callable[..., Any],
        buffer_size: int = 200,
        strict: bool = False,
        *,
        ordered: bool = False,
        item_rng: bool = False,
        seed: int | None = None,
        timeout: float | None = None,
        chunk: int | str = "auto",
    ) -> None:
        super().__init__(ds, map_func, buffer_size, strict, ordered, timeout, chunk, item_rng, seed)
        self.num_thread = check_int(type(self).__name__, "num_thread", num_thread)
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()  # set by _stop; a fresh one per _start

    def _start(self) -> None:
        # SimpleQueue: its put and get are single C calls, so a Ctrl-C in this thread cannot
        # leave a lock of the queue held (queue.Queue's Python-level locking can, and the
        # map threads then wait on it forever)
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._chunk_cap = max(1, self.buffer_size // (2 * self.num_thread))  # >= 2 tasks per thread
        self._probe = 2 * self.num_thread if self._per_item is None else 0  # see ParallelMapBase
        for i in range(self.num_thread):
            start_thread(
                self._threads,
                _map_thread,
                (
                    self._tasks,
                    self._results,
                    self.map_func,
                    f"map_func in thread {i}",
                    self._stopping,
                    i,
                ),
                f"dataflow-map-{i}",
            )

    def _submit(self, task_id: TaskId, chunk: list[Any], rng_key: RngKey) -> None:
        self._tasks.put((task_id, chunk, rng_key))

    def _receive(self) -> tuple[TaskId | None, bytes, Any]:
        tr = _trace.current
        t0 = time.perf_counter() if tr is not None else 0.0
        task_id, kind, payload, busy, start, index = get(
            self._results, type(self).__name__, self.timeout, self._threads
        )
        items = self._flight.get(task_id, 0)
        if kind == msg.DATA:
            self._busy = busy
        if tr is not None:
            tr.span(tr.stage_track(self), "waiting for threads", t0, time.perf_counter(), "wait")
            track = tr.thread_track(self, index)
            tr.worker_span(track, f"map {items} datapoint(s)", start, start + busy, {"datapoints": items})
        return task_id, kind, payload

    def _stop(self) -> None:
        with deferred_sigint():  # bounded (~1 s): a Ctrl-C here must not strand a thread
            stop_threads(self._threads, self._stopping, None)
