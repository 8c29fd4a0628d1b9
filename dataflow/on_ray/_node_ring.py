"""A shared-memory ring for a Ray actor that runs on the consumer's node: :func:`node_ring`
on the consumer, :class:`RingActor` in the actor.

Large buffers of what such an actor returns are copied into the ring (one memcpy) instead
of being put into Ray's object store, and travel as descriptors (see :mod:`._wire`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..parallel import _messages as msg
from ..parallel._shm import RingReader, RingWriter
from ._connect import ray_module

__all__ = ["RingActor", "node_ring", "release"]


class RingActor:
    """What every actor of ours answers the consumer: its pid, its node, and the ring it
    writes large buffers into once :meth:`attach_ring` mapped it (``where`` names the actor
    in errors)."""

    ring: RingWriter | None = None
    where = ""

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        """The Ray node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def attach_ring(self, path: str) -> Any:
        """Map the shared-memory ring the consumer made for this actor (on its node); large
        buffers go there from now on. ``None``, or an error record if it cannot be mapped."""
        try:
            self.ring = RingWriter(path, 0)
        except BaseException as e:
            return msg.capture_error(e, f"mapping the shared-memory ring in {self.where}")
        return None


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


def release(stage: str, actors: list[Any], rings: list[RingReader | None]) -> None:
    """Close the consumer's side of the rings (arrays it still holds keep their part mapped)
    and kill the actors (nothing to kill once Ray was shut down: they went with it)."""
    for ring in rings:
        if ring is not None:
            ring.close()
    ray = ray_module(stage) if actors else None
    if ray is not None and ray.is_initialized():
        for actor in actors:
            ray.kill(actor, no_restart=True)
