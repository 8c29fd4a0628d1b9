"""Colour augmentors: :class:`Hue`, :class:`Brightness`, :class:`BrightnessScale`,
:class:`Contrast`, :class:`Gamma`, :class:`Saturation`, :class:`Lighting` (pixels only).

They compute what tensorpack's do (``float32`` arithmetic, clipping to ``[0, 255]``, truncation
back to ``uint8``), but a ``uint8`` image goes through one 256-entry lookup table per channel
instead of a float copy of the whole image. Value filters, where tensorpack kept them:
:class:`MeanVarianceNormalize`, :class:`MinMaxNormalize`, :class:`Clip`, :class:`GaussianBlur`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._deprecation import warn_once
from ._opencv import cv2
from .base import PhotometricAugmentor

__all__ = [
    "Brightness",
    "BrightnessScale",
    "Clip",
    "Contrast",
    "Gamma",
    "GaussianBlur",
    "Hue",
    "Lighting",
    "MeanVarianceNormalize",
    "MinMaxNormalize",
    "Saturation",
]

_LEVELS = np.arange(256, dtype=np.float32)
_U8 = np.arange(256, dtype=np.uint8)


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
        if not isinstance(size_range, (list, tuple)):
            size_range = (0, size_range)
        if not isinstance(sigma_range, (list, tuple)):
            raise TypeError(f"GaussianBlur: sigma_range must be a (min, max) pair, got {sigma_range!r}")
        if max_size is not None:
            warn_once(
                "GaussianBlur.max_size", "GaussianBlur(max_size=) is deprecated: use size_range=(0, max_size)"
            )
            size_range = (0, max_size)
        self.size_range, self.sigma_range = size_range, sigma_range
        self.symmetric, self.max_size = symmetric, max_size

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


def _finish(values: np.ndarray, clip: bool, dtype: np.dtype) -> np.ndarray:
    if clip or dtype == np.uint8:
        np.clip(values, 0, 255, out=values)
    return values.astype(dtype, copy=False)


class Hue(PhotometricAugmentor):
    """Shift the hue by a random offset in ``range`` (OpenCV's half-degrees: 180 is a full
    turn); ``rgb``: the image is RGB (else BGR)."""

    def __init__(self, range: Any = (0, 180), rgb: bool = True) -> None:  # noqa: A002 - tensorpack's name
        self.range, self.rgb = range, bool(rgb)

    def _get_augment_params(self, _: Any) -> Any:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, hue: Any) -> np.ndarray:
        cv = cv2()
        hsv = cv.cvtColor(img, cv.COLOR_RGB2HSV if self.rgb else cv.COLOR_BGR2HSV)
        if hsv.dtype == np.uint8:  # OpenCV's 8-bit hue is 0..179
            table = np.empty((256, 3), np.uint8)
            table[:, 0] = ((_U8 + hue) % 180).astype(np.uint8)
            table[:, 1] = table[:, 2] = _U8
            hsv = apply_lut(hsv, table)
        else:  # 0..360 for floating point images
            hsv[..., 0] = (hsv[..., 0] + 2 * hue) % 360
        return cv.cvtColor(hsv, cv.COLOR_HSV2RGB if self.rgb else cv.COLOR_HSV2BGR)  # type: ignore[no-any-return]


class Brightness(PhotometricAugmentor):
    """Add a random value in ``[-delta, delta]``; clip to ``[0, 255]`` when ``clip`` or for
    ``uint8`` images."""

    def __init__(self, delta: float, clip: bool = True) -> None:
        if not delta > 0:
            raise ValueError(f"Brightness: delta must be > 0, got {delta!r}")
        self.delta, self.clip = delta, clip

    def _get_augment_params(self, _: Any) -> Any:
        return self._rand_range(-self.delta, self.delta)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        if img.dtype == np.uint8:
            return apply_lut(img, _finish(_LEVELS + v, True, np.dtype(np.uint8)))
        out = img.astype(np.float32)
        out += v
        return _finish(out, self.clip, img.dtype)


class BrightnessScale(PhotometricAugmentor):
    """Multiply by a random factor in ``range``; clip as :class:`Brightness`."""

    def __init__(self, range: Any, clip: bool = True) -> None:  # noqa: A002
        self.range, self.clip = range, clip

    def _get_augment_params(self, _: Any) -> Any:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        if img.dtype == np.uint8:
            return apply_lut(img, _finish(_LEVELS * v, True, np.dtype(np.uint8)))
        out = img.astype(np.float32)
        out *= v
        return _finish(out, self.clip, img.dtype)


class Contrast(PhotometricAugmentor):
    """``x = (x - mean) * r + mean`` with ``r`` drawn from ``factor_range``; ``mean`` is per
    channel (``rgb=None``) or the mean of the grayscale image (``rgb`` True/False: the channel
    order). Clips as :class:`Brightness`."""

    def __init__(self, factor_range: Any, rgb: bool | None = None, clip: bool = True) -> None:
        self.factor_range, self.rgb, self.clip = factor_range, rgb, clip

    def _mean(self, img: np.ndarray) -> Any:
        cv = cv2()
        if img.ndim == 3 and self.rgb is not None:
            grey = cv.cvtColor(img.astype(np.float32), cv.COLOR_RGB2GRAY if self.rgb else cv.COLOR_BGR2GRAY)
            return np.mean(grey)
        if img.ndim == 3:
            if img.shape[2] <= 4 and img.dtype.name in ("uint8", "float32", "float64"):
                return np.asarray(cv.mean(img)[: img.shape[2]]).reshape(1, 1, -1)
            return np.mean(img, axis=(0, 1), keepdims=True)
        return np.mean(img)

    def _get_augment_params(self, _: Any) -> Any:
        return self._rand_range(*self.factor_range)

    def _augment(self, img: np.ndarray, r: Any) -> np.ndarray:
        mean = self._mean(img)
        if img.dtype == np.uint8:
            table = _U8[:, None] * r + np.reshape(mean, (1, -1)) * (1 - r)
            return apply_lut(img, _finish(table, True, np.dtype(np.uint8)))
        out = img * r
        out += mean * (1 - r)
        return _finish(out, self.clip, img.dtype)


class Gamma(PhotometricAugmentor):
    """Gamma correction ``x -> 255 * (x / 255) ** (1 / (1 + g))``, ``g`` drawn from ``range``
    (through a ``uint8`` table: values are clipped to ``[0, 255]`` and truncated first)."""

    def __init__(self, range: Any = (-0.5, 0.5)) -> None:  # noqa: A002
        self.range = range

    def _get_augment_params(self, _: Any) -> Any:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, gamma: Any) -> np.ndarray:
        table = ((_LEVELS / 255) ** (1.0 / (1.0 + gamma)) * 255).astype(np.uint8)
        src = img if img.dtype == np.uint8 else np.clip(img, 0, 255).astype(np.uint8)
        out = apply_lut(src, table)
        return out if img.dtype == np.uint8 else out.astype(img.dtype)


class Saturation(PhotometricAugmentor):
    """Blend with the grayscale image: ``x * v + gray * (1 - v)``, ``v = 1 + u`` with ``u`` in
    ``[-alpha, alpha]`` (fb.resnet.torch's saturation); ``rgb``: the channel order. Clips as
    :class:`Brightness`."""

    def __init__(self, alpha: float = 0.4, rgb: bool = True, clip: bool = True) -> None:
        if not alpha < 1:
            raise ValueError(f"Saturation: alpha must be < 1, got {alpha!r}")
        self.alpha, self.rgb, self.clip = alpha, bool(rgb), clip

    def _get_augment_params(self, _: Any) -> Any:
        return 1 + self._rand_range(-self.alpha, self.alpha)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        cv = cv2()
        grey = cv.cvtColor(img, cv.COLOR_RGB2GRAY if self.rgb else cv.COLOR_BGR2GRAY)
        out = np.multiply(img, v, dtype=np.result_type(img.dtype, np.float32))
        out += (grey * (1 - v))[:, :, np.newaxis]
        return _finish(out, self.clip, img.dtype)


class Lighting(PhotometricAugmentor):
    """AlexNet's PCA lighting noise (as in fb.resnet.torch): add ``eigvec @ (a * eigval)`` to
    every pixel, ``a ~ N(0, std^2)`` per component. ``eigval``: ``(3,)``; ``eigvec``: 3 x 3, one
    eigenvector per column. Needs 3-channel images; clips as :class:`Brightness`."""

    def __init__(self, std: float, eigval: Any, eigvec: Any, clip: bool = True) -> None:
        eigval = np.asarray(eigval, dtype=np.float32)
        eigvec = np.asarray(eigvec, dtype=np.float32)
        if eigval.shape != (3,) or eigvec.shape != (3, 3):
            raise ValueError(
                f"Lighting: eigval must be (3,) and eigvec (3, 3), got {eigval.shape}, {eigvec.shape}"
            )
        self.std, self.eigval, self.eigvec, self.clip = std, eigval, eigvec, clip

    def _get_augment_params(self, img: np.ndarray) -> np.ndarray:
        if img.ndim != 3 or img.shape[2] != 3:
            raise ValueError(f"Lighting: needs (h, w, 3) images, got shape {img.shape}")
        return (self.rng.standard_normal(3) * self.std).astype(np.float32)  # type: ignore[no-any-return]

    def _augment(self, img: np.ndarray, v: np.ndarray) -> np.ndarray:
        inc = np.dot(self.eigvec, (v * self.eigval).reshape((3, 1))).reshape((3,))
        if img.dtype == np.uint8:
            return apply_lut(img, _finish(_LEVELS[:, None] + inc, True, np.dtype(np.uint8)))
        return _finish(np.add(img, inc), self.clip, img.dtype)
