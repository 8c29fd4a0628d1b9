"""Sources over in-memory data: a list, an iterable or generator, a queue, columns of arrays."""

from __future__ import annotations

import numbers
import queue as queue_mod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..base import DataFlow, ReentrancyGuard, RNGDataFlow
from ..errors import DataFlowError

__all__ = ["DataFromArrays", "DataFromGenerator", "DataFromIterable", "DataFromList", "DataFromQueue"]


def _is_int(v: object, minimum: int) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and bool(v >= minimum)


class DataFromList(RNGDataFlow):
    """Yield the elements of a sequence ``lst``, each element being one datapoint.

    Every epoch yields every element exactly once: in order with ``shuffle=False``, else in a
    new permutation drawn from ``self.rng`` (reproducible with ``seed=``). ``len`` is exact
    (``len(lst)`` now). Reentrant. ``reset_state()`` is required when ``shuffle=True``.
    The sequence is not copied: changing it changes later epochs.
    """

    def __init__(self, lst: Sequence[Any], shuffle: bool = True, seed: int | None = None) -> None:
        super().__init__(seed)
        if isinstance(lst, (str, bytes, Mapping)) or not (
            hasattr(lst, "__len__") and hasattr(lst, "__getitem__")
        ):
            raise TypeError(
                f"DataFromList: lst must be a sequence (list, tuple, array) of "
                f"datapoints, got {type(lst).__name__}; for other iterables use "
                f"DataFromIterable"
            )
        if len(lst) == 0:
            raise ValueError("DataFromList: lst is empty; give at least one datapoint")
        self.lst = lst
        self._shuffle = shuffle

    def __len__(self) -> int:
        return len(self.lst)

    def __iter__(self) -> Iterator[Any]:
        # A plain iterator, not a generator: no frame to resume per datapoint.
        lst = self.lst
        if not self._shuffle:
            return iter(lst)
        return map(lst.__getitem__, self.rng.permutation(len(lst)).tolist())


class DataFromIterable(DataFlow):
    """Yield ``iter(iterable)`` each epoch, in its order.

    ``len`` is ``len(iterable)`` when it has one, else
    :class:`~dataflow.errors.LengthUnknownError`. Re-iterables (lists, ranges, most
    containers) give any number of epochs and are as reentrant as ``iterable`` is; an
    iterator (``iter(x) is x``: generators, open files) gives one epoch, and the next raises
    :class:`~dataflow.errors.DataFlowError` instead of silently yielding nothing.
    """

    _hint = "pass a re-iterable (e.g. a list) or use DataFromGenerator(function)"

    def __init__(self, iterable: Iterable[Any]) -> None:
        if not isinstance(iterable, Iterable):
            raise TypeError(f"DataFromIterable: iterable must be iterable, got {type(iterable).__name__}")
        self._itr: Any = iterable
        self._guard = ReentrancyGuard(type(self).__name__)
        self._used = False

    def __len__(self) -> int:
        try:
            return len(self._itr)
        except TypeError:
            return super().__len__()  # raises LengthUnknownError

    def __iter__(self) -> Iterator[Any]:
        it = iter(self._itr)
        return it if it is not self._itr else self._read_once(it)

    def _read_once(self, it: Iterator[Any]) -> Iterator[Any]:
        with self._guard:  # a one-pass iterator: one epoch, never two at once
            if self._used:
                raise DataFlowError(
                    f"{type(self).__name__} was given an iterator, which can be read only "
                    f"once, and its one epoch is over; to iterate more than once, {self._hint}"
                )
            self._used = True
            yield from it


class DataFromGenerator(DataFromIterable):
    """Yield the datapoints of ``gen()`` (a fresh call every epoch), or of the iterable ``gen``.

    With a callable, any number of epochs, reentrant. With a generator or other iterator
    object, exactly one epoch: the next one raises :class:`~dataflow.errors.DataFlowError`.
    ``len`` is ``size`` if given (the user's claim, not checked), else
    :class:`~dataflow.errors.LengthUnknownError`. Order is the generator's.
    """

    _hint = "pass a generator *function*: DataFromGenerator(make_gen), not make_gen()"

    def __init__(self, gen: Callable[[], Iterable[Any]] | Iterable[Any], size: int | None = None) -> None:
        if not callable(gen) and not isinstance(gen, Iterable):
            raise TypeError(
                f"DataFromGenerator: gen must be a function returning an iterable, "
                f"or an iterable, got {type(gen).__name__}"
            )
        if size is not None and not _is_int(size, 0):
            raise ValueError(f"DataFromGenerator: size must be an int >= 0 or None, got {size!r}")
        super().__init__(() if callable(gen) else gen)  # () is never used: see __iter__
        self._gen = gen
        self._size = None if size is None else int(size)

    def __len__(self) -> int:
        return DataFlow.__len__(self) if self._size is None else self._size

    def __iter__(self) -> Iterator[Any]:
        if not callable(self._gen):
            return super().__iter__()
        out = self._gen()
        if not isinstance(out, Iterable):
            raise TypeError(f"DataFromGenerator: gen() must return an iterable, got {type(out).__name__}")
        return iter(out)


class _NoEnd:
    def __repr__(self) -> str:
        return "<no end token>"


_NO_END: Any = _NoEnd()


class DataFromQueue(DataFlow):
    """Yield ``queue.get()`` items forever, or until ``end_token`` (which ends the epoch).

    Works with :class:`queue.Queue`, :mod:`multiprocessing` queues, anything with
    ``get(block, timeout)``. An item ends the epoch if it *is* ``end_token``, or, for a
    ``str``/``bytes``/``int`` token, is of the same type and equal (such tokens survive
    pickling through process queues; others compare by identity only, e.g. ``None``). The
    next epoch reads on from the queue. With ``timeout`` (seconds), waiting longer for one
    item raises :class:`TimeoutError`; without, it waits forever. Not reentrant; ``len`` is
    unknown. Belongs to the process that iterates it (the queue must be shared with it).
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


class DataFromArrays(RNGDataFlow):
    """One datapoint per row of same-length arrays (``tf.data``'s ``from_tensor_slices``).

    ``arrays``: a list/tuple of columns, giving datapoints ``[a[i], b[i], ...]``, or a dict
    ``name -> column``, giving ``{name: a[i], ...}``. A column is anything with ``len`` and
    ``[i]``: rows of numpy arrays are *views* of them (copy before modifying), lists give
    their elements. Row order is ``0..n-1``, or a new permutation each epoch with
    ``shuffle=True`` (then ``reset_state()`` is required). ``len`` is exact. Reentrant.
    """

    def __init__(
        self, arrays: Sequence[Any] | Mapping[Any, Any], shuffle: bool = False, seed: int | None = None
    ) -> None:
        super().__init__(seed)
        if isinstance(arrays, Mapping):
            self._keys: list | None = list(arrays)
            cols = list(arrays.values())
        elif isinstance(arrays, (list, tuple)):
            self._keys, cols = None, list(arrays)
        else:
            raise TypeError(
                f"DataFromArrays: arrays must be a list/tuple or dict of arrays, got "
                f"{type(arrays).__name__}; for one column pass [array]"
            )
        if not cols:
            raise ValueError("DataFromArrays: arrays has no columns; give at least one array")
        lens = {}
        for name, col in zip(self._keys or range(len(cols)), cols, strict=True):
            if not (hasattr(col, "__getitem__") and hasattr(col, "__len__")) or (
                isinstance(col, np.ndarray) and col.ndim == 0
            ):
                raise ValueError(
                    f"DataFromArrays: column {name!r} has no first dimension "
                    f"(got {type(col).__name__}); give an array or a list"
                )
            lens[name] = len(col)
        if len(set(lens.values())) != 1:
            detail = ", ".join(f"{k!r}: {v}" for k, v in lens.items())
            raise ValueError(
                f"DataFromArrays: all columns must have the same length (first dimension), got {detail}"
            )
        self._n = len(cols[0])
        if self._n == 0:
            raise ValueError("DataFromArrays: the columns have zero rows; give at least one")
        self._cols = cols
        self._shuffle = shuffle

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Any]:
        idx = self.rng.permutation(self._n).tolist() if self._shuffle else range(self._n)
        if self._keys is None:  # C-level iterators only: no per-row Python frame
            return map(list, zip(*[map(c.__getitem__, idx) for c in self._cols]))
        return self._dicts(idx)

    def _dicts(self, idx: Iterable[int]) -> Iterator[dict]:
        named = [(k, c.__getitem__) for k, c in zip(self._keys or (), self._cols)]
        for i in idx:
            yield {k: get(i) for k, get in named}
