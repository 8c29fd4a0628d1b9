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
from itertools import accumulate
from typing import Any

import numpy as np

from ._codec_encode import (
    _EXT_ARRAY,
    _EXT_COMPLEX,
    _EXT_SCALAR,
    _EXT_TUPLE,
    _HEADER,
    _MAGIC,
    CODEC_VERSION,
    _check_dtype,
    dumps,
    dumps_frames,
    dumps_parts,
)
from ._codec_encode import _SMALL_INTS as _SMALL_INTS  # re-exported: tests check the cached
from ._codec_encode import _array_prefix as _array_prefix  # array header through these names
from ._errors import CodecError as CodecError  # the error users catch as dataflow.CodecError
from ._msgpack import unpackb as _unpackb

__all__ = [
    "CODEC_VERSION",
    "dumps",
    "dumps_frames",
    "dumps_local",
    "dumps_parts",
    "loads",
    "loads_frames",
    "loads_local",
]

_dtype = functools.lru_cache(maxsize=256)(np.dtype)  # dtype strings repeat: parse each once

_TUPLE_MARK = object()  # decoded marker: the list it heads is a tuple
_ndarray = np.ndarray


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
    """One decoding: rebuilds arrays over the payload's buffers (views when they are writable).

    Arrays live either in one buffer ``base``, array ``i`` at ``shift + offsets[i]`` up to
    ``shift + offsets[i + 1]`` (:func:`loads`: the payload itself, or one copy of its array
    bytes), or in separate ``buffers`` (:func:`loads_frames`: one per frame, read-only ones
    copied per array)."""

    __slots__ = ("base", "buffers", "marks", "offsets", "seen", "shift")

    def __init__(
        self, base: Any, offsets: tuple[int, ...], shift: int = 0, buffers: list[memoryview] | None = None
    ) -> None:
        self.base = base
        self.offsets = offsets
        self.shift = shift
        self.buffers = buffers
        self.marks = 0  # tuple markers decoded and not yet consumed by the list they head
        self.seen = False  # a tuple marker was decoded

    def ext_hook(self, code: int, data: bytes) -> Any:
        if code == _EXT_ARRAY or code == _EXT_SCALAR:  # inline: the hot path of every array
            dtype, shape, index, expected = _array_header(data)
            buffers = self.buffers
            if buffers is None:
                offsets = self.offsets
                if index + 1 >= len(offsets):
                    raise CodecError(f"codec: malformed array header (buffer {index} of {len(offsets) - 1})")
                start = offsets[index]
                size = offsets[index + 1] - start
                if size == expected:
                    arr = _ndarray(shape, dtype, self.base, self.shift + start)
                    return arr[()] if code == _EXT_SCALAR else arr
            else:
                if index >= len(buffers):
                    raise CodecError(f"codec: malformed array header (buffer {index} of {len(buffers)})")
                raw = buffers[index]
                size = raw.nbytes
                if size == expected:
                    arr = _ndarray(shape, dtype, raw)
                    if raw.readonly:
                        arr = arr.copy()  # an immutable frame: give an owned, writable array
                    return arr[()] if code == _EXT_SCALAR else arr
            raise CodecError(
                f"codec: array of shape {shape} and dtype {dtype} needs {expected} bytes, got {size}"
            )
        if code == _EXT_TUPLE:
            if data:
                raise CodecError("codec: malformed tuple marker")
            self.marks += 1
            self.seen = True
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

    def unpack(self, body: Any, tuples: bool) -> Any:
        """Decode the msgpack ``body``; ``tuples``: with the list hook that turns marked lists
        into tuples. Without it (cheaper: one Python call less per list), a tuple marker met
        makes it decode the body again with the hook."""
        if not tuples:
            out = _unpackb(body, raw=False, strict_map_key=False, ext_hook=self.ext_hook)
            if not self.marks:
                return out
            self.marks = 0
        hooks = {"ext_hook": self.ext_hook, "list_hook": self.list_hook}
        out = _unpackb(body, raw=False, strict_map_key=False, **hooks)
        if self.marks:  # a marker anywhere but at the head of a list: never hand it out
            raise CodecError("codec: malformed data (a tuple marker outside the head of a list)")
        return out


def loads_frames(frames: list[Any]) -> Any:
    """Decode the frames of :func:`dumps_frames`; arrays view writable frames (no copy)."""
    if not frames:
        raise CodecError("codec: no data")
    body = _check_header(memoryview(frames[0]))
    return _decode(_Decoder(None, (), 0, [memoryview(f).cast("B") for f in frames[1:]]), body)


_PREFIX = struct.Struct("<4sQI")  # header, body length, buffer count


def _lengths(count: int) -> struct.Struct:
    """The buffer lengths' layout; cached for up to 64 buffers."""
    layout = struct.Struct(f"<{count}Q")
    if count < 64:
        _LENGTHS[count] = layout
    return layout


_LENGTHS: dict[int, struct.Struct] = {}


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Decode bytes from :func:`dumps`. Never runs code from the input; malformed or
    truncated input raises :class:`CodecError`. Arrays view ``data`` when it is writable;
    when it is not (``bytes``, a read-only map), the arrays' bytes are copied once, into one
    buffer that the arrays of this datapoint share (each array is owned and writable)."""
    view = memoryview(data)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    try:
        magic, body_len, count = _PREFIX.unpack_from(view)
        if magic != _HEADER:
            _check_header(view)
        lengths = (_LENGTHS.get(count) or _lengths(count)).unpack_from(view, 16)
    except struct.error as e:
        _check_header(view)  # short input without our header says so
        raise CodecError(f"codec: truncated data ({e})") from None
    pos = 16 + 8 * count
    stop = pos + body_len
    body = view[pos:stop]
    offsets = _offsets(lengths) if count < 64 else tuple(accumulate(lengths, initial=0))
    if stop + offsets[-1] != view.nbytes or body.nbytes != body_len:
        raise CodecError(
            f"codec: truncated or oversized data ({view.nbytes} bytes, layout says {stop + offsets[-1]})"
        )
    base: Any = view
    shift = stop
    if count and view.readonly:  # one copy for all arrays, not one each
        base, shift = bytearray(view[stop:]), 0
    if _tuples_last[0]:
        return _decode(_Decoder(base, offsets, shift), body)

    def arrays_only(code: int, data: bytes) -> Any:
        """The hot path: arrays and numpy scalars that fit their buffers; anything else
        (a tuple marker, a complex number, an error to explain) takes the full decoder."""
        if code == _EXT_ARRAY or code == _EXT_SCALAR:
            dtype, shape, index, expected = _array_header(data)
            if index + 1 < len(offsets) and offsets[index + 1] - offsets[index] == expected:
                arr = _ndarray(shape, dtype, base, shift + offsets[index])
                return arr[()] if code == _EXT_SCALAR else arr
        raise _NotSimple

    try:
        return _unpackb(body, strict_map_key=False, ext_hook=arrays_only)
    except _NotSimple:
        return _decode(_Decoder(base, offsets, shift), body)
    except CodecError:
        raise
    except Exception as e:  # msgpack raises several types for malformed input
        raise CodecError(f"codec: malformed data ({type(e).__name__}: {e})") from e


class _NotSimple(Exception):
    """Raised by the fast array hook of :func:`loads` for what only the full decoder handles."""


@functools.lru_cache(maxsize=256)
def _offsets(lengths: tuple[int, ...]) -> tuple[int, ...]:
    """Where each buffer starts (and the last ends), relative to the first: the buffer
    lengths of one dataset's datapoints repeat, so each layout is summed once."""
    return tuple(accumulate(lengths, initial=0))


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


def _decode(decoder: _Decoder, body: Any) -> Any:
    """Decode ``body`` with the list hook only while the last datapoints held tuples: the
    datapoints of one pipeline are alike, so the guess is nearly always right, and a wrong
    one costs a second decoding of one datapoint."""
    tuples = _tuples_last[0]
    try:
        out = decoder.unpack(body, tuples)
    except CodecError:
        raise
    except Exception as e:  # msgpack raises several types for malformed input
        raise CodecError(f"codec: malformed data ({type(e).__name__}: {e})") from e
    if decoder.seen is not tuples:
        _tuples_last[0] = decoder.seen
    return out


_tuples_last = [False]  # did the last datapoint decoded (in any thread) hold a tuple?


def dumps_local(obj: Any) -> bytes:
    """Pickle protocol 5. Only for processes that trust each other (one runner's workers)."""
    return pickle.dumps(obj, protocol=5)


def loads_local(data: bytes | bytearray | memoryview) -> Any:
    """Unpickle. **Never** call this on data from another machine or an untrusted file."""
    return pickle.loads(data)
