"""The guard that makes a second concurrent epoch of a stateful flow fail loudly
(re-exported by :mod:`dataflow.base`)."""

from __future__ import annotations

import gc
import sys
import threading
import time
import types
from typing import Any

from .errors import DataFlowReentrantError

__all__ = ["ReentrancyGuard"]

#: how long a held guard whose holder has not named its frame yet is given to do so
_SETTLE_S = 0.01


class ReentrancyGuard:
    """Makes a second concurrent ``__iter__`` of a stateful flow fail loudly.

    Use inside the generator: ``with self._guard: yield from ...``. The guard is released
    when the epoch ends or when the iterator is closed or garbage-collected.

    A hold counts only while the frame that took it runs or is a suspended generator's. A
    ``KeyboardInterrupt`` (or any exception a signal handler raises) can land between two
    bytecodes of the guard's own enter or exit, after the lock was taken and before the
    ``with`` could release it; the epoch then ends still holding the lock. Such a hold is
    taken over by the next epoch instead of refusing it (and every later one) forever.
    """

    __slots__ = ("_lock", "_owner", "_frame")

    def __init__(self, owner: str) -> None:
        self._lock = threading.Lock()
        self._owner = owner
        self._frame: types.FrameType | None = None  # the frame of the epoch holding the lock

    def __enter__(self) -> None:
        frame = sys._getframe(1)
        if not self._lock.acquire(blocking=False):
            if self.busy():
                raise DataFlowReentrantError(
                    f"{self._owner} is not reentrant: it is already being iterated. Finish or "
                    f"close the first iterator before starting another, or build a second flow."
                )
            self._lock.acquire(blocking=False)  # a hold left behind: this epoch's now
        self._frame = frame

    def __exit__(self, *exc: object) -> None:
        self._frame = None  # first: a hold without a frame is one left behind
        self._lock.release()

    def busy(self) -> bool:
        """Whether a live epoch holds the guard now: one whose frame is running in some
        thread or suspended in its generator. Cheap when the guard is free; a held guard
        costs a look at every thread's stack and, if need be, a search of the garbage
        collector's objects (a path for errors only). A guard held by no named frame is given
        ``_SETTLE_S`` for another thread to name its own (it is between its acquire and that
        step) before it counts as left behind."""
        frame = self._frame
        deadline = time.monotonic() + _SETTLE_S
        while frame is None and self._lock.locked() and time.monotonic() < deadline:
            time.sleep(0.001)  # another thread may be between its acquire and naming its frame
            frame = self._frame
        if frame is None or not self._lock.locked():
            return False
        if _on_a_stack(frame) or _suspended_in_a_generator(frame):
            return True
        self._frame = None  # left behind: do not keep the finished frame's locals alive
        return False

    def __getstate__(self) -> str:
        return self._owner

    def __setstate__(self, owner: str) -> None:
        self.__init__(owner)  # type: ignore[misc]


def _on_a_stack(frame: types.FrameType) -> bool:
    for top in sys._current_frames().values():
        f: types.FrameType | None = top
        while f is not None:
            if f is frame:
                return True
            f = f.f_back
    return False


def _suspended_in_a_generator(frame: types.FrameType) -> bool:
    referrers: list[Any] = gc.get_referrers(frame)
    return any(getattr(r, "gi_frame", None) is frame for r in referrers)
