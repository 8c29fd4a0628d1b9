"""How datapoints cross Ray: pickled by us, large buffers left to Ray's object store.

Ray serialises every numpy array out of band, each with its own bookkeeping, which costs
more than the data for small arrays (a batch of 64 ``[int, float32[10]]`` is 128 of them).
:func:`pack` pickles a chunk with protocol 5 in one go: buffers under
:data:`OOB_MIN_BYTES` stay in the pickle, larger ones travel beside it as uint8 arrays,
which Ray writes into its object store once and hands the receiver as read-only views
(zero-copy). :func:`unpack` rebuilds the chunk on those views, so large arrays are still
never copied on receive. What plain pickle refuses (lambdas, local classes in datapoints)
goes through Ray's cloudpickle, as Ray would have sent it.

A worker on the consumer's own node is given a shared-memory ring instead (the one the
process runners use, :mod:`dataflow.parallel._shm`): its large buffers are copied there
(one memcpy) and travel as descriptors; the consumer rebuilds them as views of the ring,
each freed for reuse when the consumer drops it. A buffer that finds no room goes to Ray's
store as before. For ``copy=True``, :func:`owned` replaces the read-only arrays of a
received datapoint with private, writable copies.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from ..parallel._shm import RingReader, RingWriter

__all__ = ["OOB_MIN_BYTES", "Packed", "approx_size", "owned", "pack", "unpack"]

#: Ray's own threshold for putting an object in the store instead of the reply
OOB_MIN_BYTES = 100 * 1024

#: ``(pickle, large buffers)``: each an array for Ray's store, or a ring descriptor
Packed = tuple[bytes, list[Any]]


def pack(obj: Any, ring: RingWriter | None = None) -> Packed:
    """``obj`` pickled, buffers of :data:`OOB_MIN_BYTES` and more kept apart (not copied),
    or copied into ``ring`` where it has room."""
    buffers: list[Any] = []

    def keep_large(buf: pickle.PickleBuffer) -> bool:
        raw = buf.raw()
        if raw.nbytes < OOB_MIN_BYTES:
            return True  # in band
        desc = ring.write(raw) if ring is not None else None
        buffers.append(desc if desc is not None else np.frombuffer(raw, dtype=np.uint8))
        return False

    try:
        return pickle.dumps(obj, protocol=5, buffer_callback=keep_large), buffers
    except Exception:  # lambdas, local classes: what Ray itself would have sent (cloudpickle)
        from ray import cloudpickle

        buffers.clear()
        return cloudpickle.dumps(obj, protocol=5, buffer_callback=keep_large), buffers  # type: ignore[no-untyped-call]


def unpack(packed: Packed, rings: RingReader | None = None) -> Any:
    """The object :func:`pack` was given; its large arrays view the received buffers (and
    ``rings``, the consumer's side of the ring the worker wrote into)."""
    body, buffers = packed
    if rings is not None:
        buffers = [rings.buffer(b) if isinstance(b, tuple) else b for b in buffers]
    return pickle.loads(body, buffers=buffers)


def approx_size(obj: Any) -> int:
    """A cheap, deterministic estimate of ``obj``'s pickled size in bytes: arrays (anything
    with an integer ``nbytes``), bytes and strings by length, containers by their items,
    other objects a few dozen bytes."""
    nbytes = getattr(obj, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes + 100
    if isinstance(obj, (bytes, bytearray, str)):
        return len(obj) + 40
    if isinstance(obj, (list, tuple)):
        return 40 + sum(approx_size(x) for x in obj)
    if isinstance(obj, dict):
        return 40 + sum(approx_size(k) + approx_size(v) for k, v in obj.items())
    return 32


def owned(obj: Any) -> Any:
    """``obj`` with every read-only numpy array (in lists, tuples and dicts, nested) copied."""
    if isinstance(obj, np.ndarray):
        return obj if obj.flags.writeable else obj.copy()
    if isinstance(obj, list):
        return [owned(x) for x in obj]
    if isinstance(obj, dict):
        out = {k: owned(v) for k, v in obj.items()}
        if type(obj) is not dict:
            try:
                return type(obj)(out)
            except TypeError:  # e.g. defaultdict: its first argument is the factory
                pass
        return out
    if isinstance(obj, tuple):
        items = [owned(x) for x in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return obj
