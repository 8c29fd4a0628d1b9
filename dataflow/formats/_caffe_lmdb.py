"""Caffe's LMDB databases of ``caffe.Datum`` protobufs: :func:`CaffeLMDB`.

The ``Datum`` message is decoded here (about thirty lines of protobuf wire format), so neither
Caffe nor protobuf nor a ``protoc`` run is needed, unlike in tensorpack. Fields read:
``channels`` (1), ``height`` (2), ``width`` (3), ``data`` (4, raw ``uint8`` CHW pixels),
``label`` (5), ``float_data`` (6, used when ``data`` is empty) and ``encoded`` (7).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..base import DataFlow
from ._common import FormatError, PathType
from ._lmdb_data import LMDBData
from ._lmdb_decoder import LMDBDataDecoder

__all__ = ["CaffeLMDB", "decode_datum"]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
            if len(value) != n:
                raise ValueError("truncated bytes field")
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.setdefault(num, []).append(value)
    return out


def decode_datum(value: bytes) -> list[Any]:
    """``[HWC image, label]`` from a serialized ``caffe.Datum``: ``uint8`` pixels, or ``float32``
    from ``float_data``. Raises :class:`ValueError` for a malformed or JPEG-``encoded`` datum."""
    f = _fields(bytes(value))
    c, h, w = (f.get(k, [0])[-1] for k in (1, 2, 3))
    if f.get(7, [0])[-1]:
        raise ValueError("the datum holds an encoded (compressed) image; decode f[4] with an image library")
    if f.get(4) and f[4][-1]:
        img = np.frombuffer(f[4][-1], np.uint8)
    else:
        floats = b"".join(v if isinstance(v, bytes) else struct.pack("<f", v) for v in f.get(6, []))
        img = np.frombuffer(floats, "<f4").astype(np.float32)
    if img.size != c * h * w:
        raise ValueError(f"{img.size} values for channels={c} height={h} width={w}")
    label = f.get(5, [0])[-1]
    label = label - (1 << 64) if label >= 1 << 63 else label  # int32 negatives are 10-byte varints
    return [img.reshape(c, h, w).transpose(1, 2, 0), int(label)]


def CaffeLMDB(
    lmdb_path: PathType, shuffle: bool = True, keys: Any = None, seed: int | None = None
) -> DataFlow[Any]:
    """Read a Caffe LMDB (values are ``caffe.Datum``) and yield ``[HWC image, label]``.

    ``lmdb_path``, ``shuffle`` and ``keys`` are :class:`~dataflow.LMDBData`'s (e.g.
    ``keys="{:0>8d}"``). A value that is not a valid ``Datum`` raises :class:`FormatError`
    naming its key (tensorpack logged and skipped it)."""

    def decoder(k: bytes, v: bytes) -> list[Any]:
        try:
            return decode_datum(v)
        except ValueError as e:
            raise FormatError(f"CaffeLMDB: {lmdb_path}: key {bytes(k)!r} is not a caffe Datum ({e})") from e

    return LMDBDataDecoder(LMDBData(lmdb_path, shuffle, keys, seed=seed), decoder)
