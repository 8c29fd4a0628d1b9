"""Augmentors from other libraries: :class:`Albumentations`, :class:`IAAugmentor` (the
``imgaug`` library) and :class:`ImageFunction` (any ``img -> img`` callable, e.g. a
torchvision-style transform). None of those libraries is imported unless used.

Randomness: an Albumentations transform is reseeded from this augmentor's ``self.rng`` for every
image, so its draws are reproducible and resume exactly with the flow. A plain callable's own
randomness (torch's or Python's global RNG) is not ours: it is neither seeded per worker by us
nor saved in a flow's state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Albumentations, ImageAugmentor, ImageFunction
from .transform import Transform

__all__ = ["Albumentations", "IAAugmentor", "ImageFunction"]


class IAATransform(Transform):
    """One draw of an ``imgaug`` augmenter (``to_deterministic()``), for images and keypoints."""

    def __init__(self, aug: Any, img_shape: Any) -> None:
        self.aug, self.img_shape = aug, img_shape

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self.aug.augment_image(img)  # type: ignore[no-any-return]

    def apply_coords(self, coords: Any) -> np.ndarray:
        import imgaug as ia  # the aleju/imgaug library, not this package

        points = ia.KeypointsOnImage([ia.Keypoint(x=x, y=y) for x, y in coords], shape=self.img_shape)
        out = self.aug.augment_keypoints([points])[0].keypoints
        return np.asarray([[p.x, p.y] for p in out], dtype=np.float64).reshape(-1, 2)


class IAAugmentor(ImageAugmentor):
    """Wrap an augmenter of the ``imgaug`` library (https://github.com/aleju/imgaug); images and
    coordinates (as its keypoints). Its randomness is its own (not saved in a flow's state)."""

    def __init__(self, augmentor: Any) -> None:
        self._aug = augmentor

    def get_transform(self, img: np.ndarray) -> Any:
        return IAATransform(self._aug.to_deterministic(), img.shape)

    def __repr__(self) -> str:
        return f"imgaug.IAAugmentor({self._aug!r})"
