"""Conversions: :class:`ColorSpace`, :class:`Grayscale`, :class:`ToUint8`, :class:`ToFloat32`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._opencv import cv2
from .base import PhotometricAugmentor

__all__ = ["ColorSpace", "Grayscale", "ToFloat32", "ToUint8"]


class ColorSpace(PhotometricAugmentor):
    """``cv2.cvtColor(img, mode)`` (e.g. ``cv2.COLOR_BGR2HSV``); with ``keepdims`` a
    one-channel result keeps the input's number of dimensions."""

    def __init__(self, mode: int, keepdims: bool = True) -> None:
        self.mode, self.keepdims = mode, keepdims

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        out = cv2().cvtColor(img, self.mode)
        if self.keepdims and out.ndim != img.ndim:
            out = out[..., np.newaxis]
        return out  # type: ignore[no-any-return]


class Grayscale(ColorSpace):
    """Convert BGR (or RGB with ``rgb=True``) to grayscale: ``(h, w, 1)`` with ``keepdims``,
    ``(h, w)`` without, ``(h, w, 3)`` (gray repeated) with ``keepshape``."""

    def __init__(self, keepdims: bool = True, rgb: bool = False, keepshape: bool = False) -> None:
        if keepshape and not keepdims:
            raise ValueError("Grayscale: keepdims must be True when keepshape is True")
        super().__init__(7 if rgb else 6, keepdims)  # cv2.COLOR_RGB2GRAY / COLOR_BGR2GRAY
        self.keepshape, self.rgb = keepshape, rgb

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        if not self.keepshape:
            return super()._augment(img, _)
        cv = cv2()
        return cv.cvtColor(cv.cvtColor(img, self.mode), cv.COLOR_GRAY2BGR)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"imgaug.Grayscale(keepdims={self.keepdims}, rgb={self.rgb}, keepshape={self.keepshape})"


class ToUint8(PhotometricAugmentor):
    """Clip to ``[0, 255]`` and convert to ``uint8`` (truncating; a ``uint8`` image passes as is)."""

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        if img.dtype == np.uint8:
            return img
        return np.clip(img, 0, 255).astype(np.uint8)  # type: ignore[no-any-return]


class ToFloat32(PhotometricAugmentor):
    """Convert to ``float32`` (a ``float32`` image passes as is)."""

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        return img.astype(np.float32, copy=False)
