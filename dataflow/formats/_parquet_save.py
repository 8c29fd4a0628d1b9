"""Writing a flow to one Parquet file, all or nothing: :class:`ParquetSerializer`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._version import __version__
from ..base import DataFlow
from ._arrow import arrow_column
from ._atomic import atomic_write
from ._common import FormatError, PathType, fspath, iterate_for_save, require
from ._parquet import ParquetData
from ._storage import PathSpec

__all__ = ["ParquetSerializer"]

_STAGE = "ParquetSerializer.save"


class ParquetSerializer:
    """Save a flow to one Parquet file and load it back.

    Example::

        ParquetSerializer.save(df, "train.parquet")     # dicts (or lists) of columns
        df = ParquetSerializer.load("train.parquet")    # a ParquetData: one dict per row

    The file is plain Parquet (zstd-compressed by default): pyarrow, pandas, polars, DuckDB,
    Spark and Hugging Face ``datasets.Dataset.from_parquet`` read it.
    """

    @staticmethod
    def save(
        df: DataFlow[Any],
        path: PathType,
        *,
        rows_per_group: int = 8192,
        compression: str = "zstd",
        schema: Any = None,
        overwrite: bool = False,
        progress: bool = True,
        durable: bool = False,
    ) -> None:
        """Write one epoch of ``df`` (after ``df.reset_state()``) to ``path``, one row per
        datapoint, ``rows_per_group`` rows per row group (the unit :class:`ParquetData`
        shuffles and shards; smaller groups shuffle finer, larger ones compress better).

        A datapoint is a dict ``{column name: value}`` or a list/tuple (columns ``"0"``,
        ``"1"``, ...; :class:`ParquetData` reads them back as dicts with those keys), every
        datapoint with the same columns. Values: numbers, ``bool``, ``str``, ``bytes``, numpy
        scalars and arrays, lists, ``None`` (a null). The schema (a ``pyarrow.Schema``) is
        ``schema`` or inferred from the first ``rows_per_group`` datapoints: numpy values keep
        their dtype; arrays of one shape become fixed-size lists (nested for ``ndim > 1``),
        which :class:`ParquetData` reads back as arrays of that shape; 1-D arrays of
        different lengths become lists; Python values take pyarrow's inferred type (``int``:
        int64, ``float``: float64). A datapoint that does not fit it (another column, shape,
        or a value of another type) raises :class:`~dataflow.FormatError` naming its index
        and column.

        All or nothing (see :mod:`dataflow.formats`): the file appears at ``path`` only once
        complete; after an error the previous file (if any) is left as it was. An existing
        file is replaced only with ``overwrite=True``; ``durable=True`` also flushes it to the
        disk before it appears."""
        pa, pq = require("pyarrow", "parquet", _STAGE), require("pyarrow.parquet", "parquet", _STAGE)
        path = fspath(_STAGE, "path", path)
        if isinstance(rows_per_group, bool) or not isinstance(rows_per_group, int) or rows_per_group < 1:
            raise ValueError(f"{_STAGE}: rows_per_group must be an int >= 1, got {rows_per_group!r}")
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"{_STAGE}: schema must be a pyarrow.Schema or None, got {type(schema).__name__}")
        with atomic_write(_STAGE, path, overwrite, durable) as tmp, open(tmp, "r+b") as f:  # see atomic_write
            writer = None
            names: list[str] | None = None if schema is None else list(schema.names)
            group: list[Any] = []
            start = 0
            try:
                for index, dp in enumerate(iterate_for_save(_STAGE, df, progress)):
                    if names is None:
                        names = _names(dp, index)
                    group.append(dp)
                    if len(group) == rows_per_group:
                        if schema is None:
                            schema = _infer(pa, names, _columns(names, group, start))
                        if writer is None:
                            writer = pq.ParquetWriter(f, _with_meta(schema), compression=compression)
                        writer.write_batch(_batch(pa, schema, group, start), row_group_size=rows_per_group)
                        start, group = start + len(group), []
                if schema is None and group:
                    schema = _infer(pa, names or [], _columns(names or [], group, start))
                elif schema is None:
                    schema = pa.schema([])
                if writer is None:
                    writer = pq.ParquetWriter(f, _with_meta(schema), compression=compression)
                if group:
                    writer.write_batch(_batch(pa, schema, group, start), row_group_size=rows_per_group)
            finally:
                if writer is not None:
                    writer.close()

    @staticmethod
    def load(path: PathSpec, **kwargs: Any) -> ParquetData:
        """A :class:`ParquetData` of the file(s): ``columns=``, ``shuffle=``, ``seed=``,
        ``batch_rows=``, ``filters=`` and the keyword arguments of remote files are its."""
        return ParquetData(path, **kwargs)


def _with_meta(schema: Any) -> Any:
    return schema.with_metadata({**(schema.metadata or {}), b"writer": f"dataflow-ml {__version__}".encode()})


def _names(dp: Any, index: int) -> list[str]:
    if isinstance(dp, Mapping):
        return [str(k) for k in dp]
    if isinstance(dp, (list, tuple)):
        return [str(i) for i in range(len(dp))]
    raise FormatError(
        f"{_STAGE}: datapoint {index} is a {type(dp).__name__}; a row is a dict of columns or a list"
    )


def _columns(names: list[str], group: list[Any], start: int) -> list[list[Any]]:
    """The group's datapoints as columns, checking that each has exactly the columns ``names``."""
    columns: list[list[Any]] = [[] for _ in names]
    keyed = [(name, col) for name, col in zip(names, columns)]
    for offset, dp in enumerate(group):
        if isinstance(dp, Mapping):
            if len(dp) != len(names) or any(name not in dp for name in names):
                extra = sorted(map(str, set(map(str, dp)) ^ set(names)))
                raise FormatError(
                    f"{_STAGE}: datapoint {start + offset} has the columns {sorted(map(str, dp))}, but the "
                    f"file has {names} (column {extra[0]!r} differs)"
                )
            for name, col in keyed:
                col.append(dp[name])
        elif isinstance(dp, (list, tuple)) and len(dp) == len(names):
            for value, col in zip(dp, columns):
                col.append(value)
        else:
            raise FormatError(
                f"{_STAGE}: datapoint {start + offset} is {type(dp).__name__} "
                f"{'of length ' + str(len(dp)) if isinstance(dp, (list, tuple)) else ''}; "
                f"the file's rows have the columns {names}"
            )
    return columns


def _infer(pa: Any, names: list[str], columns: list[list[Any]]) -> Any:
    """The schema of the first datapoints (see :meth:`ParquetSerializer.save`)."""
    fields = []
    for name, values in zip(names, columns):
        arrays = [v for v in values if isinstance(v, np.ndarray)]
        if arrays and len(arrays) == len(values) and arrays[0].dtype.kind in "biufcmM":
            shapes = {a.shape for a in arrays}
            dtypes = {a.dtype for a in arrays}
            if len(dtypes) > 1:
                raise FormatError(
                    f"{_STAGE}: column {name!r} holds arrays of several dtypes {sorted(map(str, dtypes))} in "
                    f"its first datapoints; give schema= or cast them to one"
                )
            item = pa.from_numpy_dtype(arrays[0].dtype)
            if len(shapes) == 1:
                t = item
                for size in reversed(arrays[0].shape):
                    t = pa.list_(t, size)
            elif all(a.ndim == 1 for a in arrays):
                t = pa.list_(item)
            else:
                raise FormatError(
                    f"{_STAGE}: column {name!r} holds arrays of several shapes with more than one dimension "
                    f"in its first datapoints; give schema= (a list type) or reshape them"
                )
        else:
            try:
                t = pa.array(values).type
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
                raise FormatError(
                    f"{_STAGE}: column {name!r}: no Arrow type fits its first values ({e})"
                ) from e
            if pa.types.is_null(t):
                raise FormatError(
                    f"{_STAGE}: column {name!r} is None in all of its first datapoints, so its type is "
                    f"unknown; give schema="
                )
        fields.append(pa.field(name, t))
    return pa.schema(fields)


def _batch(pa: Any, schema: Any, group: list[Any], start: int) -> Any:
    names = list(schema.names)
    arrays = []
    for field, values in zip(schema, _columns(names, group, start)):
        arrays.append(_to_arrow(pa, field, values, start))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _to_arrow(pa: Any, field: Any, values: list[Any], start: int) -> Any:
    """One column of a row group; a value that does not fit ``field`` raises FormatError
    naming its datapoint."""
    shape, t = [], field.type
    while pa.types.is_fixed_size_list(t):
        shape.append(t.list_size)
        t = t.value_type
    if shape and all(isinstance(v, np.ndarray) for v in values):
        dtype = t.to_pandas_dtype()
        for offset, v in enumerate(values):
            if list(v.shape) != shape or not np.can_cast(v.dtype, dtype, "same_kind"):
                raise FormatError(
                    f"{_STAGE}: datapoint {start + offset}, column {field.name!r}: an array of shape "
                    f"{v.shape} and dtype {v.dtype} does not fit {field.type} (shape {tuple(shape)}, {dtype})"
                )
        stacked = np.stack(values).astype(dtype, copy=False) if values else np.empty([0, *shape], dtype)
        return arrow_column(stacked, field.type)
    errors = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
              OverflowError)
    try:
        return arrow_column(values, field.type)
    except errors:
        pass
    for offset, v in enumerate(values):  # find the value that does not fit
        try:
            arrow_column([v], field.type)
        except errors as e:
            raise FormatError(
                f"{_STAGE}: datapoint {start + offset}, column {field.name!r}: {type(v).__name__} value "
                f"{v!r:.60} does not fit {field.type} ({e})"
            ) from e
    raise FormatError(f"{_STAGE}: column {field.name!r} of datapoints {start}.. does not fit {field.type}")

