"""Waiting on queues and threads without hanging, and pausing producer threads for a
checkpoint. Every wait is a poll loop (``timeout=0.1``), so ``timeout=`` is honoured, dead
threads are noticed and closing never deadlocks."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ._bounded_queue import BoundedQueue
from ._interrupts import deferred_sigint

__all__ = ["END", "POLL_S", "Pause", "get", "put", "start_thread", "stop_threads"]

POLL_S = 0.1
END = object()  #: ``(END, exception or None, where)`` ends a producer's stream


def put(q: BoundedQueue[Any], item: Any, stop: threading.Event) -> bool:
    """Put unless ``stop`` is set first; False if stopped."""
    while not stop.is_set():
        try:
            q.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            pass
    return False


def get(
    q: BoundedQueue[Any] | queue.SimpleQueue[Any],
    stage: str,
    timeout: float | None,
    threads: list[threading.Thread],
) -> Any:
    """Get with a poll loop: raises ``TimeoutError`` after ``timeout`` s, never hangs."""
    try:
        return q.get_nowait()
    except queue.Empty:
        pass
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{stage}: no datapoint for {timeout} s (timeout={timeout})") from None
            if threads and not any(t.is_alive() for t in threads):
                raise RuntimeError(f"{stage}: all worker threads have stopped; call reset_state()") from None


def start_thread(
    threads: list[threading.Thread], target: Callable[..., Any], args: tuple[Any, ...], name: str
) -> None:
    """Start a daemon thread, listed in ``threads`` before it starts (whatever interrupts, the
    owner's stop finds it); a Ctrl-C during the start is deferred until it is listed and running."""
    t = threading.Thread(target=target, args=args, name=name, daemon=True)
    threads.append(t)
    with deferred_sigint():
        t.start()


def stop_threads(threads: list[threading.Thread], stop: threading.Event, q: BoundedQueue[Any] | None) -> None:
    """Ask threads to stop and join each for at most ~1 s in all (a thread stuck in user code
    cannot be interrupted: it is left as a daemon; one never started is not alive, so it is
    not joined), then empty ``threads``."""
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
            t.join(POLL_S)
    threads.clear()


class Pause:
    """Stops producer threads between two datapoints, so their flows' states can be read.

    Producers call :meth:`point` after each successful put (holding no datapoint then); the
    consumer calls :meth:`hold` — which returns once every live producer waits there,
    moving the queue's datapoints to ``into`` meanwhile so that producers blocked on a full
    queue get room — and then :meth:`release`.
    """

    def __init__(self) -> None:
        self._asked = threading.Event()
        self._go = threading.Event()
        self._go.set()
        self._waiting = 0
        self._lock = threading.Lock()

    def point(self) -> None:
        """A producer's boundary: wait here while a pause is asked for."""
        if self._asked.is_set():
            with self._lock:
                self._waiting += 1
            self._go.wait()
            with self._lock:
                self._waiting -= 1

    def hold(
        self, threads: list[threading.Thread], q: BoundedQueue[Any], into: deque[Any], stage: str,
        timeout: float | None,
    ) -> None:
        self._go.clear()
        self._asked.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                while True:
                    into.append(q.get_nowait())
            except queue.Empty:
                pass
            live = sum(t.is_alive() for t in threads)
            with self._lock:
                if self._waiting >= live:
                    return
            if deadline is not None and time.monotonic() > deadline:
                self.release()
                raise TimeoutError(
                    f"{stage}: the producer threads did not reach a datapoint boundary in {timeout} s"
                )
            time.sleep(0.001)

    def release(self) -> None:
        self._asked.clear()
        self._go.set()
