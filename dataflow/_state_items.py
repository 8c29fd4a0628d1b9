"""Datapoints held by a stage, as ``bytes`` for its state: :func:`encode_items`,
:func:`decode_items`.

A shuffle buffer holds thousands of datapoints of one structure (``[int, float32[10]]``):
encoding each array on its own costs a few microseconds per array, tens of milliseconds per
``state_dict()``. So datapoints that are all lists (or all tuples, or all dicts with the same
keys) of the same length whose every column is either arrays of one dtype and shape, or
Python scalars of one type, are stored *by column* — one stacked array per array column —
and decoded back into the same datapoints (equal values, dtypes, shapes and container types;
the arrays of a decoded buffer are views of one block). Anything else is encoded datapoint by
datapoint. Both go through the safe codec, never pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import codec
from ._errors import StateError

__all__ = ["decode_items", "encode_items"]

_SCALARS = (int, float, str, bytes, bool, type(None))


def _column(values: list[Any]) -> Any:
    """A stacked array or a list of scalars for one column, or ``None`` if irregular."""
    first = values[0]
    kind = type(first)
    if kind is np.ndarray:
        if first.ndim == 0 or first.dtype.kind in "OV":
            return None
        dtype, shape = first.dtype, first.shape
        for v in values:
            if type(v) is not np.ndarray or v.dtype != dtype or v.shape != shape:
                return None
        return np.stack(values)
    if kind in _SCALARS and all(type(v) is kind for v in values):
        return values
    return None


def _by_column(items: list[Any]) -> dict[str, Any] | None:
    first = items[0]
    if type(first) in (list, tuple):
        width, container = len(first), type(first)
        if not all(type(dp) is container and len(dp) == width for dp in items):
            return None
        columns = [_column([dp[j] for dp in items]) for j in range(width)]
        keys: list[Any] | None = None
    elif type(first) is dict:
        keys = list(first)
        if not all(type(dp) is dict and list(dp) == keys for dp in items):
            return None
        columns = [_column([dp[k] for dp in items]) for k in keys]
        container = dict
    else:
        return None
    if not columns or any(c is None for c in columns):  # no columns: nothing would keep the count
        return None
    return {"container": container.__name__, "keys": keys, "columns": columns, "count": len(items)}


def encode_items(stage: str, items: list[Any], what: str = "buffered datapoints") -> bytes:
    """``items`` (datapoints a stage holds) as codec bytes, or a :class:`StateError` saying
    which type the codec cannot store."""
    items = list(items)
    try:
        packed = _by_column(items) if len(items) > 1 else None
        return codec.dumps(packed if packed is not None else {"rows": items})
    except codec.CodecError as e:
        raise StateError(
            f"{stage}: cannot save its {len(items)} {what}: {e}. Datapoints held by a stage at a "
            f"checkpoint must be numbers, str, bytes, numpy arrays, or lists/tuples/dicts of those"
        ) from e


def _rows(packed: Mapping[str, Any]) -> list[Any]:
    n, keys, columns = int(packed["count"]), packed["keys"], list(packed["columns"])
    cols = [list(c) if isinstance(c, np.ndarray) else c for c in columns]  # views of one block
    if any(len(c) != n for c in cols):
        raise ValueError("column lengths differ")
    if packed["container"] == "dict":
        return [dict(zip(keys, row)) for row in zip(*cols)]
    if packed["container"] == "tuple":
        return list(zip(*cols))
    return [list(row) for row in zip(*cols)]


def decode_items(stage: str, state: Mapping[str, Any], key: str) -> list[Any]:
    """The datapoints stored by :func:`encode_items` under ``state[key]``."""
    data = state.get(key) if isinstance(state, Mapping) else None
    if not isinstance(data, bytes):
        raise StateError(
            f"{stage}: state field {key!r} must hold encoded datapoints (bytes), got {type(data).__name__}"
        )
    try:
        packed = codec.loads(data)
        if isinstance(packed, dict) and isinstance(packed.get("rows"), list):
            return list(packed["rows"])
        if isinstance(packed, dict) and packed.get("container") in ("list", "tuple", "dict"):
            return _rows(packed)
    except (codec.CodecError, KeyError, TypeError, ValueError) as e:
        raise StateError(f"{stage}: state field {key!r} holds corrupted datapoints: {e}") from e
    raise StateError(f"{stage}: state field {key!r} does not hold encoded datapoints")
