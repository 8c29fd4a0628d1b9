"""What a WebDataset member's bytes mean, by its extension: the default decoders of
:class:`~dataflow.WebDatasetData` and their inverses, the encoders of
:meth:`~dataflow.WebDatasetSerializer.save`.

An extension is chosen by its last part, lowercased (``"seg.png"`` decodes as ``png``), as the
``webdataset`` package does. NumPy files are read without pickle; images need OpenCV (the
``[image]`` extra), imported when the first image is decoded or encoded.
"""

from __future__ import annotations

import io
import json
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ._common import require

__all__ = ["DECODERS", "ENCODERS", "IMAGE_EXTENSIONS", "encode_value", "last_extension"]

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "ppm", "pgm", "pbm", "bmp", "webp", "tif", "tiff")
_INT_EXTENSIONS = ("cls", "cls2", "class", "count", "index", "inx", "idx", "id")
_TEXT_EXTENSIONS = ("txt", "text", "transcript")


def last_extension(ext: str) -> str:
    return ext.rsplit(".", 1)[-1].lower()


def _npy(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)  # type: ignore[no-any-return]


def _npz(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _image(data: bytes) -> np.ndarray:
    """An RGB ``uint8`` array ``(H, W, 3)`` (alpha dropped, gray images expanded)."""
    cv2 = require("cv2", "image", "WebDatasetData")
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError("OpenCV cannot decode it as an image")
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)  # type: ignore[no-any-return]


def _text(data: bytes) -> str:
    return data.decode("utf-8")


DECODERS: dict[str, Callable[[bytes], Any]] = {
    **dict.fromkeys(_TEXT_EXTENSIONS, _text),
    **dict.fromkeys(_INT_EXTENSIONS, int),
    "json": json.loads,
    "jsn": json.loads,
    "npy": _npy,
    "npz": _npz,
    **dict.fromkeys(IMAGE_EXTENSIONS, _image),
}


def _int_bytes(value: Any) -> bytes:
    return str(operator.index(value)).encode("ascii")


def _npy_bytes(value: Any) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, np.asarray(value), allow_pickle=False)
    return out.getvalue()


def _npz_bytes(value: Any) -> bytes:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"an npz member holds a dict of arrays with str keys, got {type(value).__name__}")
    out = io.BytesIO()
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in value.items()}
    np.savez(out, **arrays)
    return out.getvalue()


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


def _image_encoder(ext: str) -> Callable[[Any], bytes]:
    def encode(value: Any) -> bytes:
        cv2 = require("cv2", "image", "WebDatasetSerializer.save")
        img = np.asarray(value)
        if img.ndim == 3 and img.shape[2] == 3:
            img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
        ok, buf = cv2.imencode("." + ext, img)
        if not ok:
            raise ValueError(f"OpenCV cannot encode an array of {img.dtype} {img.shape} as {ext}")
        return bytes(buf)

    return encode


ENCODERS: dict[str, Callable[[Any], bytes]] = {
    **dict.fromkeys(_INT_EXTENSIONS, _int_bytes),
    "json": _json_bytes,
    "jsn": _json_bytes,
    "npy": _npy_bytes,
    "npz": _npz_bytes,
    **{ext: _image_encoder(ext) for ext in IMAGE_EXTENSIONS},
}


def encode_value(ext: str, value: Any) -> bytes:
    """The bytes of member ``<key>.<ext>`` holding ``value``: ``bytes`` as they are, ``str``
    as UTF-8, anything else by :data:`ENCODERS` of the extension's last part."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    encoder = ENCODERS.get(last_extension(ext))
    if encoder is None:
        raise TypeError(
            f"no encoder for a {type(value).__name__} in a .{ext} member; give bytes or str, or use "
            f"an extension that says how to encode it ({', '.join(sorted(ENCODERS))})"
        )
    return encoder(value)
