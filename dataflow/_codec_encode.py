"""Encoding with the safe codec: a datapoint to a msgpack body and the separate buffers of
its arrays (:func:`dumps_frames`), or to one payload (:func:`dumps`, :func:`dumps_parts`).
:mod:`dataflow.codec` re-exports them beside their decoders. This module owns the format's
constants (the version header, the extension type codes), which the decoder imports; it
imports nothing from :mod:`dataflow.codec`."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import numpy as np

from ._errors import CodecError
from ._msgpack import Packer as _Packer  # never what msgpack_numpy.patch() put in msgpack

CODEC_VERSION = 1
_MAGIC = b"DFC"
_HEADER = _MAGIC + bytes([CODEC_VERSION])

_EXT_ARRAY = 1
_EXT_TUPLE = 2
_EXT_SCALAR = 3
_EXT_COMPLEX = 4


_TUPLE_MARK_EXT = msgpack.ExtType(_EXT_TUPLE, b"")
# Subclasses of these (IntEnum, OrderedDict...) are encoded as the base type.
_PLAIN_BASES: tuple[type[Any], ...] = (bool, int, float, str, bytes, list, dict)


def _check_dtype(dtype: np.dtype, what: str) -> None:
    if dtype.hasobject:
        raise CodecError(
            f"codec: {what} has dtype {dtype} holding Python objects, which cannot be encoded "
            f"safely (it would need pickle); convert it to a numeric/str array or a list"
        )


_tuple_new = tuple.__new__  # ExtType's own __new__ re-checks types (1 us per array)
_SMALL_INTS = [bytes([i]) for i in range(128)]  # msgpack's positive fixint: the int itself
_PREFIXES: dict[tuple[np.dtype, tuple[int, ...]], bytes] = {}  # see _array_prefix
_MAX_PREFIXES = 1024


def _array_prefix(arr: np.ndarray) -> bytes:
    """The start of an array's extension payload, the msgpack of ``[descr, shape, index]``
    up to ``index``: a 3-element array header, ``descr``, ``shape``. Datapoints of one
    dataset repeat a few dtypes and shapes, so each prefix is built (and its dtype checked)
    once: a Packer per array cost more than the rest of encoding a small array. The bytes
    are those of packing the whole list at once."""
    key = (arr.dtype, arr.shape)
    prefix = _PREFIXES.get(key)
    if prefix is None:
        _check_dtype(arr.dtype, "a numpy array")
        descr = arr.dtype.descr if arr.dtype.fields else arr.dtype.str
        packer = _Packer(use_bin_type=True)
        prefix = b"\x93" + packer.pack(descr) + packer.pack(arr.shape)
        if len(_PREFIXES) >= _MAX_PREFIXES:
            _PREFIXES.clear()
        _PREFIXES[key] = prefix
    return prefix


class _Encoder:
    """One encoding: msgpack for the structure, array bytes collected as separate buffers."""

    def __init__(self) -> None:
        self.buffers: list[memoryview] = []

    def array(self, arr: np.ndarray, code: int) -> msgpack.ExtType:
        prefix = _array_prefix(arr)
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")  # ascontiguousarray makes 0-d 1-d
        try:  # the bytes, no copy: the buffer protocol is ~4x cheaper than reshape/view/.data
            data = memoryview(arr).cast("B")  # type: ignore[arg-type]
        except (TypeError, ValueError):  # datetimes (no buffer format), zero-size sides
            data = arr.reshape(-1).view(np.uint8).data
        buffers = self.buffers
        index = len(buffers)
        buffers.append(data)
        header = prefix + (_SMALL_INTS[index] if index < 128 else _Packer().pack(index))
        return _tuple_new(msgpack.ExtType, (code, header))  # ExtType(code, header), unchecked: both are right

    def default(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            return self.array(obj, _EXT_ARRAY)
        if isinstance(obj, tuple):  # a marked list: decoding never nests unpackb calls
            return [_TUPLE_MARK_EXT, *obj]
        if isinstance(obj, np.generic):
            return self.array(np.asarray(obj), _EXT_SCALAR)
        if isinstance(obj, complex):
            return msgpack.ExtType(_EXT_COMPLEX, _Packer(use_bin_type=True).pack([obj.real, obj.imag]))
        for base in _PLAIN_BASES:
            if isinstance(obj, base):
                return base(obj)
        raise CodecError(
            f"codec: cannot encode a {type(obj).__module__}.{type(obj).__qualname__} safely; "
            f"datapoints may hold None, bool, int, float, complex, str, bytes, lists, tuples, "
            f"dicts and numpy arrays/scalars"
        )

    def pack(self, obj: Any) -> bytes:
        return _Packer(default=self.default, use_bin_type=True, strict_types=True).pack(obj)  # type: ignore[no-any-return]


def dumps_frames(obj: Any) -> list[Any]:
    """Encode ``obj`` as ``[header + msgpack body, *array buffers]`` without copying the arrays:
    send these as one multipart message (see :func:`loads_frames`)."""
    enc = _Encoder()
    try:
        body = enc.pack(obj)
    except CodecError:
        raise
    except OverflowError as e:
        raise CodecError(f"codec: an integer outside -2**63 .. 2**64-1 cannot be encoded ({e})") from e
    except (TypeError, ValueError, RecursionError) as e:  # msgpack: "recursion limit exceeded"
        raise CodecError(f"codec: cannot encode {type(obj).__name__}: {e}") from e
    return [_HEADER + body, *enc.buffers]


def dumps(obj: Any) -> bytes:
    """Encode ``obj`` with the safe codec into one ``bytes`` (see :mod:`dataflow.codec`).
    Raises :class:`CodecError` for objects it cannot represent without pickle."""
    return b"".join(dumps_parts(obj))


def dumps_parts(obj: Any) -> list[Any]:
    """The bytes of :func:`dumps` as a list of buffers (the arrays' own memory, not copied):
    for writers that copy anyway (a file, a database) and need not join them first. Valid
    until the arrays in ``obj`` change."""
    head, *buffers = dumps_frames(obj)
    lengths = struct.pack(f"<QI{len(buffers)}Q", len(head) - 4, len(buffers), *(b.nbytes for b in buffers))
    return [head[:4], lengths, memoryview(head)[4:], *buffers]
