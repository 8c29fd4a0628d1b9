"""The tasks of a parallel map (:class:`~._map_base.ParallelMapBase`): submitting chunks of
the upstream to the workers and taking their results back, for the passes
(:mod:`._map_passes`).

- **submitting** (:func:`fill`): chunks of ``tuner.chunk`` datapoints, tagged ``(epoch,
  seq)``, while the datapoints in flight and in the reorder buffer leave room within
  ``buffer_size`` (and, before the first result, no more than the probe's tasks); each is
  noted in the map's :class:`~._map_state.TaskLedger` and keyed for item RNGs
  (:func:`rng_key`).
- **results** (:func:`take_result`): a stale epoch's result or error is dropped, an error
  raised as the user's exception, an ordered map's early results held until their turn;
  released results go to the map's ``_outputs`` and the ledger (:func:`release`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

from . import _messages as msg

if TYPE_CHECKING:
    from ._map_base import ParallelMapBase, RngKey

__all__ = ["fill", "release", "rng_key", "submit_task", "take_result"]


def rng_key(m: ParallelMapBase, epoch: int, first_index: int) -> RngKey:
    if not m.item_rng or m._base is None:
        return None
    entropy, base_key = m._base
    base = (entropy, (*base_key, *m.__dict__.get("_shard_key", ())))
    return (base, epoch if m.strict else 0, first_index)


def submit_task(m: ParallelMapBase, chunk: list[Any], epoch: int, first_index: int) -> None:
    seq = m._seq
    m._submit((epoch, seq), chunk, rng_key(m, epoch, first_index))
    m._flight[(epoch, seq)] = n = len(chunk)
    m._flight_items += n
    m._ledger.submitted(seq, chunk, first_index)
    m._seq = seq + 1
    m._inflight += 1


def fill(m: ParallelMapBase, source: Iterator[Any], epoch: int) -> bool:
    """Submit tasks while there is room; False once ``source`` is exhausted. Results held in
    the reorder buffer count against the room, so ``buffer_size`` bounds memory (in
    datapoints; a task is sent only if it fits whole, or when nothing is in flight)."""
    tuner, limit = m._tuner, m.buffer_size
    while True:
        size = tuner.chunk
        held = m._flight_items + m._pending_items
        if held and held + size > limit:
            return True
        if m._probe and m._inflight >= m._probe:
            return True  # the first result sizes the rest (see ParallelMapBase.__init__)
        chunk = list(islice(source, size))
        if not chunk:
            return False
        first = m._index
        m._index = first + len(chunk)
        submit_task(m, chunk, epoch, first)


def take_result(m: ParallelMapBase, epoch: int) -> bool:
    """Receive one result into ``m._ready``; False if it was stale (older epoch)."""
    task_id, kind, payload = m._receive()
    m._inflight -= 1
    m._probe = 0
    size = m._flight.pop(task_id, 0) if task_id is not None else 0
    m._flight_items -= size
    if task_id is not None and task_id[0] != epoch:
        return False  # an abandoned pass's result or error: dropped
    if kind == msg.ERROR:
        raise msg.error_for(type(m).__name__, payload)
    seq = task_id[1] if task_id is not None else -1
    if not m.ordered:
        release(m, seq, kind, payload)
        return True
    pending = m._pending
    pending[seq] = (kind, payload, size)
    m._pending_items += size
    while m._want in pending:
        kind, payload, size = pending.pop(m._want)
        m._pending_items -= size
        release(m, m._want, kind, payload)
        m._want += 1
    return True


def release(m: ParallelMapBase, seq: int, kind: bytes, payload: Any) -> None:
    skip, m._skip = m._skip, 0
    m._ledger.released(seq, m._outputs(kind, payload, skip))
    m._ledger.prune(m._unyielded_units())
