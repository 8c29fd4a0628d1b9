"""Reading ahead in a background thread: :class:`ThreadPrefetchData` (``.prefetch(n)``)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from .._checks import check_int, check_timeout
from .._state_fields import decode_items, encode_items, field
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard
from . import _messages as msg
from ._bounded_queue import BoundedQueue
from ._interrupts import deferred_sigint
from ._thread_util import END, Pause, get, put, start_thread, stop_threads

__all__ = ["ThreadPrefetchData"]


class ThreadPrefetchData(ProxyDataFlow):
    """Read the upstream in a background thread, up to ``num_prefetch`` datapoints ahead
    (the ``.prefetch(n)`` of the fluent API).

    Epoch-preserving: one ``__iter__`` is exactly one upstream epoch, in order; the thread
    starts when the epoch begins (at ``iter()``). Leaving an epoch early stops the thread.
    An upstream exception is raised here as itself, with a note naming this stage.
    ``len`` is the upstream's. Not reentrant.

    Checkpoints pause the thread between two datapoints and keep the upstream's state plus
    the datapoints read ahead but not yielded (they come first on resume).
    """

    def __init__(self, ds: DataFlow[Any], num_prefetch: int = 2, *, timeout: float | None = None) -> None:
        super().__init__(ds)
        self.num_prefetch = check_int(type(self).__name__, "num_prefetch", num_prefetch)
        self.timeout = check_timeout(type(self).__name__, timeout)
        self._guard = ReentrancyGuard(type(self).__name__)
        self._pause = Pause()
        self._run: tuple[threading.Thread, BoundedQueue[Any], threading.Event] | None = None
        self._local: deque[Any] = deque()  # read ahead, drained at a checkpoint

    def __iter__(self) -> Iterator[Any]:
        if self._guard.busy():
            return self._track(self._busy())
        self._local = deque(self.__dict__.pop("_resume", ()))
        itr = iter(self.ds)  # the epoch begins now, in this thread
        return self._track(self._consume(itr))

    def _busy(self) -> Iterator[Any]:
        with self._guard:  # raises DataFlowReentrantError
            yield from ()

    def _consume(self, itr: Iterator[Any]) -> Iterator[Any]:
        """The epoch. The thread starts with the first ``next()``, inside the ``try`` whose
        ``finally`` stops it: an iterator dropped unstarted (or a Ctrl-C between ``iter()``
        and the first datapoint) leaves no thread behind."""
        stage, local = type(self).__name__, self._local
        q: BoundedQueue[Any] = BoundedQueue(self.num_prefetch)
        stop = threading.Event()
        threads: list[threading.Thread] = []
        with self._guard:
            try:
                start_thread(threads, self._produce, (itr, q, stop), "dataflow-prefetch")
                self._run = (threads[0], q, stop)
                while True:
                    item = local.popleft() if local else get(q, stage, self.timeout, threads)
                    if type(item) is tuple and len(item) == 2 and item[0] is END:
                        if item[1] is None:
                            return
                        raise msg.error_for(stage, item[1])
                    yield item
            finally:
                self._run = None
                self._pause.release()
                stop_threads(threads, stop, q)

    def close(self) -> None:
        """Stop the reading thread of an epoch still in progress (its iterator may still be
        held), then close the upstream. Idempotent."""
        try:
            with deferred_sigint():
                run, self._run = self._run, None
                if run is not None:
                    self._pause.release()
                    stop_threads([run[0]], run[2], run[1])
        finally:
            self.ds.close()

    def _produce(self, itr: Iterator[Any], q: BoundedQueue[Any], stop: threading.Event) -> None:
        pause = self._pause
        try:
            for dp in itr:
                if not put(q, dp, stop):
                    return
                pause.point()
            put(q, (END, None), stop)
        except BaseException as e:
            where = f"the upstream {type(self.ds).__name__} in the prefetch thread"
            put(q, (END, msg.capture_error(e, where, same_process=True)), stop)

    def _get_state(self, live: bool) -> dict[str, Any]:
        stage = type(self).__name__
        run = self._run
        if not live:
            return {"ahead": None}
        if run is not None:  # the thread runs: pause it and take what it read ahead
            self._pause.hold([run[0]], run[1], self._local, stage, self.timeout)  # released in _state_saved
        # else the epoch has not pulled its first datapoint: what a resume gave it is still ahead
        ahead = [x for x in self._local if not (type(x) is tuple and len(x) == 2 and x[0] is END)]
        return {"ahead": encode_items(stage, ahead, "datapoints read ahead") if ahead else None}

    def _state_saved(self) -> None:
        self._pause.release()  # the upstream's state is taken: the thread may read on

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        field(stage, state, "ahead", (bytes, type(None)))
        if live and state["ahead"] is not None:
            self._resume = decode_items(stage, state, "ahead")
