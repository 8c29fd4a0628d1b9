"""Augmentors from other libraries: :class:`Albumentations`, :class:`IAAugmentor` (the
``imgaug`` library) and :class:`ImageFunction` (any ``img -> img`` callable, e.g. a
torchvision-style transform). None of those libraries is imported unless used.

Randomness: an Albumentations transform is reseeded from this augmentor's ``self.rng`` for every
image, so its draws are reproducible and resume exactly with the flow. A plain callable's own
randomness (torch's or Python's global RNG) is not ours: it is neither seeded per worker by us
nor saved in a flow's state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .._checks import check_callable
from .base import ImageAugmentor
from .transform import Transform

__all__ = ["Albumentations", "IAAugmentor", "ImageFunction", "looks_like_albumentations"]


def looks_like_albumentations(obj: Any) -> bool:
    """An Albumentations transform (or anything with its call shape: ``obj(image=img)``
    returning a dict, plus ``set_random_seed`` or ``get_params``/``apply``)."""
    if type(obj).__module__.split(".")[0] == "albumentations":
        return True
    return (
        callable(obj)
        and (hasattr(obj, "set_random_seed") or (hasattr(obj, "get_params") and hasattr(obj, "apply")))
        and hasattr(obj, "targets")
    )


def _image_only(kind: str) -> Callable[[Any], Any]:
    def apply_coords(coords: Any) -> Any:
        raise NotImplementedError(
            f"{kind} transforms images only and cannot transform coordinates; use dataflow.imgaug's "
            f"geometric augmentors (or MapImage(func, coord_func)) for images with coordinates"
        )

    return apply_coords


class AlbumentationsTransform(Transform):
    """One draw of an Albumentations transform: the same seed for every image it is applied
    to, so an image and its mask of the same size get the same change."""

    def __init__(self, aug: Any, seed: int, lock: threading.Lock) -> None:
        self.aug, self.seed, self._lock = aug, seed, lock
        self.apply_coords = _image_only("An Albumentations")

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        aug = self.aug
        with self._lock:  # seeding then drawing must not interleave with another thread
            if hasattr(aug, "set_random_seed"):
                aug.set_random_seed(self.seed)
                return aug(image=img)["image"]  # type: ignore[no-any-return]
            # Albumentations < 1.4: no per-transform seed; draw its parameters and apply them
            return aug.apply(img, **aug.get_params())  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"imgaug.AlbumentationsTransform({self.aug!r}, seed={self.seed})"


class Albumentations(ImageAugmentor):
    """Wrap an Albumentations transform (``albumentations.HorizontalFlip(p=0.5)``, a
    ``Compose``...). Images only: coordinates raise ``NotImplementedError``."""

    def __init__(self, augmentor: Any) -> None:
        if not callable(augmentor):
            raise TypeError(
                f"Albumentations: expected an albumentations transform, got {type(augmentor).__name__}"
            )
        super().__init__()
        self._aug = augmentor
        self._lock = threading.Lock()

    def get_transform(self, img: Any) -> Any:
        return AlbumentationsTransform(self._aug, int(self.rng.integers(2**32)), self._lock)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"imgaug.Albumentations({self._aug!r})"


class ImageFunction(ImageAugmentor):
    """Apply ``func(img)`` to images only (what a plain callable or torchvision-style transform
    in an augmentor list becomes); coordinates raise ``NotImplementedError``."""

    def __init__(self, func: Callable[[np.ndarray], Any]) -> None:
        check_callable("ImageFunction", "func", func)
        super().__init__()
        self.func = func
        self._transform = _FunctionTransform(func)

    def get_transform(self, img: Any) -> Any:
        return self._transform

    def __repr__(self) -> str:
        return f"imgaug.ImageFunction({getattr(self.func, '__qualname__', self.func)!s})"


class _FunctionTransform(Transform):
    def __init__(self, func: Callable[[np.ndarray], Any]) -> None:
        self.func = func
        name = getattr(func, "__qualname__", None) or type(func).__name__
        self.apply_coords = _image_only(f"The callable {name}")

    def apply_image(self, img: np.ndarray) -> Any:
        return self.func(img)

    def __repr__(self) -> str:
        return f"imgaug.ImageFunction({getattr(self.func, '__qualname__', self.func)!s})"


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
        super().__init__()
        self._aug = augmentor

    def get_transform(self, img: np.ndarray) -> Any:
        return IAATransform(self._aug.to_deterministic(), img.shape)

    def __repr__(self) -> str:
        return f"imgaug.IAAugmentor({self._aug!r})"
