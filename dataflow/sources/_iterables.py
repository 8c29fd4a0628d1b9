"""Sources over iterables, generators and queues: :class:`DataFromIterable`,
:class:`DataFromGenerator`, :class:`DataFromQueue`.

Checkpoints: a ``list``/``tuple`` resumes exactly at its position. Other iterables and
generators cannot seek: their state counts the datapoints consumed in the epoch, and only
``state_dict(allow_fast_forward=True)`` accepts it; resuming then re-runs the iterable and
skips that many datapoints, with a warning (exact only if it yields the same sequence again).
A queue cannot be read twice, so :class:`DataFromQueue` refuses to checkpoint.
"""

from __future__ import annotations

import numbers
import queue as queue_mod
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from operator import itemgetter
from types import GeneratorType
from typing import Any

from .._errors import DataFlowError, StateUnsupportedError
from .._fluent import T_co
from .._state import save_options
from .._state_fields import exhausted, field, int_field, position
from .._warn import warn
from ..base import DataFlow, ReentrancyGuard
from ._memory import is_int

__all__ = ["DataFromGenerator", "DataFromIterable", "DataFromQueue"]

_SEEKABLE: tuple[type, ...] = (type(iter([])), type(iter(())))
_second = itemgetter(1)


def _closing(counter: Iterator[tuple[int, Any]], it: Iterator[Any]) -> Iterator[Any]:
    """The datapoints of ``counter`` (an ``enumerate`` of ``it``); closing this closes ``it``,
    so a generator's ``finally`` runs when its epoch is left early."""
    try:
        yield from map(_second, counter)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


class DataFromIterable(DataFlow[T_co]):
    """Yield ``iter(iterable)`` each epoch, in its order.

    ``len`` is ``len(iterable)`` when it has one, else
    :class:`~dataflow._errors.LengthUnknownError`. Re-iterables (lists, ranges, most
    containers) give any number of epochs and are as reentrant as ``iterable`` is; an
    iterator (``iter(x) is x``: generators, open files) gives one epoch, and the next raises
    :class:`~dataflow._errors.DataFlowError` instead of silently yielding nothing.
    Checkpoints: see :mod:`dataflow.sources._iterables`.
    """

    _hint = "pass a re-iterable (e.g. a list) or use DataFromGenerator(function)"

    def __init__(self, iterable: Iterable[T_co]) -> None:
        if not isinstance(iterable, Iterable):
            raise TypeError(f"DataFromIterable: iterable must be iterable, got {type(iterable).__name__}")
        self._itr: Any = iterable
        self._guard = ReentrancyGuard(type(self).__name__)
        self._used = False
        self._epochs = 0
        self._cursor: Any = None  # a list/tuple iterator, or an enumerate counting datapoints

    def __len__(self) -> int:
        try:
            return len(self._itr)
        except TypeError:
            return super().__len__()  # raises LengthUnknownError

    def _epoch_iterator(self) -> Iterator[Any]:
        """A fresh iterator over this epoch's datapoints."""
        it = iter(self._itr)
        return it if it is not self._itr else self._read_once(it)

    def __iter__(self) -> Iterator[Any]:
        skip = self.__dict__.pop("_resume", 0)
        if not skip:
            self._epochs += 1
        it = self._epoch_iterator()
        if type(it) in _SEEKABLE:
            self._total = it.__length_hint__()  # type: ignore[attr-defined]
            if skip:
                it.__setstate__(skip)  # type: ignore[attr-defined]
            self._cursor = it
            return it
        counter = enumerate(it, skip)
        if skip:
            warn(
                f"{type(self).__name__}: resuming by running the iterable again and skipping the "
                f"{skip} datapoints consumed before the checkpoint (it cannot seek); the result "
                f"is exact only if it yields the same sequence again",
                RuntimeWarning,
            )
            for _ in islice(it, skip):
                pass
        self._cursor = counter
        return _closing(counter, it)

    def _read_once(self, it: Iterator[Any]) -> Iterator[Any]:
        with self._guard:  # a one-pass iterator: one epoch, never two at once
            if self._used:
                raise DataFlowError(
                    f"{type(self).__name__} was given an iterator, which can be read only "
                    f"once, and its one epoch is over; to iterate more than once, {self._hint}"
                )
            self._used = True
            yield from it

    def _position(self) -> tuple[int, bool, bool]:
        """``(datapoints consumed, exhausted, seekable)`` of the current epoch."""
        cur = self._cursor
        if cur is None:
            return 0, False, True
        if type(cur) in _SEEKABLE:
            return position(cur, self._total), exhausted(cur), True
        inner, count = cur.__reduce__()[1]
        done = isinstance(inner, GeneratorType) and inner.gi_frame is None
        return count, done, False

    def _iter_live(self) -> bool:
        if type(self._cursor) not in _SEEKABLE:
            return DataFlow._iter_live(self)  # the tracked generator
        return not self._position()[1]

    def _get_state(self, live: bool) -> dict[str, Any]:
        state: dict[str, Any] = {"epochs": self._epochs}
        if not live:
            return state
        pos, _, seekable = self._position()
        if not seekable and pos and not save_options().allow_fast_forward:
            raise StateUnsupportedError(
                f"{type(self).__name__}: cannot save its position: it reads an iterable that cannot "
                f"seek ({pos} datapoints into this epoch). Use a random-access source "
                f"(DataFromList, DataFromArrays, a storage format), or pass allow_fast_forward=True "
                f"to state_dict() to re-run it and skip {pos} datapoints on resume"
            )
        state["position"] = pos
        return state

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        stage = type(self).__name__
        self._epochs = int_field(stage, state, "epochs")
        if live:
            pos = int_field(stage, state, "position")
            if pos:
                self._resume = pos


class DataFromGenerator(DataFromIterable[T_co]):
    """Yield the datapoints of ``gen()`` (a fresh call every epoch), or of the iterable ``gen``.

    With a callable, any number of epochs, reentrant. With a generator or other iterator
    object, exactly one epoch: the next one raises :class:`~dataflow._errors.DataFlowError`.
    ``len`` is ``size`` if given (the user's claim, not checked), else
    :class:`~dataflow._errors.LengthUnknownError`. Order is the generator's. Checkpoints need
    ``state_dict(allow_fast_forward=True)`` mid-epoch (see :mod:`dataflow.sources._iterables`).
    """

    _hint = "pass a generator *function*: DataFromGenerator(make_gen), not make_gen()"

    def __init__(self, gen: Callable[[], Iterable[T_co]] | Iterable[T_co], size: int | None = None) -> None:
        if not callable(gen) and not isinstance(gen, Iterable):
            raise TypeError(
                f"DataFromGenerator: gen must be a function returning an iterable, "
                f"or an iterable, got {type(gen).__name__}"
            )
        if size is not None and not is_int(size, 0):
            raise ValueError(f"DataFromGenerator: size must be an int >= 0 or None, got {size!r}")
        super().__init__(() if callable(gen) else gen)  # () is never used: see _epoch_iterator
        self._gen = gen
        self._size = None if size is None else int(size)

    def __len__(self) -> int:
        return DataFlow.__len__(self) if self._size is None else self._size

    def _epoch_iterator(self) -> Iterator[Any]:
        if not callable(self._gen):
            return super()._epoch_iterator()
        out = self._gen()
        if not isinstance(out, Iterable):
            raise TypeError(f"DataFromGenerator: gen() must return an iterable, got {type(out).__name__}")
        return iter(out)


class _NoEnd:
    def __repr__(self) -> str:
        return "<no end token>"


_NO_END: Any = _NoEnd()


class DataFromQueue(DataFlow[Any]):
    """Yield ``queue.get()`` items forever, or until ``end_token`` (which ends the epoch).

    Works with :class:`queue.Queue`, :mod:`multiprocessing` queues, anything with
    ``get(block, timeout)``. An item ends the epoch if it *is* ``end_token``, or, for a
    ``str``/``bytes``/``int`` token, is of the same type and equal (such tokens survive
    pickling through process queues; others compare by identity only, e.g. ``None``). The
    next epoch reads on from the queue. With ``timeout`` (seconds), waiting longer for one
    item raises :class:`TimeoutError`; without, it waits forever. Not reentrant; ``len`` is
    unknown. Belongs to the process that iterates it (the queue must be shared with it).
    ``state_dict()`` raises :class:`~dataflow._errors.StateUnsupportedError`: what was taken
    from a queue cannot be taken again.
    """

    def __init__(self, queue: Any, end_token: Any = _NO_END, timeout: float | None = None) -> None:
        if not callable(getattr(queue, "get", None)):
            raise TypeError(f"DataFromQueue: queue must have a get() method, got {type(queue).__name__}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0
        ):
            raise ValueError(f"DataFromQueue: timeout must be a positive number or None, got {timeout!r}")
        self.queue = queue
        self._end = end_token
        self._timeout = timeout
        self._guard = ReentrancyGuard("DataFromQueue")

    def __iter__(self) -> Iterator[Any]:
        with self._guard:
            get, end, timeout = self.queue.get, self._end, self._timeout
            end_type = type(end) if type(end) in (str, bytes, int) else None
            while True:
                try:
                    dp = get() if timeout is None else get(True, timeout)
                except queue_mod.Empty:
                    raise TimeoutError(f"DataFromQueue: no item arrived within timeout={timeout}s") from None
                if dp is end or (type(dp) is end_type and dp == end):
                    return
                yield dp

    def _get_state(self, live: bool) -> dict[str, Any]:
        raise StateUnsupportedError(
            "DataFromQueue: cannot save a position: items taken from a queue cannot be taken "
            "again. Checkpoint the producer that fills the queue instead, or read from a "
            "random-access source"
        )

    def _set_state(self, state: Mapping[str, Any], live: bool) -> None:
        field("DataFromQueue", state, "never", dict)  # no state is ever saved: always an error
