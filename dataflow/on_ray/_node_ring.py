"""A shared-memory ring for a Ray actor that runs on the consumer's node: :func:`node_ring`.

Large buffers of what such an actor returns are copied into the ring (one memcpy) instead
of being put into Ray's object store, and travel as descriptors (see :mod:`._wire`). The
actor must have ``node()`` (its Ray node id) and ``attach_ring(path)`` (``None`` once it has
mapped the ring, else an error record) methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..parallel._shm import RingReader
from ._connect import ray_module

__all__ = ["node_ring"]


def node_ring(
    stage: str, actor: Any, ring_bytes: int, copy: bool, ask: Callable[[Any, str], Any]
) -> RingReader | None:
    """A ring of ``ring_bytes`` for ``actor`` if it runs on this node; ``None`` elsewhere,
    without shared memory (``ring_bytes`` 0, ``/dev/shm`` too small: warned once) or when the
    actor cannot map it (its large buffers then go through Ray's object store).
    ``ask(ref, doing)`` waits for the answer ``ref`` of the actor (raising its own errors)."""
    if not ring_bytes:
        return None
    ray = ray_module(stage)
    if ask(actor.node.remote(), "to name its node") != ray.get_runtime_context().get_node_id():
        return None
    rings = RingReader.create(stage, 1, ring_bytes, copy)
    if rings is None:
        return None
    try:
        failed = ask(actor.attach_ring.remote(rings.paths[0]), "to map its ring")
    except BaseException:
        rings.close()
        raise
    if failed is not None:  # e.g. /dev/shm not shared with the actor
        rings.close()
        return None
    return rings
