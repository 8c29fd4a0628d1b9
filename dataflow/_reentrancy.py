"""The guard that makes a second concurrent epoch of a stateful flow fail loudly
(re-exported by :mod:`dataflow.base`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ._errors import DataFlowReentrantError

__all__ = ["ReentrancyGuard"]


class ReentrancyGuard:
    """Makes a second concurrent ``__iter__`` of a stateful flow fail loudly.

    Use inside the epoch's generator: ``with self._guard: yield from ...``. The guard is a lock
    taken when the ``with`` is entered and released when it is left: when the epoch ends, or
    when its iterator is closed or garbage-collected. While it is held, entering it again (in
    any thread) raises :class:`~dataflow._errors.DataFlowReentrantError`.

    A Ctrl-C cannot leave it held. ``with`` runs no Python code of its own between taking a
    lock and owning it, or between leaving the block and releasing it, as long as the take
    and the release are single C calls: so both are the lock's own methods, handed to ``with``
    by the two properties below (a ``KeyboardInterrupt`` is raised between bytecodes, never
    inside a C call). The check before the take is Python, and an interrupt there leaves
    nothing taken.
    """

    __slots__ = ("_lock", "_owner")

    def __init__(self, owner: str) -> None:
        self._lock = threading.Lock()
        self._owner = owner

    @property
    def __enter__(self) -> Callable[[], bool]:
        if self._lock.locked():
            raise DataFlowReentrantError(
                f"{self._owner} is not reentrant: it is already being iterated. Finish or "
                f"close the first iterator before starting another, or build a second flow."
            )
        # Free a moment ago: if another thread takes it in between, this waits for its epoch.
        return self._lock.acquire

    @property
    def __exit__(self) -> Callable[..., object]:
        return self._lock.__exit__  # releases, whatever the exception

    def busy(self) -> bool:
        """Whether an epoch holds the guard now."""
        return self._lock.locked()

    def __getstate__(self) -> str:
        return self._owner

    def __setstate__(self, owner: str) -> None:
        self.__init__(owner)  # type: ignore[misc]
