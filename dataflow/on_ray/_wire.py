"""How datapoints cross Ray: pickled by us, large buffers left to Ray's object store.

Ray serialises every numpy array out of band, each with its own bookkeeping, which costs
more than the data for small arrays (a batch of 64 ``[int, float32[10]]`` is 128 of them).
:func:`pack` pickles a chunk with protocol 5 in one go: buffers under
:data:`OOB_MIN_BYTES` stay in the pickle, larger ones travel beside it as uint8 arrays,
which Ray writes into its object store once and hands the receiver as read-only views
(zero-copy). :func:`unpack` rebuilds the chunk on those views, so large arrays are still
never copied on receive. What plain pickle refuses (lambdas, local classes in datapoints)
goes through Ray's cloudpickle, as Ray would have sent it.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

__all__ = ["OOB_MIN_BYTES", "Packed", "approx_size", "pack", "unpack"]

#: Ray's own threshold for putting an object in the store instead of the reply
OOB_MIN_BYTES = 100 * 1024

#: ``(pickle, large buffers)``
Packed = tuple[bytes, list[np.ndarray]]


def pack(obj: Any) -> Packed:
    """``obj`` pickled, buffers of :data:`OOB_MIN_BYTES` and more kept apart (not copied)."""
    buffers: list[np.ndarray] = []

    def keep_large(buf: pickle.PickleBuffer) -> bool:
        raw = buf.raw()
        if raw.nbytes < OOB_MIN_BYTES:
            return True  # in band
        buffers.append(np.frombuffer(raw, dtype=np.uint8))
        return False

    try:
        return pickle.dumps(obj, protocol=5, buffer_callback=keep_large), buffers
    except Exception:  # lambdas, local classes: what Ray itself would have sent (cloudpickle)
        from ray import cloudpickle

        buffers.clear()
        return cloudpickle.dumps(obj, protocol=5, buffer_callback=keep_large), buffers  # type: ignore[no-untyped-call]


def unpack(packed: Packed) -> Any:
    """The object :func:`pack` was given; its large arrays view the received buffers."""
    body, buffers = packed
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
