"""The guard that makes a second concurrent epoch of a stateful flow fail loudly
(re-exported by :mod:`dataflow.base`)."""

from __future__ import annotations

import threading

from .errors import DataFlowReentrantError

__all__ = ["ReentrancyGuard"]


class ReentrancyGuard:
    """Makes a second concurrent ``__iter__`` of a stateful flow fail loudly.

    Use inside the generator: ``with self._guard: yield from ...``. The guard is released
    when the epoch ends or when the iterator is closed or garbage-collected.
    """

    __slots__ = ("_lock", "_owner")

    def __init__(self, owner: str) -> None:
        self._lock = threading.Lock()
        self._owner = owner

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise DataFlowReentrantError(
                f"{self._owner} is not reentrant: it is already being iterated. Finish or "
                f"close the first iterator before starting another, or build a second flow."
            )

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def __getstate__(self) -> str:
        return self._owner

    def __setstate__(self, owner: str) -> None:
        self.__init__(owner)  # type: ignore[misc]
