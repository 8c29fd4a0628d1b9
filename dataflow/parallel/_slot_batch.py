"""Batches assembled straight in a worker's shared-memory ring.

:class:`~dataflow.MultiProcessMapAndBatchDataZMQ` batches in its workers. Stacking a large
component into fresh memory and then copying it into the ring (:meth:`RingWriter.write`)
touches every byte twice; :func:`ring_stacker` instead stacks it into space reserved in the
ring (:meth:`RingWriter.reserve`), which the send then hands over as it is: one copy, the
stacking itself, and the consumer receives a view of the ring as before.

Only components that are numpy arrays of one type, shape and dtype, at least
:data:`~dataflow.parallel._messages.OOB_MIN_BYTES` in all, are stacked this way; the result
is what :func:`~dataflow.ops._stack.stack_component` gives (same dtype, shape, values, C
order). Everything else, errors included, goes through ``stack_component``; so does a
component for which the ring has no room.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ops._stack import collate, stack_component, stack_into, stackable
from . import _messages as msg
from ._messages import OOB_MIN_BYTES
from ._shm import RingWriter
from ._worker_link import WorkerLink

__all__ = ["ring_stacker", "send_batch"]


def send_batch(link: WorkerLink, stage: str, task: tuple[Any, list[Any], float, float]) -> None:
    """Collate the datapoints of ``task = (task_id, datapoints, busy, t0)`` (large components
    straight into ``link``'s ring) and send ``(task_id, batch, busy, t0)`` as one BATCH
    message (``busy``: the map's time; ``t0``: its start, for traces)."""
    task_id, out, busy, t0 = task
    ring = link.ring
    if ring is None:
        link.send(msg.BATCH, (task_id, collate(stage, out), busy, t0))
        return
    try:
        link.send(msg.BATCH, (task_id, collate(stage, out, stack=ring_stacker(ring)), busy, t0))
    finally:
        ring.release_reserved()  # what was not sent (an error, or no room to send it in)


def ring_stacker(ring: RingWriter) -> Callable[[str, Any, Sequence[Any]], Any]:
    """A ``stack`` for :func:`~dataflow.ops._stack.collate` that puts large array components
    in ``ring`` space. The caller sends the batch through ``ring`` and then calls
    :meth:`RingWriter.release_reserved` (also when collating or sending failed)."""

    def stack(stage: str, key: Any, values: Sequence[Any]) -> Any:
        first = stackable(values, OOB_MIN_BYTES)
        if first is not None:
            space = ring.reserve(first.nbytes * len(values))
            if space is not None:
                return stack_into(values, space.view(first.dtype).reshape((len(values), *first.shape)))
        return stack_component(stage, key, values)

    return stack

