"""Value filters: :class:`MeanVarianceNormalize`, :class:`MinMaxNormalize`, :class:`Clip`,
:class:`GaussianBlur` (pixels only; also importable from :mod:`dataflow.imgaug.imgproc`, where
tensorpack kept them), and the lookup-table helper the colour augmentors share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._deprecation import warn_once
from ._opencv import cv2
from .base import PhotometricAugmentor

__all__ = ["Clip", "GaussianBlur", "MeanVarianceNormalize", "MinMaxNormalize", "apply_lut"]


def apply_lut(img: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Map a ``uint8`` image through ``table``: shape ``(256,)`` for every channel, or
    ``(256, c)`` for channel ``c`` apart. The result's dtype is the table's (``uint8`` here)."""
    cv = cv2()
    if table.ndim == 1 or img.ndim == 2 or table.shape[1] == 1:
        if table.ndim == 2:
            table = table[:, 0]
        out = cv.LUT(img, table)
    elif img.shape[2] == table.shape[1] and img.shape[2] <= 4:
        out = cv.LUT(img, np.ascontiguousarray(table.reshape(256, 1, -1)))
    else:
        out = np.take_along_axis(table, img.reshape(-1, img.shape[2]).astype(np.intp), axis=0)
        out = out.reshape(img.shape)
    return out[:, :, np.newaxis] if img.ndim == 3 and out.ndim == 2 else out  # type: ignore[no-any-return]


def _stats(img: np.ndarray, all_channel: bool, *reductions: Callable[..., Any]) -> list[Any]:
    """Each reduction of ``img``: over all its values, or per channel (kept broadcastable)."""
    if all_channel:
        return [f(img) for f in reductions]
    return [f(img, axis=(0, 1), keepdims=True) for f in reductions]


class MeanVarianceNormalize(PhotometricAugmentor):
    """``(x - mean) / max(std, 1 / sqrt(num_values))``, over all channels together
    (``all_channel``) or per channel. Returns ``float32``."""

    def __init__(self, all_channel: bool = True) -> None:
        self.all_channel = all_channel

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        img = img.astype(np.float32)
        mean, std = _stats(img, self.all_channel, np.mean, np.std)
        std = np.maximum(std, 1.0 / np.sqrt(np.prod(img.shape)))
        img -= mean
        img /= std
        return img


class GaussianBlur(PhotometricAugmentor):
    """Gaussian blur with a window of ``2 * size + 1``, ``size`` drawn from ``size_range``
    (``[low, high)``; an int ``n`` means ``(0, n)``) and sigma from ``sigma_range`` (0: OpenCV's
    default for the window); ``symmetric``: the same for x and y. ``max_size``: deprecated
    spelling of ``size_range=(0, max_size)``."""

    def __init__(
        self,
        size_range: Any = (0, 3),
        sigma_range: Any = (0, 0),
        symmetric: bool = True,
        max_size: Any = None,
    ) -> None:
        super().__init__()
        if not isinstance(size_range, (list, tuple)):
            size_range = (0, size_range)
        if not isinstance(sigma_range, (list, tuple)):
            raise TypeError(f"GaussianBlur: sigma_range must be a (min, max) pair, got {sigma_range!r}")
        if max_size is not None:
            warn_once(
                "GaussianBlur.max_size", "GaussianBlur(max_size=) is deprecated: use size_range=(0, max_size)"
            )
            size_range = (0, max_size)
        self.size_range, self.sigma_range, self.symmetric, self.max_size = (
            size_range,
            sigma_range,
            symmetric,
            max_size,
        )

    def _get_augment_params(self, _: Any) -> tuple[tuple[int, int], tuple[float, float]]:
        sx, sy = (int(s) * 2 + 1 for s in self.rng.integers(self.size_range[0], self.size_range[1], size=2))
        gx, gy = (float(g) for g in self._rand_range(self.sigma_range[0], self.sigma_range[1], (2,)))
        if self.symmetric:
            sy, gy = sx, gx
        return (sx, sy), (gx, gy)

    def _augment(self, img: np.ndarray, prm: Any) -> np.ndarray:
        size, sigma = prm
        cv = cv2()
        out = cv.GaussianBlur(img, size, sigmaX=sigma[0], sigmaY=sigma[1], borderType=cv.BORDER_REPLICATE)
        return np.reshape(out, img.shape)


class Clip(PhotometricAugmentor):
    """Clip values to ``[min, max]``."""

    def __init__(self, min: float = 0, max: float = 255) -> None:  # noqa: A002 - tensorpack's names
        self.min, self.max = min, max

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        return np.clip(img, self.min, self.max)  # type: ignore[no-any-return]


class MinMaxNormalize(PhotometricAugmentor):
    """Scale values linearly to ``[min, max]``, over all channels together (``all_channel``)
    or per channel. Returns ``float32``."""

    def __init__(self, min: float = 0, max: float = 255, all_channel: bool = True) -> None:  # noqa: A002
        self.min, self.max, self.all_channel = min, max, all_channel

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        img = img.astype(np.float32)
        lo, hi = _stats(img, self.all_channel, np.min, np.max)
        return (self.max - self.min) * (img - lo) / (hi - lo) + self.min  # type: ignore[no-any-return]
