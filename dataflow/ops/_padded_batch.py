"""Batching variable-length data: :class:`PaddedBatchData` (the ``padded_batch`` counterpart)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import ComponentError
from ..base import DataFlow
from ._batch import BatchData
from ._stack import collate, stack_component

__all__ = ["PaddedBatchData"]


class PaddedBatchData(BatchData):
    """Like :class:`BatchData`, but array components of different shapes are padded.

    Every array (or list of numbers) component is padded at the end of each axis to the
    largest size in the batch, with ``padding_value`` — one value for all components, or a
    mapping from component index/key to value (components not in it pad with 0). All
    elements of a component must have the same number of dimensions. Scalars, strings and
    objects are batched as by :class:`BatchData`. Ordering, epochs and ``len`` follow
    :class:`BatchData` (``remainder`` decides the last incomplete batch).
    """

    def __init__(
        self,
        ds: DataFlow[Any],
        batch_size: int,
        padding_value: Any = 0,
        remainder: bool = False,
    ) -> None:
        super().__init__(ds, batch_size, remainder=remainder)
        self.padding_value = padding_value

    def _batch(self, holder: list[Any]) -> Any:
        stage = type(self).__name__
        columns = collate(stage, holder, use_list=True)
        if isinstance(columns, dict):
            return {k: self._pad_component(k, v) for k, v in columns.items()}
        return [self._pad_component(i, v) for i, v in enumerate(columns)]

    def _pad_component(self, key: Any, values: Sequence[Any]) -> Any:
        stage = type(self).__name__
        first = values[0]
        if not isinstance(first, (np.ndarray, list, tuple)):
            return stack_component(stage, key, values)
        try:
            arrays = [np.asarray(v) for v in values]
        except ValueError:  # a ragged nested list
            arrays = [np.asarray(v, dtype=object) for v in values]
        ndims = {a.ndim for a in arrays}
        if len(ndims) != 1 or any(a.dtype.kind in "OUS" for a in arrays):
            shapes = sorted({str(a.shape) for a in arrays})
            raise ComponentError(
                f"{stage}: component {key!r} cannot be padded: its elements must be numeric "
                f"arrays with the same number of dimensions, got shapes {', '.join(shapes)} "
                f"and dtypes {sorted({str(a.dtype) for a in arrays})}"
            )
        max_shape = tuple(np.max([a.shape for a in arrays], axis=0)) if arrays[0].ndim else ()
        pad = self.padding_value
        if isinstance(pad, Mapping):
            pad = pad.get(key, 0)
        dtype = _dtype_holding(np.result_type(*arrays), pad)
        out = np.full((len(arrays), *max_shape), pad, dtype=dtype)
        for row, a in zip(out, arrays):
            row[tuple(slice(0, n) for n in a.shape)] = a
        return out


def _dtype_holding(dtype: np.dtype, pad: Any) -> np.dtype:
    """``dtype``, widened just enough to hold ``pad`` exactly (uint8 data padded with -1 gives
    int16, int data padded with 0.5 gives float64); an ordinary pad keeps ``dtype``."""
    try:
        if np.array(pad, dtype=dtype) == pad:
            return dtype
    except (OverflowError, ValueError, TypeError):
        pass
    return np.result_type(dtype, np.min_scalar_type(pad))
