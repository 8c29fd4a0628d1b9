"""Augmentors made of augmentors or functions: :class:`Identity`, :class:`RandomApplyAug`,
:class:`RandomChooseAug`, :class:`RandomOrderAug`, :class:`MapImage`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._checks import check_callable
from .base import ImageAugmentor, _Composed, as_augmentor
from .transform import NoOpTransform, TransformFactory, TransformList

__all__ = ["Identity", "MapImage", "RandomApplyAug", "RandomChooseAug", "RandomOrderAug"]


class Identity(ImageAugmentor):
    """Changes nothing."""

    def get_transform(self, img: Any) -> Any:
        return NoOpTransform()


class RandomApplyAug(_Composed):
    """Apply ``aug`` with probability ``prob``, else nothing."""

    def __init__(self, aug: Any, prob: float) -> None:
        if not 0 <= prob <= 1:
            raise ValueError(f"RandomApplyAug: prob must be in [0, 1], got {prob!r}")
        self.aug = as_augmentor(aug, "RandomApplyAug")
        self.prob = prob

    def get_transform(self, img: np.ndarray) -> Any:
        if self.rng.random() < self.prob:
            return self.aug.get_transform(img)
        return NoOpTransform()

    def _parts(self) -> list[ImageAugmentor]:
        return [self.aug]


class RandomChooseAug(_Composed):
    """Apply one augmentor of ``aug_lists``, chosen uniformly, or with the probabilities given
    as ``[(augmentor, probability), ...]`` (they must sum to 1)."""

    def __init__(self, aug_lists: Any) -> None:
        if not isinstance(aug_lists, (list, tuple)) or not aug_lists:
            raise ValueError(f"RandomChooseAug: aug_lists must be a non-empty list, got {aug_lists!r:.60}")
        if isinstance(aug_lists[0], (tuple, list)):
            prob = [float(k[1]) for k in aug_lists]
            augs = [k[0] for k in aug_lists]
            if abs(sum(prob) - 1) > 1e-6:
                raise ValueError(f"RandomChooseAug: the probabilities must sum to 1, got {prob}")
        else:
            augs = list(aug_lists)
            prob = [1.0 / len(augs)] * len(augs)
        self.aug_lists = [as_augmentor(a, "RandomChooseAug") for a in augs]
        self.prob = prob

    def _parts(self) -> list[ImageAugmentor]:
        return self.aug_lists

    def get_transform(self, img: np.ndarray) -> Any:
        idx = int(self.rng.choice(len(self.aug_lists), p=self.prob))
        return self.aug_lists[idx].get_transform(img)


class RandomOrderAug(_Composed):
    """Apply all of ``aug_lists`` in a random order. Each one draws its parameters from the
    input image, so they should not change its shape."""

    def __init__(self, aug_lists: Any) -> None:
        if not isinstance(aug_lists, (list, tuple)):
            raise TypeError(f"RandomOrderAug: aug_lists must be a list, got {type(aug_lists).__name__}")
        self.aug_lists = [as_augmentor(a, "RandomOrderAug") for a in aug_lists]

    def _parts(self) -> list[ImageAugmentor]:
        return self.aug_lists

    def get_transform(self, img: np.ndarray) -> Any:
        idxs = self.rng.permutation(len(self.aug_lists))
        tfms = [a.get_transform(img) for a in self.aug_lists]
        return TransformList([tfms[k] for k in idxs])


class MapImage(ImageAugmentor):
    """Apply ``func(img)`` to images and, if given, ``coord_func(coords)`` to coordinates;
    without ``coord_func``, applying it to coordinates raises ``NotImplementedError`` (pass
    ``coord_func=lambda c: c`` if ``func`` moves no pixel)."""

    def __init__(
        self, func: Callable[[np.ndarray], np.ndarray], coord_func: Callable[[Any], Any] | None = None
    ) -> None:
        check_callable("MapImage", "func", func)
        self.func, self.coord_func = func, coord_func
        kwargs: dict[str, Any] = {"apply_image": func}
        if coord_func is not None:
            kwargs["apply_coords"] = coord_func
        else:
            kwargs["apply_coords"] = self._no_coords
        self._transform = TransformFactory(name="MapImage", **kwargs)

    def _no_coords(self, coords: Any) -> Any:
        raise NotImplementedError(
            f"MapImage({getattr(self.func, '__name__', self.func)!r}) has no coord_func, so it cannot "
            f"transform coordinates; pass coord_func= (lambda c: c if it moves no pixel)"
        )

    def get_transform(self, img: Any) -> Any:
        return self._transform  # deterministic: one transform serves every image
