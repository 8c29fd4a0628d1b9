"""A process map that batches in its workers: :class:`MultiProcessMapAndBatchDataZMQ`.

Everything but batching (workers, epochs, ``strict``, checkpoints, ``"auto"``) is
:class:`~dataflow.parallel._maps.MultiProcessMapDataZMQ`'s; see :mod:`dataflow.parallel._maps`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._checks import check_int
from ..base import DataFlow
from ..ops._stack import collate
from . import _messages as msg
from ._maps import MultiProcessMapDataZMQ

__all__ = ["MultiProcessMapAndBatchDataZMQ"]


class MultiProcessMapAndBatchDataZMQ(MultiProcessMapDataZMQ):
    """Map ``batch_size`` datapoints at a time in a worker and batch them there.

    Each task is a chunk of ``batch_size`` upstream datapoints; the worker maps them and,
    when none was dropped, batches them itself (as :class:`~dataflow.BatchData` would), so
    only one message per batch crosses processes. Chunks with dropped datapoints come back
    unbatched and are topped up from later ones here, so every batch has ``batch_size``
    datapoints. At the end of a strict pass the rest is produced if ``remainder`` else
    dropped. ``len`` is ``len(ds) // batch_size`` (``ceil`` with ``remainder``).
    ``buffer_size`` (default ``3 * batch_size``) counts datapoints in flight. ``num_proc`` and
    ``buffer_size`` may be ``"auto"`` as for :class:`MultiProcessMapDataZMQ` (``"auto"``
    buffers hold at least two batches per worker), and ``ram_budget=`` bounds them the same way.
    """

    _state_kind = "ParallelMapAndBatch"

    def __init__(
        self,
        ds: DataFlow[Any],
        num_proc: int | str,
        map_func: Callable[..., Any],
        batch_size: int,
        buffer_size: int | str | None = None,
        strict: bool = False,
        remainder: bool = False,
        **kwargs: Any,
    ) -> None:
        bs = check_int(type(self).__name__, "batch_size", batch_size)
        buffer_size = 3 * bs if buffer_size is None else buffer_size
        super().__init__(ds, num_proc, map_func, buffer_size, strict, chunk=bs, **kwargs)
        self._batch_size = self.batch_size = bs
        self.remainder = bool(remainder)
        self._carry: list[Any] = []

    def __len__(self) -> int:
        size = len(self.ds)
        return -(-size // self.batch_size) if self.remainder else size // self.batch_size

    def _clear_epoch_state(self) -> None:
        super()._clear_epoch_state()
        self._carry = []

    def _outputs(self, kind: bytes, payload: Any, skip: int) -> int:
        carry, bs = self._carry, self.batch_size
        if kind == msg.BATCH:
            if not carry and not skip:
                self._ready.append(payload)
                return bs
            payload = _unbatch(payload)  # datapoints carried from a chunk with drops go first
        payload = payload[skip:]
        carry.extend(payload)
        while len(carry) >= bs:
            self._ready.append(collate(type(self).__name__, carry[:bs]))
            del carry[:bs]
        return len(payload)

    def _unyielded_units(self) -> int:
        return sum(_batch_len(b) for b in self._ready) + len(self._carry)

    def _finish_pass(self) -> None:
        if self._carry and self.remainder:
            self._ready.append(collate(type(self).__name__, self._carry))
        self._carry = []


def _batch_len(batch: Any) -> int:
    first = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    return len(first)


def _unbatch(batch: Any) -> list[Any]:
    """The datapoints of a batch made by ``collate`` (rows of its components)."""
    if isinstance(batch, dict):
        n = len(next(iter(batch.values())))
        return [{k: v[i] for k, v in batch.items()} for i in range(n)]
    n = len(batch[0])
    return [[c[i] for c in batch] for i in range(n)]
