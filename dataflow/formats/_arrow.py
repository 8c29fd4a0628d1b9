"""Columns between Arrow and numpy: what :class:`~dataflow.ParquetData` yields from a row
group, what :class:`~dataflow.ParquetSerializer` writes, and :func:`to_arrow`.

Arrow to numpy (:func:`numpy_column`): numbers, booleans and times become a numpy array
(zero-copy where Arrow's memory is numpy's layout: numbers without nulls); fixed-size lists
(nested: tensors) of numbers become one array of shape ``(rows, *shape)`` (zero-copy too),
the ``fixed_shape_tensor`` extension type likewise; variable-size lists of numbers one 1-D
array per row; strings ``str`` and binaries ``bytes``; anything else (structs, maps, lists
with nulls) what ``pyarrow`` gives as Python objects. pyarrow is imported by the callers'
first use, never by ``import dataflow``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..base import DataFlow
from ._common import FormatError, check_flow, require

__all__ = ["arrow_column", "numpy_column", "to_arrow"]


def _pa() -> Any:
    return require("pyarrow", "parquet", "to_arrow")


def numpy_column(array: Any, rows: bool) -> np.ndarray | list[Any]:
    """The values of one Arrow array (one column of a row group) for numpy users.

    ``rows``: for indexing row by row (strings as a ``list`` of ``str``, tensors as a
    writable array whose rows are views); else a column of a batch (strings as an object
    array; numbers and tensors zero-copy, read-only, where Arrow allows)."""
    pa = _pa()
    t = array.type
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
        t = array.type
    if isinstance(t, pa.FixedShapeTensorType) and array.null_count == 0:
        return _writable(array.to_numpy_ndarray(), rows)
    if pa.types.is_fixed_size_list(t):
        shape, flat = [len(array)], array
        while pa.types.is_fixed_size_list(flat.type) and flat.null_count == 0:
            shape.append(flat.type.list_size)
            flat = flat.flatten()
        if _numeric(pa, flat.type) and flat.null_count == 0:
            return _writable(flat.to_numpy(zero_copy_only=False).reshape(shape), rows)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        values = array.flatten()
        if array.null_count == 0 and _numeric(pa, values.type) and values.null_count == 0:
            offsets = array.offsets.to_numpy()
            parts = np.split(values.to_numpy(zero_copy_only=False), offsets[1:-1] - offsets[0])
            if rows:
                return parts
            out = np.empty(len(parts), dtype=object)
            out[:] = parts
            return out
    elif _numeric(pa, t) and array.null_count == 0:
        return array.to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]
    if rows:
        return array.to_pylist()  # type: ignore[no-any-return]
    return array.to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]


def _numeric(pa: Any, t: Any) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)
    )


def _writable(values: np.ndarray, rows: bool) -> np.ndarray:
    """Rows of tensors are handed out as views: of a writable copy, so that a user may
    change one in place as with every other reader (one copy per row group)."""
    return values.copy() if rows and not values.flags.writeable else values


def arrow_column(values: Any, type: Any = None) -> Any:
    """An Arrow array from one column: a numpy array of ``rows`` values (``ndim >= 2``:
    each row a tensor, stored as nested fixed-size lists) or a sequence of Python values.
    Numbers of a contiguous array are not copied. ``type``: the Arrow type it must have
    (cast safely; a value that does not fit raises ``pyarrow``'s error)."""
    pa = _pa()
    if isinstance(values, np.ndarray) and values.dtype.kind in "biufcmM" and values.ndim >= 1:
        arr = pa.array(values.reshape(-1)) if values.ndim > 1 else pa.array(values)
        for size in reversed(values.shape[1:]):
            arr = pa.FixedSizeListArray.from_arrays(arr, size)
        if type is not None and arr.type != type:
            arr = arr.cast(type)
        return arr
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype == object:
        values = list(values)
    return pa.array(values, type=type)


def to_arrow(df: DataFlow[Any] | Iterable[Mapping[str, Any]], schema: Any = None) -> Any:
    """One epoch of a flow of column batches as a ``pyarrow.Table``, built batch by batch
    (no loop over rows): ``ParquetData(..., batch_rows=N)``, or ``BatchData`` over dict
    datapoints, or any flow whose datapoints are dicts of equal-length columns (numpy
    arrays, lists). ``ray.data.from_arrow``, ``pandas`` (``table.to_pandas()``), ``polars``
    (``polars.from_arrow``) and DuckDB take the table as it is.

    A numpy column of numbers becomes an Arrow column without a copy; an array of
    ``ndim >= 2`` becomes a column of fixed-size lists (one tensor per row). ``schema``
    (a ``pyarrow.Schema``) fixes the column names, order and types (cast safely); without
    it they are the first batch's. The flow is ``reset_state()``-ed here if it is a
    DataFlow, and not closed. Raises :class:`~dataflow.FormatError` naming the batch and
    column that is not a dict of columns, or does not fit the schema.
    """
    pa = _pa()
    stage = "to_arrow"
    if isinstance(df, DataFlow):
        check_flow(stage, df)
        df.reset_state()
    batches = []
    for k, batch in enumerate(df):
        if not isinstance(batch, Mapping):
            raise FormatError(
                f"{stage}: batch {k} is a {type(batch).__name__}, not a dict of columns; build the "
                f"flow with batch_rows= (ParquetData) or batch dict datapoints with .batch(n)"
            )
        if schema is None:
            schema = pa.schema([(str(name), arrow_column(col).type) for name, col in batch.items()])
        batches.append(_record_batch(pa, stage, k, batch, schema))
    if schema is None:
        schema = pa.schema([])
    return pa.Table.from_batches(batches, schema=schema)


def _record_batch(pa: Any, stage: str, k: int, batch: Mapping[str, Any], schema: Any) -> Any:
    names = [str(n) for n in batch]
    if sorted(names) != sorted(schema.names):
        raise FormatError(
            f"{stage}: batch {k} has the columns {sorted(names)}, but the schema has {sorted(schema.names)}"
        )
    columns: dict[str, Any] = {str(n): v for n, v in batch.items()}
    arrays: list[Any] = []
    lengths: set[int] = set()
    for field in schema:
        try:
            arrays.append(arrow_column(columns[field.name], field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as e:
            raise FormatError(
                f"{stage}: batch {k}, column {field.name!r} does not fit the type {field.type}: {e}"
            ) from e
        lengths.add(len(arrays[-1]))
    if len(lengths) > 1:
        raise FormatError(f"{stage}: batch {k} has columns of different lengths {sorted(lengths)}")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)

