"""Changing how many datapoints an epoch has: :class:`RepeatedData`, :class:`RepeatedDataPoint`,
:class:`FixedSizeData`, :class:`TakeData`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from operator import itemgetter
from typing import Any

from .._checks import check_int
from .._errors import LengthUnknownError
from .._state_fields import decode_items, encode_items, int_field, position
from ..base import DataFlow, ProxyDataFlow, ReentrancyGuard, close_iterator

_second = itemgetter(1)

__all__ = ["FixedSizeData", "RepeatedData", "RepeatedDataPoint", "TakeData"]


def _empty_epoch(stage: str, ds: DataFlow[Any]) -> ValueError:
    return ValueError(
        f"{stage}: the upstream {type(ds).__name__} produced an empty epoch; repeating it "
        f"would never yield a datapoint (the loop would hang), so this is an error"
    )


def nothing() -> Iterator[Any]:
    """An epoch with nothing left: a generator, so that it counts as live until pulled."""
    yield from ()


def _counter(n: int, start: int) -> Iterator[int]:
    """An iterator over ``range(n)`` that has yielded ``start`` items (its position is the state)."""
    counter = iter(range(n))
    counter.__setstate__(start)  # type: ignore[attr-defined]
    return counter


class RepeatedData(ProxyDataFlow):
    """``num`` upstream epochs as one epoch; ``num=-1`` repeats forever.

    ``len == len(ds) * num``; with ``num=-1`` the length is unknown (infinite) and ``len``
    raises :class:`~dataflow._errors.LengthUnknownError`. An upstream epoch that yields
    nothing raises ``ValueError`` instead of spinning forever. Reentrant when the upstream is.
    State: how many upstream epochs of the current one are complete.
    """

    def __init__(self, ds: DataFlow[Any], num: int) -> None:
        super().__init__(ds)
        self.num = check_int(type(self).__name__, "num", num, minimum=1, allow=(-1,))

    def __len__(self) -> int:
        if self.num == -1:
            raise LengthUnknownError("RepeatedData(num=-1) is infinite and has no length")
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        done = self.__dict__.pop("_resume", None)
        self._done = done or 0
        return self._repeat(self._done, done is not None, iter(self.ds))

    def _repeat(self, n: int, resumed: bool, itr: Iterator[Any]) -> Iterator[Any]:
        num = self.num
        produced = resumed  # a resumed upstream epoch had produced before the checkpoint
        while True:
            for dp in itr:
                produced = True
                yield dp
            if not produced:
                raise _empty_epoch(type(self).__name__, self.ds)
            n += 1
            self._done = n
            if n == num:
                return
            produced = False
            itr = iter(self.ds)

    def _get_state(self, live: bool) -> dict[str, Any]:
        return {"done": self.__dict__.get("_done", 0) if live else 0}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        done = int_field(type(self).__name__, state, "done")
        if live:
            self._resume = done


class RepeatedDataPoint(ProxyDataFlow):
    """Produce each datapoint ``num`` times in a row (the same object). ``len == len(ds) * num``.

    State: the datapoint being repeated (codec-encoded) and how many copies are left."""

    def __init__(self, ds: DataFlow[Any], num: int) -> None:
        super().__init__(ds)
        self.num = check_int(type(self).__name__, "num", num)

    def __len__(self) -> int:
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        resume = self.__dict__.pop("_resume", None)
        self._rep = None if resume is None else (resume[0], iter(range(resume[1])))
        return self._points(self._rep, iter(self.ds))

    def _points(self, resume: tuple[Any, Iterator[int]] | None, itr: Iterator[Any]) -> Iterator[Any]:
        num = self.num
        if resume is not None:
            dp, copies = resume
            for _ in copies:
                yield dp
        for dp in itr:
            copies = iter(range(num))
            self._rep = (dp, copies)
            for _ in copies:
                yield dp

    def _get_state(self, live: bool) -> dict[str, Any]:
        rep = self.__dict__.get("_rep")
        if not live or rep is None:
            return {"left": 0}
        dp, copies = rep
        left = copies.__length_hint__()
        if not left:
            return {"left": 0}
        return {"left": left, "datapoint": encode_items(type(self).__name__, [dp], "repeated datapoint")}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        left = int_field(stage, state, "left", 0, self.num)
        if live and left:
            self._resume = (decode_items(stage, state, "datapoint")[0], left)


class FixedSizeData(ProxyDataFlow):
    """Epochs of exactly ``size`` datapoints, restarting the upstream when it ends.

    With ``keep_state=True`` the next epoch continues where the previous stopped (upstream
    ``1..5``, size 3: ``1 2 3 | 4 5 1 | 2 3 4``); with ``False`` each epoch starts a fresh
    upstream epoch (``1 2 3 | 1 2 3``). ``len == size``. Not reentrant (the upstream iterator
    is shared between epochs). An upstream that yields nothing raises ``ValueError``.
    """

    def __init__(self, ds: DataFlow[Any], size: int, keep_state: bool = True) -> None:
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
        self._counter = counter = _counter(self._size, self.__dict__.pop("_resume", 0))
        itr = self._itr if self._itr is not None else iter(self.ds)
        self._itr = None
        if position(counter, self._size) == self._size:  # resumed at the end of its epoch
            self._end_epoch(itr)
            return nothing()  # a generator: the epoch is live until pulled (see _iter_live)
        return self._fixed(counter, itr)

    def _end_epoch(self, itr: Iterator[Any]) -> None:
        if self._keep:
            self._itr = itr
        else:
            close_iterator(itr)

    def _fixed(self, counter: Iterator[int], itr: Iterator[Any]) -> Iterator[Any]:
        """The epoch ends as its last datapoint is taken, before it is yielded: whether the
        downstream then asks for more (and gets ``StopIteration``) or stops there, the kept
        upstream iterator is the same, as it is for an epoch resumed at its end."""
        last = self._size - 1
        with self._guard:
            for k in counter:
                try:
                    dp = next(itr)
                except StopIteration:
                    itr = iter(self.ds)
                    try:
                        dp = next(itr)
                    except StopIteration:
                        raise _empty_epoch(type(self).__name__, self.ds) from None
                if k == last:
                    self._end_epoch(itr)
                yield dp

    def _upstreams_live(self, live: bool) -> list[bool]:
        return [live or self._itr is not None]

    def _get_state(self, live: bool) -> dict[str, Any]:
        counter = self.__dict__.get("_counter")
        return {"position": position(counter, self._size) if live and counter is not None else 0}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        position = int_field(type(self).__name__, state, "position", 0, self._size)
        self._itr = None  # a kept upstream iterator is the upstream's own state now
        if live and position:
            self._resume = position


class TakeData(ProxyDataFlow):
    """At most the first ``n`` datapoints of each upstream epoch (the ``take(n)`` counterpart).

    The upstream iterator is closed as soon as ``n`` were produced, so an infinite or
    expensive upstream stops early. ``len`` is ``min(n, len(ds))``; when the upstream's
    length is unknown it is ``n``, an upper bound. Reentrant when the upstream is.
    State: how many were taken in the current epoch.
    """

    def __init__(self, ds: DataFlow[Any], n: int) -> None:
        super().__init__(ds)
        self.n = check_int(type(self).__name__, "n", n, minimum=0)

    def __len__(self) -> int:
        try:
            return min(self.n, len(self.ds))
        except (TypeError, NotImplementedError):
            return self.n

    def __iter__(self) -> Iterator[Any]:
        self._counter = counter = _counter(self.n, self.__dict__.pop("_resume", 0))
        return self._take(counter, iter(self.ds))

    def _take(self, counter: Iterator[int], itr: Iterator[Any]) -> Iterator[Any]:
        try:
            yield from map(_second, zip(counter, itr))  # counter first: never pulls one too many
        finally:
            close_iterator(itr)

    def _get_state(self, live: bool) -> dict[str, Any]:
        counter = self.__dict__.get("_counter")
        return {"taken": position(counter, self.n) if live and counter is not None else 0}

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        taken = int_field(type(self).__name__, state, "taken", 0, self.n)
        if live and taken:
            self._resume = taken
