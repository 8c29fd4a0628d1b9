"""Thread-based parallelism: :class:`MultiThreadMapData`, :class:`MultiThreadRunner`,
:class:`ThreadPrefetchData`.

Threads share the process: no pickling, no copies, cheap start — and the GIL, so they help
when the work releases it (I/O, decoding in C, numpy on large arrays) or to overlap
preparation with the consumer. Every wait is a poll loop (``queue.get(timeout=0.1)``), so a
``timeout=`` is honoured and closing never deadlocks; a thread stuck inside user code cannot
be interrupted, so ``close()`` waits for it at most one second and leaves it as a daemon.
Exceptions in threads reach the consumer as :class:`~dataflow.errors.WorkerError` chained
to the original exception.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .._checks import check_int, check_timeout
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from ..errors import DataFlowNotReset, WorkerError
from . import _transport as tr
from ._map_base import ParallelMapBase, TaskId

__all__ = ["MultiThreadMapData", "MultiThreadRunner", "ThreadPrefetchData"]

_POLL_S = 0.1
_END = object()


def _thread_error(stage: str, exc: BaseException, where: str) -> WorkerError:
    err = tr.worker_error(stage, tr.error_payload(exc, where, pickle_exception=False))
    err.__cause__ = exc
    return err


def _put(q: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """Put unless ``stop`` is set first; False if stopped."""
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            pass
    return False


def _get(q: queue.Queue[Any], stage: str, timeout: float | None, threads: list[threading.Thread]) -> Any:
    """Get with a poll loop: raises ``TimeoutError`` after ``timeout`` s, never hangs."""
    try:
        return q.get_nowait()
    except queue.Empty:
        pass
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            return q.get(timeout=_POLL_S)
        except queue.Empty:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{stage}: no datapoint for {timeout} s (timeout={timeout})") from None
            if threads and not any(t.is_alive() for t in threads):
                raise RuntimeError(f"{stage}: all worker threads have stopped; call reset_state()") from None


def _stop_threads(threads: list[threading.Thread], stop: threading.Event, q: queue.Queue[Any] | None) -> None:
    stop.set()
    deadline = time.monotonic() + 1.0
    for t in threads:
        while t.is_alive() and time.monotonic() < deadline:
            if q is not None:  # unblock producers waiting for room
                try:
                    while True:
                        q.get_nowait()
                except queue.Empty:
                    pass
            t.join(_POLL_S)
    threads.clear()


def _map_thread(
    tasks: queue.Queue[Any], results: queue.Queue[Any], func: Callable[[Any], Any], where: str
) -> None:
    while True:
        item = tasks.get()
        if item is None:
            return
        task_id, chunk = item
        try:
            results.put((task_id, tr.DATA, [r for r in map(func, chunk) if r is not None]))
        except BaseException as e:
            results.put((task_id, tr.ERROR, (e, where)))


class MultiThreadMapData(ParallelMapBase):
    """Apply ``map_func`` to every datapoint in ``num_thread`` threads.

    Same arguments, epochs (``strict``), ordering (``ordered``) and ``len`` as
    :class:`~dataflow.MultiProcessMapDataZMQ`, with threads instead of processes: nothing
    is pickled, ``map_func`` may be any callable, and it must be thread-safe.
    """

    def __init__(
        self,
        ds: DataFlow,
        num_thread: int,
        map_func: Callable[[Any], Any],
        buffer_size: int = 200,
        strict: bool = False,
        *,
        ordered: bool = False,
        timeout: float | None = None,
    ) -> None:
        super().__init__(ds, map_func, buffer_size, strict, ordered, timeout)
        self.num_thread = check_int(type(self).__name__, "num_thread", num_thread)
        self._threads: list[threading.Thread] = []

    def _start(self) -> None:
        self._tasks: queue.Queue[Any] = queue.Queue()
        self._results: queue.Queue[Any] = queue.Queue()
        for i in range(self.num_thread):
            where = f"map_func in thread {i}"
            t = threading.Thread(
                target=_map_thread,
                args=(self._tasks, self._results, self.map_func, where),
                name=f"dataflow-map-{i}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)

    def _submit(self, task_id: TaskId, chunk: list[Any]) -> None:
        self._tasks.put((task_id, chunk))

    def _receive(self) -> tuple[TaskId, bytes, Any]:
        return _get(self._results, type(self).__name__, self.timeout, self._threads)  # type: ignore[no-any-return]

    def _worker_error(self, payload: Any) -> BaseException:
        exc, where = payload
        return _thread_error(type(self).__name__, exc, where)

    def _stop(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        _stop_threads(self._threads, threading.Event(), None)


def _runner_thread(
    get_df: Callable[[], DataFlow], q: queue.Queue[Any], stop: threading.Event, where: str
) -> None:
    try:
        df = get_df()
        df.reset_state()
        while not stop.is_set():
            produced = False
            for dp in df:
                produced = True
                if not _put(q, dp, stop):
                    return
            if not produced:
                raise ValueError(f"the flow {type(df).__name__} produced an empty epoch")
    except BaseException as e:
        _put(q, (_END, e, where), stop)


class MultiThreadRunner(DataFlow):
    """Run ``num_thread`` flows, each made by ``get_df()`` in its own thread, forever, and
    merge their datapoints through a queue of ``num_prefetch``.

    Each thread builds, resets and repeats its own flow; ``len`` is ``len(get_df())`` and one
    ``__iter__`` yields that many datapoints (unknown length: infinite). Not reentrant.
    """

    def __init__(
        self,
        get_df: Callable[[], DataFlow],
        num_prefetch: int,
        num_thread: int,
        *,
        timeout: float | None = None,
    ) -> None:
        stage = type(self).__name__
        if not callable(get_df):
            raise TypeError(f"{stage}: get_df must be a function returning a DataFlow, got {get_df!r}")
        self.get_df = get_df
        self.num_prefetch = check_int(stage, "num_prefetch", num_prefetch)
        self.num_thread = check_int(stage, "num_thread", num_thread)
        self.timeout = check_timeout(stage, timeout)
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._guard = ReentrancyGuard(stage)

    def __len__(self) -> int:
        return len(self.get_df())

    def reset_state(self) -> None:
        self.close()
        self._stop = threading.Event()
        self._queue: queue.Queue[Any] = queue.Queue(self.num_prefetch)
        for i in range(self.num_thread):
            t = threading.Thread(
                target=_runner_thread,
                args=(self.get_df, self._queue, self._stop, f"the flow in thread {i}"),
                name=f"dataflow-runner-{i}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)

    def __iter__(self) -> Iterator[Any]:
        if not self._threads:
            raise DataFlowNotReset(
                f"{type(self).__name__} was iterated before reset_state() or after close()"
            )
        stage = type(self).__name__
        with self._guard:
            try:
                size: int | None = len(self)
            except (TypeError, NotImplementedError):
                size = None
            n = 0
            while size is None or n < size:
                item = _get(self._queue, stage, self.timeout, self._threads)
                if type(item) is tuple and len(item) == 3 and item[0] is _END:
                    raise _thread_error(stage, item[1], item[2])
                yield item
                n += 1

    def close(self) -> None:
        """Stop and join the threads (each at most ~1 s). Idempotent."""
        _stop_threads(self._threads, self._stop, getattr(self, "_queue", None))


class ThreadPrefetchData(ProxyDataFlow):
    """Read the upstream in a background thread, up to ``num_prefetch`` datapoints ahead
    (the ``.prefetch(n)`` of the fluent API).

    Epoch-preserving: one ``__iter__`` is exactly one upstream epoch, in order. Leaving an
    epoch early stops the thread. Upstream exceptions are raised here as
    :class:`~dataflow.errors.WorkerError` chained to the original. ``len`` is the upstream's.
    Not reentrant.
    """

    def __init__(self, ds: DataFlow, num_prefetch: int = 2, *, timeout: float | None = None) -> None:
        super().__init__(ds)
        self.num_prefetch = check_int(type(self).__name__, "num_prefetch", num_prefetch)
        self.timeout = check_timeout(type(self).__name__, timeout)
        self._guard = ReentrancyGuard(type(self).__name__)

    def __iter__(self) -> Iterator[Any]:
        stage = type(self).__name__
        with self._guard:
            q: queue.Queue[Any] = queue.Queue(self.num_prefetch)
            stop = threading.Event()
            t = threading.Thread(target=self._produce, args=(q, stop), name="dataflow-prefetch", daemon=True)
            t.start()
            try:
                while True:
                    item = _get(q, stage, self.timeout, [t])
                    if type(item) is tuple and len(item) == 3 and item[0] is _END:
                        if item[1] is None:
                            return
                        raise _thread_error(stage, item[1], item[2])
                    yield item
            finally:
                _stop_threads([t], stop, q)

    def _produce(self, q: queue.Queue[Any], stop: threading.Event) -> None:
        try:
            for dp in self.ds:
                if not _put(q, dp, stop):
                    return
            _put(q, (_END, None, ""), stop)
        except BaseException as e:
            _put(q, (_END, e, f"the upstream {type(self.ds).__name__} in the prefetch thread"), stop)
