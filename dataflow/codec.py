"""Encoding datapoints to bytes: a safe, versioned codec for disks and networks, and a fast
local one for processes of one runner.

:func:`dumps` / :func:`loads` — **safe**: msgpack, never pickle, so decoding bytes from an
untrusted machine cannot run code. It keeps what ML datapoints hold:

- ``None``, ``bool``, ``int`` (any size msgpack supports: -2**63 .. 2**64-1), ``float``,
  ``complex``, ``str``, ``bytes``;
- ``list`` and ``dict`` (keys of any encodable scalar type, ints included), **tuples stay
  tuples**;
- numpy arrays of every numeric, bool, bytes/str (``S``/``U``) and datetime dtype, of any
  shape (zero-size included; non-contiguous ones are made contiguous), decoded as writable
  arrays; numpy scalars decode as numpy scalars.

Object arrays (which would need pickle) and other Python objects raise
:class:`CodecError` naming the type. Every payload starts with ``DFC`` and a version byte;
bytes written by a newer version are refused with a message saying which version wrote them.

:func:`dumps_local` / :func:`loads_local` — pickle protocol 5, fast and general, for use
**only** between processes that trust each other (the workers of one runner).
"""

from __future__ import annotations

import functools
import math
import pickle
import struct
from typing import Any

import msgpack
import numpy as np

# The implementation itself, not the ``msgpack`` module's attributes: ``msgpack_numpy.patch()``
# (run by ``import tensorpack``) replaces those with functions that pickle object arrays and
# unpickle on decode.
try:
    from msgpack._cmsgpack import Packer as _Packer
    from msgpack._cmsgpack import unpackb as _unpackb
except ImportError:  # pragma: no cover - msgpack built without its C extension
    from msgpack.fallback import Packer as _Packer
    from msgpack.fallback import unpackb as _unpackb

from .errors import CodecError

__all__ = [
    "CODEC_VERSION",
    "CodecError",
    "dumps",
    "dumps_frames",
    "dumps_local",
    "dumps_parts",
    "loads",
    "loads_frames",
    "loads_local",
]

CODEC_VERSION = 1
_MAGIC = b"DFC"
_HEADER = _MAGIC + bytes([CODEC_VERSION])

_dtype = functools.lru_cache(maxsize=256)(np.dtype)  # dtype strings repeat: parse each once

_EXT_ARRAY = 1
_EXT_TUPLE = 2
_EXT_SCALAR = 3
_EXT_COMPLEX = 4


_TUPLE_MARK = object()  # decoded marker: the list it heads is a tuple
_TUPLE_MARK_EXT = msgpack.ExtType(_EXT_TUPLE, b"")
# Subclasses of these (IntEnum, OrderedDict...) are encoded as the base type.
_PLAIN_BASES: tuple[type[Any], ...] = (bool, int, float, str, bytes, list, dict)


def _check_dtype(dtype: np.dtype, what: str) -> None:
    if dtype.hasobject:
        raise CodecError(
            f"codec: {what} has dtype {dtype} holding Python objects, which cannot be encoded "
            f"safely (it would need pickle); convert it to a numeric/str array or a list"
        )


class _Encoder:
    """One encoding: msgpack for the structure, array bytes collected as separate buffers."""

    def __init__(self) -> None:
        self.buffers: list[memoryview] = []

    def array(self, arr: np.ndarray, code: int) -> msgpack.ExtType:
        _check_dtype(arr.dtype, "a numpy array")
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")  # ascontiguousarray makes 0-d 1-d
        self.buffers.append(arr.reshape(-1).view(np.uint8).data)  # no copy; datetime/structured too
        descr = arr.dtype.descr if arr.dtype.fields else arr.dtype.str
        return msgpack.ExtType(
            code, _Packer(use_bin_type=True).pack([descr, arr.shape, len(self.buffers) - 1])
        )

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
        return _Packer(default=self.default, use_bin_type=True, strict_types=True).pack(obj)


@functools.lru_cache(maxsize=1024)
def _array_header(data: bytes) -> tuple[np.dtype, tuple[int, ...], int, int]:
    """``(dtype, shape, buffer index, byte size)`` of an array's extension payload, checked.
    Datapoints of one dataset repeat the same few headers: each is parsed and checked once
    (the cache is bounded; errors are not cached)."""
    descr, shape, index = _unpackb(data, raw=False)
    dtype = _dtype(descr) if isinstance(descr, str) else np.dtype([tuple(f) for f in descr])
    _check_dtype(dtype, "the encoded array")
    shape = tuple(shape)
    if any(type(n) is not int or n < 0 for n in shape) or type(index) is not int or index < 0:
        raise CodecError(f"codec: malformed array header (shape {shape}, buffer {index})")
    return dtype, shape, index, math.prod(shape) * dtype.itemsize


class _Decoder:
    """One decoding: rebuilds arrays from the buffers (views when they are writable)."""

    __slots__ = ("buffers", "marks")

    def __init__(self, buffers: list[memoryview]) -> None:
        self.buffers = buffers
        self.marks = 0  # tuple markers decoded and not yet consumed by the list they head

    def ext_hook(self, code: int, data: bytes) -> Any:
        if code == _EXT_ARRAY or code == _EXT_SCALAR:  # inline: the hot path of every array
            dtype, shape, index, expected = _array_header(data)
            buffers = self.buffers
            if index >= len(buffers):
                raise CodecError(f"codec: malformed array header (buffer {index} of {len(buffers)})")
            raw = buffers[index]
            if raw.nbytes != expected:
                raise CodecError(
                    f"codec: array of shape {shape} and dtype {dtype} needs {expected} bytes, "
                    f"got {raw.nbytes}"
                )
            arr = (np.frombuffer(raw, dtype) if expected else np.empty(0, dtype)).reshape(shape)
            if not arr.flags.writeable:
                arr = arr.copy()  # input was immutable bytes: give an owned, writable array
            return arr[()] if code == _EXT_SCALAR else arr
        if code == _EXT_TUPLE:
            if data:
                raise CodecError("codec: malformed tuple marker")
            self.marks += 1
            return _TUPLE_MARK
        if code == _EXT_COMPLEX:
            real, imag = _unpackb(data)
            return complex(real, imag)
        raise CodecError(f"codec: unknown extension type {code}")

    def list_hook(self, items: list[Any]) -> Any:
        if items and items[0] is _TUPLE_MARK:
            self.marks -= 1
            return tuple(items[1:])
        return items

    def unpack(self, data: bytes | memoryview) -> Any:
        hooks = {"ext_hook": self.ext_hook, "list_hook": self.list_hook}
        out = _unpackb(data, raw=False, strict_map_key=False, use_list=True, **hooks)
        if self.marks:  # a marker anywhere but at the head of a list: never hand it out
            raise CodecError("codec: malformed data (a tuple marker outside the head of a list)")
        return out


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


def loads_frames(frames: list[Any]) -> Any:
    """Decode the frames of :func:`dumps_frames`; arrays view writable frames (no copy)."""
    if not frames:
        raise CodecError("codec: no data")
    body = _check_header(memoryview(frames[0]))
    return _decode(body, [memoryview(f).cast("B") for f in frames[1:]])


def dumps(obj: Any) -> bytes:
    """Encode ``obj`` with the safe codec into one ``bytes`` (see the module docstring).
    Raises :class:`CodecError` for objects it cannot represent without pickle."""
    return b"".join(dumps_parts(obj))


def dumps_parts(obj: Any) -> list[Any]:
    """The bytes of :func:`dumps` as a list of buffers (the arrays' own memory, not copied):
    for writers that copy anyway (a file, a database) and need not join them first. Valid
    until the arrays in ``obj`` change."""
    head, *buffers = dumps_frames(obj)
    lengths = struct.pack(f"<QI{len(buffers)}Q", len(head) - 4, len(buffers), *(b.nbytes for b in buffers))
    return [head[:4], lengths, memoryview(head)[4:], *buffers]


_LAYOUT = struct.Struct("<QI")  # body length, buffer count (after the 4-byte header)


@functools.lru_cache(maxsize=64)
def _lengths(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}Q")


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Decode bytes from :func:`dumps`. Never runs code from the input; malformed or
    truncated input raises :class:`CodecError`. Arrays view ``data`` when it is writable;
    when it is not (``bytes``, a read-only map), the arrays' bytes are copied once, into one
    buffer that the arrays of this datapoint share (each array is owned and writable)."""
    view = memoryview(data).cast("B")
    _check_header(view)
    try:
        body_len, count = _LAYOUT.unpack_from(view, 4)
        lengths = (
            _lengths(count).unpack_from(view, 16)
            if count < 4096
            else struct.unpack_from(f"<{count}Q", view, 16)
        )
    except struct.error as e:
        raise CodecError(f"codec: truncated data ({e})") from None
    pos = 16 + 8 * count
    body = view[pos : pos + body_len]
    pos += body_len
    end = pos + sum(lengths)
    if end != view.nbytes or body.nbytes != body_len:
        raise CodecError(f"codec: truncated or oversized data ({view.nbytes} bytes, layout says {end})")
    if view.readonly and pos < end:
        view, pos = memoryview(bytearray(view[pos:])), 0  # one copy for all arrays, not one each
    buffers = []
    for n in lengths:
        buffers.append(view[pos : pos + n])
        pos += n
    return _decode(body, buffers)


def _check_header(view: memoryview) -> memoryview:
    if view[:4] == _HEADER:  # the current version: one comparison
        return view[4:]
    if view.nbytes < len(_HEADER) or bytes(view[:3]) != _MAGIC:
        raise CodecError("codec: not dataflow-codec data (missing the 'DFC' header)")
    version = view[3]
    if version > CODEC_VERSION:
        raise CodecError(
            f"codec: this data was written by codec version {version}, newer than this library's "
            f"version {CODEC_VERSION}; upgrade dataflow-ml to read it"
        )
    return view[len(_HEADER) :]


def _decode(body: memoryview, buffers: list[memoryview]) -> Any:
    try:
        out = _Decoder(buffers).unpack(body)
    except CodecError:
        raise
    except Exception as e:  # msgpack raises several types for malformed input
        raise CodecError(f"codec: malformed data ({type(e).__name__}: {e})") from e
    return out


def dumps_local(obj: Any) -> bytes:
    """Pickle protocol 5. Only for processes that trust each other (one runner's workers)."""
    return pickle.dumps(obj, protocol=5)


def loads_local(data: bytes | bytearray | memoryview) -> Any:
    """Unpickle. **Never** call this on data from another machine or an untrusted file."""
    return pickle.loads(data)
