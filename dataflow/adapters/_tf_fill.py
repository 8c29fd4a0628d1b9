"""Filling the groups that ``dataflow_to_dataset`` hands to tf.data (see :mod:`._tf_groups`).

A group is one pooled, 64-byte aligned buffer per numeric component, ``capacity`` rows deep,
filled **row by row as the datapoints are read**: each datapoint is copied into its row at
once and dropped, so malloc hands the flow the same cache-warm memory for its next one.

When the flow is a plain :class:`~dataflow.BatchData`, :meth:`GroupFiller.stack` is its
stacking function for the epoch: a batch whose large components fit the open group is
stacked straight into its row, and the copy is skipped (the bytes are written once, where
TensorFlow will read them).

Guarantees: the rows handed over hold exactly the datapoints read, in order, cast to the
signature's dtypes; a datapoint that does not fit the signature (shape, structure, a value
that cannot be cast) raises ``TypeError`` naming the component, after the datapoints before
it were handed over. Not thread-safe: one filler per iteration of the dataset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..ops._components import describe_kind
from ..ops._stack import stack_component, stack_into, stackable
from ._aligned import AlignedPool
from ._require import require

tf = require("tensorflow", "tf", "dataflow.adapters.tf")

__all__ = ["GROUP_BYTES", "GROUP_MAX", "GROUP_WINDOW_S", "GroupFiller"]

GROUP_MAX = 16  #: datapoints per crossing into tf.data, at most
GROUP_BYTES = 16 * 2**20  #: a group stops growing once it holds this many bytes
GROUP_WINDOW_S = 0.02  #: ... or once reading it took this long (a slow flow crosses alone)
PLACE_MIN_BYTES = 64 * 1024  #: smaller batched components are stacked, then copied
_POOL = 6  # group buffers kept per component (tf.data may hold a few, one is open ahead)
STAGE = "dataflow_to_dataset"
_NO_ROWS = np.empty((0, 0))  # no group open yet


class GroupColumn:
    """One component of the group being filled: numbers go into rows of a pooled aligned
    buffer of the signature's dtype, strings into a list (an object array when handed over)."""

    def __init__(self, key: Any, spec: Any) -> None:
        self.key = key
        self.shape = tuple(spec.shape.as_list()) if spec.shape.rank is not None else None
        self.string = spec.dtype == tf.string
        self.dtype = np.dtype(object) if self.string else np.dtype(spec.dtype.as_numpy_dtype)
        self._pool = AlignedPool(_POOL)
        self.rows: np.ndarray = _NO_ROWS  # the open group's buffer, ``capacity`` rows
        self.strings: list[Any] = []
        self.placed: np.ndarray | None = None  # the row a batch was just stacked into

    def open(self, shape: tuple[int, ...], capacity: int) -> None:
        """Start a group whose values have ``shape``; it holds at most ``capacity`` rows."""
        self._check(shape)
        self.placed = None
        if self.string:
            self.strings = []
        else:
            self.rows = self._pool.empty((capacity, *shape), self.dtype)

    def put(self, row: int, value: Any) -> None:
        """``value`` into ``row`` (cast to the signature's dtype), unless it was stacked there."""
        if self.string:
            self.strings.append(value)
            return
        if value is self.placed:
            self.placed = None
            return
        try:
            self.rows[row] = value
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError(
                f"{STAGE}: component {self.key!r} ({describe_kind(value)}) cannot be "
                f"converted to the signature's {self.dtype}: {e}"
            ) from None

    def take(self, count: int) -> np.ndarray:
        """The group's first ``count`` values as one array (a view of the buffer)."""
        if self.string:
            return np.asarray(self.strings[:count], dtype=object)  # not a row that then failed
        rows = self.rows
        return rows if count == len(rows) else rows[:count]

    def _check(self, shape: tuple[int, ...]) -> None:
        want = self.shape
        if want is None:
            return
        if len(shape) != len(want) or any(w is not None and w != d for w, d in zip(want, shape)):
            raise TypeError(
                f"{STAGE}: component {self.key!r} has shape {tuple(shape)}, but the signature "
                f"says {tuple(want)} (None: any size); pass output_signature= to allow it"
            )


class GroupFiller:
    """Reads a flow into groups of consecutive datapoints of equal component shapes, at most
    :data:`GROUP_MAX` (fewer once they hold :data:`GROUP_BYTES`, once reading them took
    :data:`GROUP_WINDOW_S`, at a change of shape, at the end or at an error)."""

    def __init__(self, keys: list[Any] | None, specs: Sequence[Any]) -> None:
        self.keys = keys
        self.columns = [GroupColumn(keys[i] if keys is not None else i, s) for i, s in enumerate(specs)]
        self._index = {k: i for i, k in enumerate(keys)} if keys is not None else None
        self._row = 0  # where the datapoint being read goes
        self._shapes: tuple[Any, ...] | None = None  # of the open group (None: none open)
        self._capacity = 0

    def groups(self, it: Iterator[Any]) -> Iterator[list[np.ndarray]]:
        """The groups of ``it``, each a list of one array per component."""
        clock = time.perf_counter
        pending: list[Any] | None = None  # a datapoint that did not fit the last group
        while True:
            most, count, error, ended = GROUP_MAX, 0, None, False
            start = clock()
            try:
                if pending is not None:
                    values, pending = pending, None
                    most = self._first(values)
                    count = 1
                while count < most and (count == 0 or clock() - start < GROUP_WINDOW_S):
                    self._row = count
                    values = self._components(next(it))
                    if count == 0:
                        most = self._first(values)
                    elif _shapes(values) != self._shapes:
                        pending = values
                        break
                    else:
                        for col, v in zip(self.columns, values):
                            col.put(count, v)
                    count += 1
            except StopIteration:
                ended = True
            except Exception as e:  # delivered after the datapoints read before it
                error = e
            if count:
                group = [col.take(count) for col in self.columns]
                if not ended and error is None and pending is None:
                    self._reopen()  # the next batch can be stacked straight into row 0
                yield group
                del group
            if error is not None:
                raise error
            if ended:
                return

    def stack(self, stage: str, key: Any, values: Sequence[Any]) -> Any:
        """A ``stack`` for :func:`~dataflow.ops._stack.collate`: a large numeric component
        that fits the open group (shape and dtype) is stacked straight into its row; anything
        else goes through :func:`~dataflow.ops._stack.stack_component`. Same results either way."""
        col = self._column(key)
        first = None if col is None else stackable(values, PLACE_MIN_BYTES)
        if first is None or col is None or self._row >= len(col.rows):
            return stack_component(stage, key, values)
        if col.rows.shape[1:] != (len(values), *first.shape) or first.dtype != col.dtype:
            return stack_component(stage, key, values)
        col.placed = stack_into(values, col.rows[self._row])
        return col.placed

    def _column(self, key: Any) -> GroupColumn | None:
        if self._index is not None:
            i = self._index.get(key)
            return None if i is None else self.columns[i]
        return self.columns[key] if isinstance(key, int) and 0 <= key < len(self.columns) else None

    def _first(self, values: list[Any]) -> int:
        """Open a group for ``values`` (or keep the one opened ahead, if it fits) and put them
        in its first row; how many datapoints the group may hold."""
        shapes = _shapes(values)
        nbytes = sum(v.nbytes if isinstance(v, np.ndarray) else 8 for v in values)
        capacity = max(1, min(GROUP_MAX, GROUP_BYTES // max(1, nbytes)))
        if shapes != self._shapes or capacity != self._capacity:
            self._shapes, self._capacity = None, 0
            for col, shape in zip(self.columns, shapes):
                col.open(shape, capacity)
            self._shapes, self._capacity = shapes, capacity
        for col, v in zip(self.columns, values):
            col.put(0, v)
        return capacity

    def _reopen(self) -> None:
        """Open the next group ahead with the same shapes, so that its first batch can be
        stacked into it (a datapoint of other shapes opens another)."""
        for col, shape in zip(self.columns, self._shapes or ()):
            col.open(shape, self._capacity)
        self._row = 0

    def _components(self, dp: Any) -> list[Any]:
        """The components of one datapoint in signature order; a clear error if it does not
        have the signature's structure."""
        keys, width = self.keys, len(self.columns)
        if keys is not None:
            if isinstance(dp, dict) and len(dp) == width and all(k in dp for k in keys):
                return [dp[k] for k in keys]
            raise TypeError(f"{STAGE}: the signature has keys {keys}, the flow yielded a {describe_kind(dp)}")
        if not isinstance(dp, (list, tuple)) or len(dp) != width:
            raise TypeError(
                f"{STAGE}: the signature has {width} components, the flow yielded a {describe_kind(dp)}"
            )
        return list(dp)


def _shapes(values: list[Any]) -> tuple[Any, ...]:
    return tuple(v.shape if type(v) is np.ndarray else np.shape(v) for v in values)
