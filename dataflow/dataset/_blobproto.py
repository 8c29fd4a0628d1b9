"""Caffe's ``BlobProto`` message (``*.binaryproto``, e.g. ``imagenet_mean.binaryproto``) decoded
without Caffe or protobuf, with the wire-format reader of :mod:`dataflow.formats._caffe_lmdb`.

Fields read (``caffe.proto``): ``num`` (1), ``channels`` (2), ``height`` (3), ``width`` (4),
``data`` (5, ``float``), ``shape`` (7, a ``BlobShape`` of ``int64 dim = 1``) and ``double_data``
(8, used when ``data`` is empty). Repeated numbers may be packed or not, as protobuf allows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats._caffe_lmdb import _fields, _varint

__all__ = ["decode_blob_proto"]


def _numbers(values: list[Any], fmt: str) -> np.ndarray:
    """Repeated ``float``/``double`` field values (packed runs or single values) as one array."""
    size = np.dtype(fmt).itemsize
    kind = "float" if size == 4 else "double"
    if not all(isinstance(v, bytes) for v in values):
        raise ValueError(f"{kind} data encoded as a varint")
    raw = b"".join(values)
    if len(raw) % size:
        raise ValueError(f"{len(raw)} bytes of {kind} data")
    return np.frombuffer(raw, fmt)


def _dims(values: list[Any]) -> list[int]:
    """``BlobShape.dim``: varints, unpacked (ints) or packed (bytes)."""
    dims: list[int] = []
    for v in values:
        if isinstance(v, int):
            dims.append(v)
            continue
        pos = 0
        while pos < len(v):
            d, pos = _varint(v, pos)
            dims.append(d)
    return dims


def decode_blob_proto(buf: bytes) -> np.ndarray:
    """The blob's values as a ``float32`` array of its shape (``shape`` if set, else
    ``(num, channels, height, width)``). Raises :class:`ValueError` if the message is malformed
    or its values do not fill its shape."""
    f = _fields(bytes(buf))
    if 7 in f:
        shape = _dims(_fields(f[7][-1]).get(1, []))
    else:
        shape = [f.get(k, [0])[-1] for k in (1, 2, 3, 4)]
    data = _numbers(f.get(5, []), "<f4")
    if not data.size and 8 in f:
        data = _numbers(f[8], "<f8")
    if not shape or int(np.prod(shape)) != data.size:
        raise ValueError(f"{data.size} values for the shape {tuple(shape)}")
    return data.astype(np.float32).reshape(shape)
