"""Building blocks of a stage's state: checked fields, encoded datapoints, RNG states, iterator
positions. Every helper raises :class:`~dataflow._errors.StateError` naming the stage and the
field, so a corrupted or foreign state never fails with a ``KeyError`` deep inside a stage.

A state holds plain data only (dicts with ``str`` keys, lists, ``int``, ``float``, ``str``,
``bytes``, ``bool``, ``None``): what ``torch.load(weights_only=True)``, JSON (bytes as base64,
see :func:`dataflow.checkpoint.state_to_json`) and Orbax accept. Datapoints go in as ``bytes``
of the safe codec (:mod:`dataflow.codec`), never pickled; ints outside int64 (the 128-bit words
of an RNG) go in as hexadecimal strings.

Datapoints a stage holds (a shuffle buffer: thousands of one structure, ``[int, float32[10]]``)
are stored *by column* when they are all lists (or all tuples, or all dicts with the same keys)
of the same length whose every column is either arrays of one dtype and shape, or Python
scalars of one type: one stacked array per array column (encoding each array on its own would
cost tens of milliseconds per ``state_dict()``), decoded back into the same datapoints (equal
values, dtypes, shapes and container types; the arrays of a decoded buffer are views of one
block). Anything else is encoded datapoint by datapoint.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from . import codec
from ._errors import StateError

__all__ = [
    "check_plain",
    "decode_items",
    "encode_items",
    "field",
    "int_field",
    "exhausted",
    "load_rng",
    "plain_rng_state",
    "position",
    "save_rng",
]

_INT64 = 2**63
_SCALARS = (int, float, str, bytes, bool, type(None))


def field(stage: str, state: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """``state[key]``, checked to be of ``kind`` (``bool`` is never taken for ``int``)."""
    if not isinstance(state, Mapping):
        raise StateError(f"{stage}: its saved state must be a dict, got {type(state).__name__}")
    if key not in state:
        raise StateError(
            f"{stage}: the saved state has no field {key!r} (fields: {sorted(map(str, state))}); "
            f"it is corrupted or was saved by another kind of stage"
        )
    value = state[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = "/".join(k.__name__ for k in kinds)
        got = f"{type(value).__name__} ({value!r:.60})"
        raise StateError(f"{stage}: state field {key!r} must be {names}, got {got}")
    return value


def int_field(
    stage: str, state: Mapping[str, Any], key: str, minimum: int = 0, maximum: int | None = None
) -> int:
    """An ``int`` field within ``[minimum, maximum]``."""
    value = int(field(stage, state, key, int))
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"[{minimum}, {maximum}]" if maximum is not None else f">= {minimum}"
        raise StateError(f"{stage}: state field {key!r} is {value}, outside {bound}; the state does not fit")
    return value


def _to_plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.dtype.str, "shape": list(value.shape), "data": value.tobytes()}
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = int(value)
        return value if -_INT64 <= value < _INT64 else {"__int__": hex(value)}
    if isinstance(value, (list, tuple)):
        return [_to_plain(v) for v in value]
    return value


def from_plain(value: Any) -> Any:
    if isinstance(value, dict):
        if "__int__" in value:
            return int(value["__int__"], 16)
        if "__ndarray__" in value:
            arr = np.frombuffer(value["data"], dtype=np.dtype(value["__ndarray__"]))
            return arr.reshape(value["shape"]).copy()
        return {k: from_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_plain(v) for v in value]
    return value


def save_rng(rng: Any) -> dict[str, Any]:
    """The state of a numpy ``Generator`` (or ``RandomState``) as plain data."""
    return plain_rng_state(rng.bit_generator.state)


def plain_rng_state(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A ``bit_generator.state`` dict (taken earlier) as plain data."""
    return _to_plain(raw)  # type: ignore[no-any-return]


def load_rng(stage: str, rng: Any, state: Any) -> None:
    """Restore :func:`save_rng`'s output into ``rng`` (same bit generator kind)."""
    try:
        rng.bit_generator.state = from_plain(state)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise StateError(f"{stage}: the saved random-generator state does not fit ({e})") from e


def exhausted(it: Iterator[Any]) -> bool:
    """Whether a ``list``/``tuple`` iterator has raised ``StopIteration`` (CPython drops the
    sequence then, which ``__reduce__`` shows). A ``range`` iterator never says so."""
    return len(it.__reduce__()) < 3


def position(it: Iterator[Any], total: int) -> int:
    """How many items a ``list``/``tuple``/``range`` iterator over ``total`` items has yielded,
    read without advancing it (``total`` once exhausted)."""
    reduced = it.__reduce__()
    return total if len(reduced) < 3 else int(reduced[2])


def check_plain(stage: str, value: Any, where: str = "state") -> None:
    """Raise :class:`StateError` unless ``value`` is plain data (see the module docstring)."""
    if isinstance(value, bytes) and not value:
        raise StateError(
            f"{stage}: {where} is empty bytes; store None instead (torch.save writes b'' in a way "
            f"torch.load(weights_only=True) refuses)"
        )
    if value is None or isinstance(value, (bool, float, str, bytes)):
        return
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise StateError(f"{stage}: {where} holds the int {value}, outside int64; store it as a str")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise StateError(f"{stage}: {where} has a non-str key {k!r}; state dict keys must be str")
            check_plain(stage, v, f"{where}[{k!r}]")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_plain(stage, v, f"{where}[{i}]")
        return
    raise StateError(
        f"{stage}: {where} holds a {type(value).__name__}; a state may hold only dicts with str keys, "
        f"lists, int, float, str, bytes, bool and None (encode datapoints with dataflow.codec.dumps)"
    )


def check_file_count(stage: str, state: Mapping[str, Any], files: int) -> None:
    """A file-reading source's state must be for as many files as it reads."""
    if int_field(stage, state, "files") != files:
        raise StateError(f"{stage}: the state was saved for {state['files']} files, this flow reads {files}")


def offset_field(stage: str, state: Mapping[str, Any]) -> int:
    """A byte offset, stored as a decimal ``str`` (JSON keeps it exact beyond 2**53)."""
    offset = field(stage, state, "offset", str)
    if not offset.isdigit():
        raise StateError(
            f"{stage}: state field 'offset' must be a non-negative int as str, got {offset!r:.40}"
        )
    return int(offset)


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
