"""A bounded FIFO between producer threads and one consumer that a Ctrl-C cannot jam:
:class:`BoundedQueue`."""

from __future__ import annotations

import queue
from typing import Generic, TypeVar

__all__ = ["BoundedQueue"]

T = TypeVar("T")


class BoundedQueue(Generic[T]):
    """At most ``maxsize`` items, first in first out, for producer threads and one consumer.

    ``queue.Queue`` takes its lock in Python code (``Condition.__enter__``), and CPython
    raises a pending ``KeyboardInterrupt`` when a Python function returns: a Ctrl-C that lands
    right after the consumer took the lock leaves it held, and every producer and the
    consumer's own ``close()`` then wait on it forever. Here every blocking step is one call
    into a C ``queue.SimpleQueue``: items travel in one, and *slots* (one token per free
    place) in another; ``put`` takes a slot then adds the item, ``get`` takes an item then
    returns a slot. A Ctrl-C between the two steps of a ``get`` loses a slot at worst; a
    consumer whose wait times out while both queues are empty (every slot lost or in a
    producer's hands for that long) adds one back, so a lost slot can slow the queue but
    never stop it. Thread-safe for any number of producers and consumers; ``maxsize`` is
    exact except right after such a repair (one more).
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: queue.SimpleQueue[T] = queue.SimpleQueue()
        self._slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(maxsize):
            self._slots.put(None)

    def put(self, item: T, timeout: float | None = None) -> None:
        """Add ``item``, waiting up to ``timeout`` s for room (``None``: forever); raises
        ``queue.Full`` if there was none."""
        try:
            self._slots.get(timeout=timeout)
        except queue.Empty:
            raise queue.Full from None
        self._items.put(item)

    def get(self, timeout: float | None = None) -> T:
        """The oldest item, waiting up to ``timeout`` s (``None``: forever); raises
        ``queue.Empty`` if none came."""
        try:
            item = self._items.get(timeout=timeout)
        except queue.Empty:
            if self._slots.empty() and self._items.empty():  # a slot was lost: put one back
                self._slots.put(None)
            raise
        self._slots.put(None)
        return item

    def get_nowait(self) -> T:
        """The oldest item if there is one, else ``queue.Empty``."""
        item = self._items.get_nowait()
        self._slots.put(None)
        return item

    def qsize(self) -> int:
        return self._items.qsize()
