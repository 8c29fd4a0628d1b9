"""Noise: :class:`JpegNoise`, :class:`GaussianNoise`, :class:`SaltPepperNoise` (pixels only)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._opencv import cv2
from .base import PhotometricAugmentor

__all__ = ["GaussianNoise", "JpegNoise", "SaltPepperNoise"]


class JpegNoise(PhotometricAugmentor):
    """Encode as JPEG at a random quality in ``quality_range`` (``[low, high)``) and decode
    again. Non-``uint8`` images are clipped to ``[0, 255]`` for the codec and cast back."""

    def __init__(self, quality_range: Any = (40, 100)) -> None:
        self.quality_range = quality_range

    def _get_augment_params(self, img: Any) -> int:
        return int(self.rng.integers(*self.quality_range))

    def _augment(self, img: np.ndarray, q: int) -> np.ndarray:
        cv = cv2()
        src = img if img.dtype == np.uint8 else np.clip(img, 0, 255).astype(np.uint8)
        ok, enc = cv.imencode(".jpg", src, [cv.IMWRITE_JPEG_QUALITY, int(q)])
        if not ok:
            raise ValueError(f"JpegNoise: OpenCV could not encode an image of shape {img.shape} as JPEG")
        out = cv.imdecode(enc, cv.IMREAD_UNCHANGED)
        if out.ndim == 2 and img.ndim == 3:
            out = out[:, :, np.newaxis]
        return out if out.dtype == img.dtype else out.astype(img.dtype)  # type: ignore[no-any-return]


class GaussianNoise(PhotometricAugmentor):
    """Add noise drawn from ``N(0, sigma^2)`` to every value; clip to ``[0, 255]`` when
    ``clip`` or for ``uint8`` images. The dtype is kept."""

    def __init__(self, sigma: float = 1, clip: bool = True) -> None:
        self.sigma, self.clip = sigma, clip

    def _get_augment_params(self, img: np.ndarray) -> np.ndarray:
        return self.rng.standard_normal(img.shape, dtype=np.float32)  # type: ignore[no-any-return]

    def _augment(self, img: np.ndarray, noise: np.ndarray) -> np.ndarray:
        ret = noise * np.float32(self.sigma)
        ret += img
        if self.clip or img.dtype == np.uint8:
            np.clip(ret, 0, 255, out=ret)
        return ret.astype(img.dtype, copy=False)  # type: ignore[no-any-return]


class SaltPepperNoise(PhotometricAugmentor):
    """Set each value (each channel apart) to 255 with probability ``white_prob`` and to 0 with
    probability ``black_prob``. Modifies the image in place."""

    def __init__(self, white_prob: float = 0.05, black_prob: float = 0.05) -> None:
        if white_prob + black_prob > 1:
            raise ValueError(
                f"SaltPepperNoise: white_prob + black_prob must be <= 1, got {white_prob + black_prob}"
            )
        self.white_prob, self.black_prob = white_prob, black_prob

    def _get_augment_params(self, img: np.ndarray) -> np.ndarray:
        return self.rng.random(img.shape, dtype=np.float32)  # type: ignore[no-any-return]

    def _augment(self, img: np.ndarray, param: np.ndarray) -> np.ndarray:
        img[param > (1 - self.white_prob)] = 255
        img[param < self.black_prob] = 0
        return img
