"""Crops: :class:`RandomCrop`, :class:`CenterCrop`, :class:`RandomCropRandomShape`,
:class:`GoogleNetRandomCropAndResize`; and :class:`RandomCutout` (which blanks a region)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._deprecation import warn_once
from ._opencv import INTER_LINEAR
from .base import ImageAugmentor, ImagePlaceholder
from .misc import ResizeShortestEdge, shape2d
from .transform import CropTransform, PhotometricTransform, ResizeTransform, TransformList

__all__ = [
    "CenterCrop",
    "GoogleNetRandomCropAndResize",
    "RandomCrop",
    "RandomCropRandomShape",
    "RandomCutout",
]


def _check_fits(stage: str, shape: Any, crop: tuple[int, int]) -> None:
    if shape[0] < crop[0] or shape[1] < crop[1]:
        raise ValueError(f"{stage}: cannot crop {crop} (h, w) out of an image of {tuple(shape[:2])}")


class RandomCrop(ImageAugmentor):
    """Crop a ``crop_shape`` (``(h, w)`` or an int) region at a uniformly random position."""

    def __init__(self, crop_shape: Any) -> None:
        self.crop_shape = shape2d(crop_shape, "RandomCrop")

    def get_transform(self, img: np.ndarray) -> Any:
        ch, cw = self.crop_shape
        _check_fits("RandomCrop", img.shape, self.crop_shape)
        rng = self.rng
        h0 = int(rng.integers(img.shape[0] - ch + 1))
        w0 = int(rng.integers(img.shape[1] - cw + 1))
        return CropTransform(h0, w0, ch, cw)


class CenterCrop(ImageAugmentor):
    """Crop a ``crop_shape`` region at the centre (rounded towards the top-left)."""

    def __init__(self, crop_shape: Any) -> None:
        self.crop_shape = shape2d(crop_shape, "CenterCrop")

    def get_transform(self, img: Any) -> Any:
        _check_fits("CenterCrop", img.shape, self.crop_shape)
        h0 = int((img.shape[0] - self.crop_shape[0]) * 0.5)
        w0 = int((img.shape[1] - self.crop_shape[1]) * 0.5)
        return CropTransform(h0, w0, self.crop_shape[0], self.crop_shape[1])


class RandomCropRandomShape(ImageAugmentor):
    """Crop a region of random size ``h in [hmin, hmax]``, ``w in [wmin, wmax]`` (both ends
    included; ``None``: the image's size) at a random position. ``max_aspect_ratio`` is
    ignored, as in tensorpack (it was never implemented)."""

    def __init__(
        self,
        wmin: int,
        hmin: int,
        wmax: int | None = None,
        hmax: int | None = None,
        max_aspect_ratio: Any = None,
    ) -> None:
        if max_aspect_ratio is not None:
            warn_once(
                "RandomCropRandomShape.max_aspect_ratio",
                "RandomCropRandomShape(max_aspect_ratio=) has no effect",
            )
        self.wmin, self.hmin, self.wmax, self.hmax = wmin, hmin, wmax, hmax
        self.max_aspect_ratio = max_aspect_ratio

    def get_transform(self, img: np.ndarray) -> Any:
        hmax = self.hmax or img.shape[0]
        wmax = self.wmax or img.shape[1]
        h = int(self.rng.integers(self.hmin, hmax + 1))
        w = int(self.rng.integers(self.wmin, wmax + 1))
        _check_fits("RandomCropRandomShape", img.shape, (h, w))
        diffh, diffw = img.shape[0] - h, img.shape[1] - w
        y0 = 0 if diffh == 0 else int(self.rng.integers(diffh))
        x0 = 0 if diffw == 0 else int(self.rng.integers(diffw))
        return CropTransform(y0, x0, h, w)


class GoogleNetRandomCropAndResize(ImageAugmentor):
    """The random-sized crop of "Going Deeper with Convolutions" (as in fb.resnet.torch): a
    crop of ``crop_area_fraction`` of the area and ``aspect_ratio_range`` aspect ratio, resized
    to ``target_shape`` squared; after 10 failed draws, ResizeShortestEdge + CenterCrop."""

    def __init__(
        self,
        crop_area_fraction: Any = (0.08, 1.0),
        aspect_ratio_range: Any = (0.75, 1.333),
        target_shape: int = 224,
        interp: int = INTER_LINEAR,
    ) -> None:
        self.crop_area_fraction, self.aspect_ratio_range = crop_area_fraction, aspect_ratio_range
        self.target_shape, self.interp = target_shape, interp

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        area = h * w
        rng = self.rng
        for _ in range(10):
            target_area = rng.uniform(*self.crop_area_fraction) * area
            aspect = rng.uniform(*self.aspect_ratio_range)
            ww = int(np.sqrt(target_area * aspect) + 0.5)
            hh = int(np.sqrt(target_area / aspect) + 0.5)
            if rng.uniform() < 0.5:
                ww, hh = hh, ww
            if hh <= h and ww <= w:
                x1 = int(rng.integers(0, w - ww + 1))
                y1 = int(rng.integers(0, h - hh + 1))
                return TransformList(
                    [
                        CropTransform(y1, x1, hh, ww),
                        ResizeTransform(hh, ww, self.target_shape, self.target_shape, interp=self.interp),
                    ]
                )
        resize = ResizeShortestEdge(self.target_shape, interp=self.interp).get_transform(img)
        crop = CenterCrop(self.target_shape).get_transform(
            ImagePlaceholder(shape=(resize.new_h, resize.new_w))
        )
        return TransformList([resize, crop])


class RandomCutout(ImageAugmentor):
    """Cutout (arXiv:1708.04552): set a random ``h x w`` rectangle to ``fill``. ``h_range`` /
    ``w_range``: an int, or a ``(low, high)`` range drawn from (``high`` excluded). Changes
    pixels only (coordinates unchanged); modifies the image in place."""

    def __init__(self, h_range: Any, w_range: Any, fill: float = 0.0) -> None:
        self.h_range, self.w_range, self.fill = h_range, w_range, fill

    def _get_cutout_shape(self) -> tuple[int, int]:
        h = self.h_range if isinstance(self.h_range, int) else int(self.rng.integers(*self.h_range))
        w = self.w_range if isinstance(self.w_range, int) else int(self.rng.integers(*self.w_range))
        return h, w

    @staticmethod
    def _cutout(img: np.ndarray, y0: int, x0: int, h: int, w: int, fill: float) -> np.ndarray:
        img[y0 : y0 + h, x0 : x0 + w] = fill
        return img

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = self._get_cutout_shape()
        _check_fits("RandomCutout", img.shape, (h, w))
        x0 = int(self.rng.integers(0, img.shape[1] + 1 - w))
        y0 = int(self.rng.integers(0, img.shape[0] + 1 - h))
        fill = self.fill
        return PhotometricTransform(lambda im: RandomCutout._cutout(im, y0, x0, h, w, fill), "cutout")
