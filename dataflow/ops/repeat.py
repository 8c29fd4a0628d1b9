"""Changing how many datapoints an epoch has: :class:`RepeatedData`, :class:`RepeatedDataPoint`,
:class:`FixedSizeData`, :class:`TakeData`."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from .._checks import check_int
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard, close_iterator
from ..errors import LengthUnknownError

__all__ = ["FixedSizeData", "RepeatedData", "RepeatedDataPoint", "TakeData"]


def _empty_epoch(stage: str, ds: DataFlow) -> ValueError:
    return ValueError(
        f"{stage}: the upstream {type(ds).__name__} produced an empty epoch; repeating it "
        f"would never yield a datapoint (the loop would hang), so this is an error"
    )


class RepeatedData(ProxyDataFlow):
    """``num`` upstream epochs as one epoch; ``num=-1`` repeats forever.

    ``len == len(ds) * num``; with ``num=-1`` the length is unknown (infinite) and ``len``
    raises :class:`~dataflow.errors.LengthUnknownError`. An upstream epoch that yields
    nothing raises ``ValueError`` instead of spinning forever. Reentrant when the upstream is.
    """

    def __init__(self, ds: DataFlow, num: int) -> None:
        super().__init__(ds)
        self.num = check_int(type(self).__name__, "num", num, minimum=1, allow=(-1,))

    def __len__(self) -> int:
        if self.num == -1:
            raise LengthUnknownError("RepeatedData(num=-1) is infinite and has no length")
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        n = 0
        while self.num == -1 or n < self.num:
            produced = False
            for dp in self.ds:
                produced = True
                yield dp
            if not produced:
                raise _empty_epoch(type(self).__name__, self.ds)
            n += 1


class RepeatedDataPoint(ProxyDataFlow):
    """Produce each datapoint ``num`` times in a row (the same object). ``len == len(ds) * num``."""

    def __init__(self, ds: DataFlow, num: int) -> None:
        super().__init__(ds)
        self.num = check_int(type(self).__name__, "num", num)

    def __len__(self) -> int:
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        num = self.num
        for dp in self.ds:
            for _ in range(num):
                yield dp


class FixedSizeData(ProxyDataFlow):
    """Epochs of exactly ``size`` datapoints, restarting the upstream when it ends.

    With ``keep_state=True`` the next epoch continues where the previous stopped (upstream
    ``1..5``, size 3: ``1 2 3 | 4 5 1 | 2 3 4``); with ``False`` each epoch starts a fresh
    upstream epoch (``1 2 3 | 1 2 3``). ``len == size``. Not reentrant (the upstream iterator
    is shared between epochs). An upstream that yields nothing raises ``ValueError``.
    """

    def __init__(self, ds: DataFlow, size: int, keep_state: bool = True) -> None:
        super().__init__(ds)
        self._size = check_int(type(self).__name__, "size", size)
        self._keep = bool(keep_state)
        self._itr: Iterator[Any] | None = None
        self._guard = ReentrancyGuard(type(self).__name__)

    def __len__(self) -> int:
        return self._size

    def reset_state(self) -> None:
        super().reset_state()
        self._itr = None

    def __iter__(self) -> Iterator[Any]:
        with self._guard:
            itr = self._itr if self._itr is not None else iter(self.ds)
            self._itr = None
            for _ in range(self._size):
                try:
                    dp = next(itr)
                except StopIteration:
                    itr = iter(self.ds)
                    try:
                        dp = next(itr)
                    except StopIteration:
                        raise _empty_epoch(type(self).__name__, self.ds) from None
                yield dp
            if self._keep:
                self._itr = itr
            else:
                close_iterator(itr)


class TakeData(ProxyDataFlow):
    """At most the first ``n`` datapoints of each upstream epoch (the ``take(n)`` counterpart).

    The upstream iterator is closed as soon as ``n`` were produced, so an infinite or
    expensive upstream stops early. ``len`` is ``min(n, len(ds))``; when the upstream's
    length is unknown it is ``n``, an upper bound. Reentrant when the upstream is.
    """

    def __init__(self, ds: DataFlow, n: int) -> None:
        super().__init__(ds)
        self.n = check_int(type(self).__name__, "n", n, minimum=0)

    def __len__(self) -> int:
        try:
            return min(self.n, len(self.ds))
        except (TypeError, NotImplementedError):
            return self.n

    def __iter__(self) -> Iterator[Any]:
        itr = iter(self.ds)
        try:
            yield from islice(itr, self.n)
        finally:
            close_iterator(itr)
