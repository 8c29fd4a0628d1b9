"""Random-access sources over in-memory data: a list (:class:`DataFromList`) and columns of
arrays (:class:`DataFromArrays`). Both build on :class:`~._indexed.IndexedSource`: epochs in
order or shuffled, exact and free checkpoints, index-based sharding."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._fluent import T_co
from ._indexed import IndexedSource, Order, cursor

__all__ = ["DataFromArrays", "DataFromList", "is_int"]


def is_int(v: object, minimum: int) -> bool:
    """``v`` is an int (not a bool) >= ``minimum``."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and bool(v >= minimum)


class DataFromList(IndexedSource[T_co]):
    """Yield the elements of a sequence ``lst``, each element being one datapoint.

    Every epoch yields every element exactly once: in order with ``shuffle=False``, else in a
    new permutation drawn from ``self.rng`` (reproducible with ``seed=``). ``len`` is exact
    (``len(lst)`` now, or this shard's count under :class:`~dataflow.ShardData`). Reentrant.
    ``reset_state()`` is required when ``shuffle=True``. The sequence is not copied: changing
    it changes later epochs. Random access: resuming at any position costs no re-reading, and
    ``.shard()`` right above it reads only that rank's indices.
    """

    def __init__(self, lst: Sequence[T_co], shuffle: bool = True, seed: int | None = None) -> None:
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

    def _num_items(self) -> int:
        return len(self.lst)

    def _getter(self) -> Callable[[int], Any]:
        return self.lst.__getitem__

    def _open(self, order: Order, start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        lst = self.lst
        if type(lst) in (list, tuple) and isinstance(order, range) and order == range(len(lst)):
            cur: Iterator[Any] = iter(lst)  # the fastest epoch there is: no index, no call per datapoint
            if start:
                cur.__setstate__(start)  # type: ignore[attr-defined]
            return cur, cur, cur
        return super()._open(order, start)


class DataFromArrays(IndexedSource[Any]):
    """One datapoint per row of same-length arrays (``tf.data``'s ``from_tensor_slices``).

    ``arrays``: a list/tuple of columns, giving datapoints ``[a[i], b[i], ...]``, or a dict
    ``name -> column``, giving ``{name: a[i], ...}``. A column is anything with ``len`` and
    ``[i]``: rows of numpy arrays are *views* of them (copy before modifying), lists give
    their elements. Row order is ``0..n-1``, or a new permutation each epoch with
    ``shuffle=True`` (then ``reset_state()`` is required). ``len`` is exact. Reentrant.
    Random access: resumes without re-reading, and shards by index (see :class:`DataFromList`).
    """

    def __init__(
        self, arrays: Sequence[Any] | Mapping[Any, Any], shuffle: bool = False, seed: int | None = None
    ) -> None:
        super().__init__(seed)
        if isinstance(arrays, Mapping):
            self._keys: list[Any] | None = list(arrays)
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

    def _num_items(self) -> int:
        return self._n

    def _repr_args(self) -> dict[str, Any]:
        cols = list(self._keys) if self._keys is not None else len(self._cols)
        return {"rows": self._n, "columns": cols, **super()._repr_args()}

    def _open(self, order: Order, start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        # C-level iterators only: no per-row Python frame. Every column draws from its own
        # cursor over the same order, in lockstep; the first one reports the position.
        first, probe, lead = cursor(order, start)
        if self._keys is None:
            columns = [map(self._cols[0].__getitem__, lead)]
            columns += [map(col.__getitem__, cursor(order, start)[2]) for col in self._cols[1:]]
            return map(list, zip(*columns)), first, probe
        return self._dicts(lead), first, probe

    def _dicts(self, idx: Iterator[int]) -> Iterator[dict[Any, Any]]:
        named = [(k, c.__getitem__) for k, c in zip(self._keys or (), self._cols)]
        for i in idx:
            yield {k: get(i) for k, get in named}
