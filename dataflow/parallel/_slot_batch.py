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

from ..ops._stack import stack_component, stack_into, stackable
from ._messages import OOB_MIN_BYTES
from ._shm import RingWriter

__all__ = ["ring_stacker"]


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
