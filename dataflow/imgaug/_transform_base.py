"""The base classes of the deterministic transforms and the helpers they share (re-exported by
:mod:`dataflow.imgaug.transform`, whose docstring states the conventions)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BaseTransform", "Transform", "as_coords"]


def as_coords(coords: Any, stage: str) -> np.ndarray:
    """A float copy of an ``N x 2`` coordinate array, or a ``ValueError`` saying what is wrong."""
    arr = np.asarray(coords)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{stage}: coordinates must be an N x 2 array of (x, y), got shape {arr.shape}")
    if arr.dtype.kind == "f":
        return arr.copy()  # type: ignore[no-any-return]
    if arr.dtype.kind not in "iub":
        raise TypeError(f"{stage}: coordinates must be numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


#: dtypes every OpenCV function here takes (int64, bool and float16 go through numpy instead)
_CV_DTYPES = frozenset("uint8 int8 uint16 int16 int32 float32 float64".split())


def _cv_ok(img: np.ndarray) -> bool:
    return img.dtype.name in _CV_DTYPES and (img.ndim == 2 or img.shape[2] <= 4)


def _keep_ndim(img: np.ndarray, ret: np.ndarray) -> np.ndarray:
    return ret[:, :, np.newaxis] if img.ndim == 3 and ret.ndim == 2 else ret


class BaseTransform:
    """Base class of all transforms (for ``isinstance`` checks)."""

    def _init(self, params: dict[str, Any] | None = None) -> None:
        if params:
            for k, v in params.items():
                if k != "self" and not k.startswith("_"):
                    setattr(self, k, v)


class Transform(BaseTransform):
    """A deterministic change of an image. Subclasses implement ``apply_image`` and, when it
    applies, ``apply_coords``; any other ``apply_xxx`` raises ``NotImplementedError``."""

    def __init__(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):

            def missing(x: Any) -> Any:
                raise NotImplementedError(f"{type(self).__name__} does not implement {name}")

            return missing
        raise AttributeError(f"{type(self).__name__} object has no attribute {name!r}")

    def __repr__(self) -> str:
        from .base import default_repr

        return default_repr(self)

    __str__ = __repr__
