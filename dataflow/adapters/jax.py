"""JAX adapter: batches placed on devices ahead of use.

``import dataflow.adapters.jax`` imports jax (an optional extra: ``dataflow-ml[jax]``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from ..base import close_iterator
from ..ops._batch import epoch_stacked_by
from ._jax_place import Placer, is_array_leaf
from ._require import require

jax = require("jax", "jax", "dataflow.adapters.jax")

__all__ = ["prefetch_to_device"]

_BATCH, _ERROR, _END = 0, 1, 2
_DONE = object()
_JOIN_S = 1.0


def prefetch_to_device(iterable: Iterable[Any], size: int = 2, sharding: Any = None) -> Iterator[Any]:
    """Yield the batches of ``iterable`` with their numpy arrays already on device.

    A background thread iterates ``iterable`` and places each batch (``jax.device_put``
    semantics), at most ``size`` batches ahead of the one the consumer holds, so reading and
    transferring overlap with the consumer's work. ``sharding`` (a ``jax.sharding.Sharding``
    or a device) is where the arrays go; ``None`` places them on the default device of the
    calling thread, uncommitted, as ``jax.device_put`` does. Batches are pytrees (lists,
    tuples, dicts) whose numeric numpy leaves are transferred; strings and other leaves pass
    through unchanged. Order is kept. An exception raised by ``iterable`` (or by a transfer)
    is raised in the consumer, as itself, after every batch before it. Leaving the loop
    early (``break``, an exception, closing the iterator) stops and joins the thread and
    closes ``iterable``'s iterator.

    On the CPU backend XLA uses a 64-byte aligned numpy array as it is and copies any other;
    large arrays are therefore copied into pooled aligned memory before the transfer, and when
    ``iterable`` is a plain :class:`~dataflow.BatchData` (``df.batch(n)``) its batches are
    stacked straight into that memory instead (no copy).
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"prefetch_to_device: size must be an int >= 1, got {size!r}")
    return _prefetch(iterable, size, sharding)


def _prefetch(iterable: Iterable[Any], size: int, sharding: Any) -> Iterator[Any]:
    place = Placer(sharding)  # resolved here, in the consumer's thread
    # an epoch of a DataFlow begins in the consumer's thread; a plain BatchData stacks its
    # batches straight into memory the placer aligned (no copy before the transfer)
    source = epoch_stacked_by(iterable, place.stack) if place.aligns else iter(iterable)
    done: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()  # (kind, batch or exception)
    room: queue.SimpleQueue[bool] = queue.SimpleQueue()  # one True per batch it may read ahead
    for _ in range(size):
        room.put(True)
    stop = threading.Event()
    thread = threading.Thread(
        target=_feed, args=(source, place, done, room, stop), name="dataflow-jax-prefetch", daemon=True
    )
    thread.start()
    try:
        while True:
            kind, value = done.get()
            if kind == _BATCH:
                room.put(True)  # the thread may read the next one while this one is used
                yield value
            elif kind == _ERROR:
                raise value
            else:
                return
    finally:
        stop.set()
        room.put(False)  # wakes the thread if it waits for room
        thread.join(_JOIN_S)  # a thread stuck in the source's next() is left as a daemon


def _feed(
    source: Iterator[Any],
    place: Placer,
    done: queue.SimpleQueue[tuple[int, Any]],
    room: queue.SimpleQueue[bool],
    stop: threading.Event,
) -> None:
    """The thread: read, place, hand over; always ends with an END or ERROR item."""
    end: tuple[int, Any] = (_END, None)
    tree_map = jax.tree_util.tree_map

    def put(x: Any) -> Any:
        return place(x) if is_array_leaf(x) else x

    try:
        while room.get() and not stop.is_set():
            batch = next(source, _DONE)
            if batch is _DONE:
                break
            done.put((_BATCH, tree_map(put, batch)))
    except BaseException as e:
        end = (_ERROR, e)
    finally:
        try:
            close_iterator(source)
        finally:
            done.put(end)
