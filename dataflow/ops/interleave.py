"""Round-robin over sub-flows: :class:`InterleaveData` (the ``interleave`` counterpart)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from .._checks import check_int
from ..base import DataFlow, ProxyDataFlow, close_iterator
from ..errors import LengthUnknownError

__all__ = ["InterleaveData"]


class InterleaveData(ProxyDataFlow):
    """Map each upstream element to a sub-flow and interleave ``cycle_length`` of them.

    ``func(dp)`` returns a DataFlow (it is ``reset_state()``-ed here) or any iterable of
    datapoints. Up to ``cycle_length`` sub-flows are open at once; ``block_length``
    datapoints are taken from each in turn, round-robin. When a sub-flow ends, the next
    upstream element opens a new one in its slot. The order is deterministic (as tf.data's
    ``interleave`` with ``deterministic=True``). Typical use: one upstream element per file,
    ``func`` reads the file, and records of several files are mixed.

    ``len`` is unknown. Reentrant when the upstream is; sub-flows are closed when their
    iterator ends or this flow's iterator is closed.
    """

    def __init__(
        self,
        ds: DataFlow,
        func: Callable[[Any], Any],
        cycle_length: int = 2,
        block_length: int = 1,
    ) -> None:
        super().__init__(ds)
        stage = type(self).__name__
        if not callable(func):
            raise TypeError(f"{stage}: func must be callable, got {type(func).__name__} ({func!r})")
        self.func = func
        self.cycle_length = check_int(stage, "cycle_length", cycle_length)
        self.block_length = check_int(stage, "block_length", block_length)

    def __len__(self) -> int:
        raise LengthUnknownError("InterleaveData: the total length depends on the sub-flows")

    def _open(self, dp: Any) -> tuple[Any, Iterator[Any]]:
        sub = self.func(dp)
        if hasattr(sub, "reset_state"):
            sub.reset_state()
        try:
            return sub, iter(sub)
        except TypeError:
            raise TypeError(
                f"InterleaveData: func must return a DataFlow or an iterable, got "
                f"{type(sub).__name__} for element {dp!r}"
            ) from None

    def __iter__(self) -> Iterator[Any]:
        upstream = iter(self.ds)
        active: deque[tuple[Any, Iterator[Any]]] = deque()
        try:
            for dp in upstream:
                active.append(self._open(dp))
                if len(active) == self.cycle_length:
                    break
            while active:
                sub, itr = active[0]
                taken = 0
                for item in itr:
                    yield item
                    taken += 1
                    if taken == self.block_length:
                        active.rotate(-1)
                        break
                else:  # exhausted: the next element opens in the same slot, as in tf.data
                    _close(sub, itr)
                    nxt = next(upstream, _END)
                    if nxt is _END:
                        active.popleft()
                    else:
                        active[0] = self._open(nxt)
                        active.rotate(-1)
        finally:
            for sub, itr in active:
                _close(sub, itr)
            close_iterator(upstream)


def _close(sub: Any, itr: Iterator[Any]) -> None:
    """Close a sub-flow's iterator and, if it is a DataFlow, the flow itself."""
    close_iterator(itr)
    close_iterator(sub)


_END = object()
