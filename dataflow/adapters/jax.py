"""JAX adapter: batches placed on devices ahead of use.

``import dataflow.adapters.jax`` imports jax (an optional extra: ``dataflow-ml[jax]``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ._require import require

jax = require("jax", "jax", "dataflow.adapters.jax")

__all__ = ["prefetch_to_device"]


def _is_array_leaf(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "iufcb"


def prefetch_to_device(iterable: Iterable[Any], size: int = 2, sharding: Any = None) -> Iterator[Any]:
    """Yield the batches of ``iterable`` with their numpy arrays already on device.

    ``jax.device_put`` is asynchronous, so keeping ``size`` batches in flight overlaps the
    host-to-device copies with the computation on earlier batches. ``sharding`` (a
    ``jax.sharding.Sharding`` or a device) is passed to ``device_put``; ``None`` places on the
    default device. Batches are pytrees (lists, tuples, dicts) whose numeric numpy leaves are
    transferred; strings and other leaves pass through unchanged. Order is kept.
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"prefetch_to_device: size must be an int >= 1, got {size!r}")
    return _prefetch(iterable, size, sharding)


def _prefetch(iterable: Iterable[Any], size: int, sharding: Any) -> Iterator[Any]:
    def put(batch: Any) -> Any:
        return jax.tree_util.tree_map(
            lambda x: jax.device_put(x, sharding) if _is_array_leaf(x) else x, batch
        )

    queue: deque[Any] = deque()
    source = iter(iterable)
    for batch in source:
        queue.append(put(batch))
        if len(queue) >= size:
            break
    while queue:
        out = queue.popleft()
        nxt = next(source, _END)
        if nxt is not _END:
            queue.append(put(nxt))
        yield out


_END = object()
