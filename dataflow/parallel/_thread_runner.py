"""Thread-based :class:`MultiThreadRunner`: ``num_thread`` copies of a flow, each in its own
thread, merged through one queue. Waits, ``close()`` and errors are those of every thread
stage (see :mod:`dataflow.parallel._threads`), which re-exports it."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._checks import check_callable, check_int, check_timeout
from .._errors import DataFlowNotReset, StateError
from .._state import checking_only
from .._state_fields import decode_items, encode_items, field, int_field
from ..base import DataFlow, ReentrancyGuard
from . import _messages as msg
from ._bounded_queue import BoundedQueue
from ._interrupts import deferred_sigint
from ._thread_util import END, Pause, get, put, start_thread, stop_threads

__all__ = ["MultiThreadRunner"]


def _runner_thread(
    get_df: Callable[[], DataFlow[Any]],
    q: BoundedQueue[Any],
    stop: threading.Event,
    pause: Pause,
    where: str,
    slot: list[Any],
) -> None:
    """Build, reset (and resume, from ``slot[0]``) a flow; put its datapoints forever."""
    try:
        df = get_df()
        df.reset_state()
        state, slot[0] = slot[0], df  # the slot then holds the flow, for its state
        if state is not None:
            df.load_state_dict(state)
        produced = state is not None
        while not stop.is_set():
            for dp in df:
                produced = True
                if not put(q, dp, stop):
                    return
                pause.point()
            if not produced:
                raise ValueError(f"the flow {type(df).__name__} produced an empty epoch")
            produced = False
            pause.point()
    except BaseException as e:
        put(q, (END, msg.capture_error(e, where, same_process=True)), stop)


class MultiThreadRunner(DataFlow[Any]):
    """Run ``num_thread`` flows, each made by ``get_df()`` in its own thread, forever, and
    merge their datapoints through a queue of ``num_prefetch``.

    Each thread builds, resets and repeats its own flow; ``len`` is ``len(get_df())`` and one
    ``__iter__`` yields that many datapoints (unknown length: infinite). Not reentrant.
    Checkpoints pause every thread between two datapoints and keep each flow's state and the
    datapoints queued; a resumed runner needs the same ``num_thread``.
    """

    def __init__(
        self,
        get_df: Callable[[], DataFlow[Any]],
        num_prefetch: int,
        num_thread: int,
        *,
        timeout: float | None = None,
    ) -> None:
        stage = type(self).__name__
        check_callable(stage, "get_df", get_df, "a function returning a DataFlow")
        self.get_df = get_df
        self.num_prefetch = check_int(stage, "num_prefetch", num_prefetch)
        self.num_thread = check_int(stage, "num_thread", num_thread)
        self.timeout = check_timeout(stage, timeout)
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._pause = Pause()
        self._guard = ReentrancyGuard(stage)
        self._local: deque[Any] = deque()  # drained at a checkpoint: yielded before the queue
        self._slots: list[list[Any]] = []
        self._states: list[Any] | None = None
        self._yielded = 0  # in the current epoch

    def __len__(self) -> int:
        return len(self.get_df())

    def reset_state(self) -> None:
        """Start the threads, first stopping whatever an earlier start left."""
        self.close()
        self._stop = threading.Event()
        self._queue: BoundedQueue[Any] = BoundedQueue(self.num_prefetch)
        if self._states is None:  # a fresh start; after load_state_dict, its queued ones stay
            self._local = deque()
        states = self._states or [None] * self.num_thread
        self._states = None
        self._slots = [[s] for s in states]
        for i in range(self.num_thread):
            start_thread(
                self._threads,
                _runner_thread,
                (
                    self.get_df,
                    self._queue,
                    self._stop,
                    self._pause,
                    f"the flow in thread {i}",
                    self._slots[i],
                ),
                f"dataflow-runner-{i}",
            )

    def __iter__(self) -> Iterator[Any]:
        if len(self._threads) < self.num_thread:
            raise DataFlowNotReset(
                f"{type(self).__name__} has no threads running: reset_state() was not called or "
                f"did not complete, or close() was. Call reset_state(): it starts them afresh"
            )
        self._yielded = self.__dict__.pop("_resume", 0)
        return self._track(self._epoch())

    def _epoch(self) -> Iterator[Any]:
        stage = type(self).__name__
        with self._guard:
            try:
                size: int | None = len(self)
            except (TypeError, NotImplementedError):
                size = None
            while size is None or self._yielded < size:
                if self._local:  # read from self each time: a load mid-epoch replaces it
                    item = self._local.popleft()
                else:
                    item = get(self._queue, stage, self.timeout, self._threads)
                if type(item) is tuple and len(item) == 2 and item[0] is END:
                    raise msg.error_for(stage, item[1])
                self._yielded += 1
                yield item

    def close(self) -> None:
        """Stop and join the threads (each at most ~1 s). Idempotent."""
        self._pause.release()
        with deferred_sigint():  # bounded (~1 s): a Ctrl-C here must not strand a thread
            stop_threads(self._threads, self._stop, getattr(self, "_queue", None))

    def _get_state(self, live: bool) -> dict[str, Any]:
        stage = type(self).__name__
        if not self._threads:
            states = self._states or [None] * self.num_thread
        else:
            try:  # a Ctrl-C inside hold() must not leave the threads paused
                self._pause.hold(self._threads, self._queue, self._local, stage, self.timeout)
                states = [s[0].state_dict() if isinstance(s[0], DataFlow) else s[0] for s in self._slots]
            finally:
                self._pause.release()
        local = list(self._local)
        return {
            "num_thread": self.num_thread,
            "flows": states,
            "queued": encode_items(stage, local, "queued datapoints") if local else None,
            "yielded": self._yielded if live else 0,
        }

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        if int_field(stage, state, "num_thread", 1) != self.num_thread:
            raise StateError(
                f"{stage}: the state was saved with num_thread={state['num_thread']}; resume with it"
            )
        flows = field(stage, state, "flows", list)
        if len(flows) != self.num_thread:
            raise StateError(f"{stage}: the saved flow states are corrupted")
        self._local = deque(decode_items(stage, state, "queued") if state.get("queued") is not None else [])
        self._states = flows
        self.__dict__.pop("_resume", None)
        if live:
            self._resume = int_field(stage, state, "yielded")
        if self._threads and not checking_only():  # started: restart the threads from it
            self.reset_state()
