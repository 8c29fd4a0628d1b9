"""Deterministic transforms: what an augmentor's ``get_transform(img)`` returns.

Every geometric transform maps coordinates (``apply_coords``, an ``N x 2`` array of ``x, y``)
exactly as it moves pixels (``apply_image``), in tensorpack's convention: pixel ``(row i,
column j)`` covers ``[j, j+1) x [i, i+1)``. ``apply_coords`` never modifies its input and
returns floats (float32 stays float32, integers become float64). ``apply_image`` may return a
view of, or modify, its input (as in tensorpack); images keep their number of dimensions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._opencv import BORDER_CONSTANT, INTER_LINEAR, cv2
from ._transform_base import BaseTransform as BaseTransform  # tensorpack's module has it
from ._transform_base import Transform, _cv_ok, _keep_ndim, as_coords
from ._transform_compose import BoundPhotometricTransform as BoundPhotometricTransform
from ._transform_compose import LazyTransform, PhotometricTransform, TransformFactory, TransformList

__all__ = [
    "CropTransform",
    "FlipTransform",
    "LazyTransform",
    "NoOpTransform",
    "PasteTransform",
    "PhotometricTransform",
    "ResizeTransform",
    "Transform",
    "TransformFactory",
    "TransformList",
    "TransposeTransform",
    "WarpAffineTransform",
]


class ResizeTransform(Transform):
    """Resize an ``(h, w)`` image to ``(new_h, new_w)`` with OpenCV interpolation ``interp``."""

    def __init__(self, h: int, w: int, new_h: int, new_w: int, interp: int) -> None:
        self.h, self.w, self.new_h, self.new_w, self.interp = int(h), int(w), int(new_h), int(new_w), interp

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if img.shape[:2] != (self.h, self.w):
            raise ValueError(
                f"ResizeTransform: made for images of {(self.h, self.w)}, applied to one of {img.shape[:2]}"
            )
        ret = cv2().resize(img, (self.new_w, self.new_h), interpolation=self.interp)
        return _keep_ndim(img, ret)

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "ResizeTransform")
        c[:, 0] *= self.new_w / self.w
        c[:, 1] *= self.new_h / self.h
        return c


class CropTransform(Transform):
    """Take the ``h x w`` region whose top-left pixel is ``(y0, x0)`` (a view, no copy)."""

    def __init__(self, y0: int, x0: int, h: int, w: int) -> None:
        self.y0, self.x0, self.h, self.w = int(y0), int(x0), int(h), int(w)

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return img[self.y0 : self.y0 + self.h, self.x0 : self.x0 + self.w]

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "CropTransform")
        c[:, 0] -= self.x0
        c[:, 1] -= self.y0
        return c


class WarpAffineTransform(Transform):
    """``cv2.warpAffine(img, mat, dsize, ...)``: ``mat`` is the 2 x 3 matrix in OpenCV's pixel
    index coordinates; ``apply_coords`` maps coordinates of the pixel-area convention through the
    same matrix (shifted by half a pixel, so a pixel's centre lands on the pixel it moved to)."""

    def __init__(
        self,
        mat: Any,
        dsize: Any,
        interp: int = INTER_LINEAR,
        borderMode: int = BORDER_CONSTANT,  # noqa: N803 - tensorpack's name
        borderValue: Any = 0,  # noqa: N803
    ) -> None:
        self.mat = np.asarray(mat, dtype=np.float64)
        if self.mat.shape != (2, 3):
            raise ValueError(f"WarpAffineTransform: mat must be 2 x 3, got shape {self.mat.shape}")
        self.dsize = (int(dsize[0]), int(dsize[1]))
        self.interp, self.borderMode, self.borderValue = interp, borderMode, borderValue

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        ret = cv2().warpAffine(
            img,
            self.mat,
            self.dsize,
            flags=self.interp,
            borderMode=self.borderMode,
            borderValue=self.borderValue,
        )
        return _keep_ndim(img, ret)

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "WarpAffineTransform")
        m = self.mat
        out = (c - 0.5) @ m[:, :2].T + (m[:, 2] + 0.5)
        return out.astype(c.dtype, copy=False)  # type: ignore[no-any-return]


class FlipTransform(Transform):
    """Flip an ``(h, w)`` image left-right (``horiz=True``: ``x -> w - x``) or upside down
    (``y -> h - y``)."""

    def __init__(self, h: int, w: int, horiz: bool = True) -> None:
        self.h, self.w, self.horiz = int(h), int(w), horiz

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if not _cv_ok(img):
            return img[:, ::-1] if self.horiz else img[::-1]
        return _keep_ndim(img, cv2().flip(img, 1 if self.horiz else 0))  # contiguous, as fast as a view

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "FlipTransform")
        if self.horiz:
            c[:, 0] = self.w - c[:, 0]
        else:
            c[:, 1] = self.h - c[:, 1]
        return c


class TransposeTransform(Transform):
    """Swap the image's rows and columns (``x, y -> y, x``)."""

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if not _cv_ok(img):
            return np.ascontiguousarray(img.swapaxes(0, 1))
        return _keep_ndim(img, cv2().transpose(img))

    def apply_coords(self, coords: Any) -> np.ndarray:
        return as_coords(coords, "TransposeTransform")[:, ::-1].copy()  # type: ignore[no-any-return]


class PasteTransform(Transform):
    """Paste an image at ``(y0, x0)`` of a ``background_shape`` canvas filled by
    ``background_filler`` (coordinates move by ``(x0, y0)``)."""

    def __init__(self, background_shape: Any, y0: int, x0: int, background_filler: Any) -> None:
        self.background_shape = (int(background_shape[0]), int(background_shape[1]))
        self.y0, self.x0, self.background_filler = int(y0), int(x0), background_filler

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        h, w = img.shape[:2]
        bh, bw = self.background_shape
        if self.y0 + h > bh or self.x0 + w > bw:
            raise ValueError(
                f"PasteTransform: an image of {(h, w)} does not fit at {(self.y0, self.x0)} of a "
                f"{(bh, bw)} background"
            )
        out = self.background_filler.fill(self.background_shape, img)
        out[self.y0 : self.y0 + h, self.x0 : self.x0 + w] = img
        return out  # type: ignore[no-any-return]

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "PasteTransform")
        c[:, 0] += self.x0
        c[:, 1] += self.y0
        return c


class NoOpTransform(Transform):
    """Changes nothing: every ``apply_xxx`` returns its input."""

    def apply_image(self, img: Any) -> Any:
        return img

    def apply_coords(self, coords: Any) -> Any:
        return coords

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return lambda x: x
        raise AttributeError(f"NoOpTransform object has no attribute {name!r}")
