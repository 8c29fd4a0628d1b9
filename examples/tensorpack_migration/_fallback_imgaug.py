"""Stand-ins for the few ``tensorpack.dataflow.imgaug`` augmentors these examples use, in plain
numpy + OpenCV, used only while ``dataflow.imgaug`` (the image layer, built separately) is not
installed. With it, the examples import the real ``dataflow.imgaug`` and
``dataflow.AugmentImageComponent`` and this module is unused.

Same contract as tensorpack's: ``aug.get_transform(img)`` draws the random parameters once, and
the transform applies identically to the image (``apply_image``) and to coordinates
(``apply_coords``, an N x 2 array of x, y)."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from dataflow import MapDataComponent

__all__ = ["AugmentImageComponent", "imgaug"]

_rng = np.random  # the global RNG: dataflow's workers reseed it, each differently


class _Transform:
    def __init__(self, image: Any, coords: Any = None) -> None:
        self.apply_image = image
        self.apply_coords = coords or (lambda c: c)


class _Augmentor:
    def get_transform(self, img: np.ndarray) -> _Transform:
        raise NotImplementedError

    def augment(self, img: np.ndarray) -> np.ndarray:
        return self.get_transform(img).apply_image(img)  # type: ignore[no-any-return]


class AugmentorList(_Augmentor):
    def __init__(self, augmentors: list[_Augmentor]) -> None:
        self.augmentors = augmentors

    def get_transform(self, img: np.ndarray) -> _Transform:
        tfms = []
        for aug in self.augmentors:
            t = aug.get_transform(img)
            img = t.apply_image(img)
            tfms.append(t)

        def image(x: np.ndarray) -> np.ndarray:
            for t in tfms:
                x = t.apply_image(x)
            return x

        def coords(c: np.ndarray) -> np.ndarray:
            for t in tfms:
                c = t.apply_coords(c)
            return c

        return _Transform(image, coords)


class CenterPaste(_Augmentor):
    def __init__(self, background_shape: tuple[int, int]) -> None:
        self.shape = background_shape

    def get_transform(self, img: np.ndarray) -> _Transform:
        h, w = img.shape[:2]
        y0, x0 = (self.shape[0] - h) // 2, (self.shape[1] - w) // 2

        def image(x: np.ndarray) -> np.ndarray:
            out = np.zeros((*self.shape, *x.shape[2:]), x.dtype)
            out[y0 : y0 + h, x0 : x0 + w] = x
            return out

        return _Transform(image, lambda c: c + [x0, y0])


class RandomCrop(_Augmentor):
    def __init__(self, crop_shape: tuple[int, int]) -> None:
        self.shape = crop_shape

    def get_transform(self, img: np.ndarray) -> _Transform:
        h, w = self.shape
        y0 = int(_rng.randint(0, img.shape[0] - h + 1))
        x0 = int(_rng.randint(0, img.shape[1] - w + 1))
        return _Transform(lambda x: x[y0 : y0 + h, x0 : x0 + w], lambda c: c - [x0, y0])


class CenterCrop(_Augmentor):
    def __init__(self, crop_shape: int | tuple[int, int]) -> None:
        self.shape = (crop_shape, crop_shape) if isinstance(crop_shape, int) else crop_shape

    def get_transform(self, img: np.ndarray) -> _Transform:
        h, w = self.shape
        y0, x0 = (img.shape[0] - h) // 2, (img.shape[1] - w) // 2
        return _Transform(lambda x: x[y0 : y0 + h, x0 : x0 + w], lambda c: c - [x0, y0])


class Flip(_Augmentor):
    def __init__(self, horiz: bool = False, vert: bool = False, prob: float = 0.5) -> None:
        self.horiz, self.prob = horiz, prob

    def get_transform(self, img: np.ndarray) -> _Transform:
        if _rng.random() >= self.prob:
            return _Transform(lambda x: x)
        w = img.shape[1]

        def coords(c: np.ndarray) -> np.ndarray:
            c = c.copy()
            c[:, 0] = w - c[:, 0]
            return c

        return _Transform(lambda x: x[:, ::-1], coords)


class ResizeShortestEdge(_Augmentor):
    def __init__(self, size: int, interp: int = cv2.INTER_LINEAR) -> None:
        self.size, self.interp = size, interp

    def get_transform(self, img: np.ndarray) -> _Transform:
        h, w = img.shape[:2]
        scale = self.size / min(h, w)
        nh, nw = round(h * scale), round(w * scale)
        return _Transform(
            lambda x: cv2.resize(x, (nw, nh), interpolation=self.interp), lambda c: c * [nw / w, nh / h]
        )


class MapImage(_Augmentor):
    def __init__(self, func: Any) -> None:
        self.func = func

    def get_transform(self, img: np.ndarray) -> _Transform:
        return _Transform(self.func)


class imgaug:  # noqa: N801 - stands for the module of that name
    AugmentorList = AugmentorList
    CenterPaste = CenterPaste
    RandomCrop = RandomCrop
    CenterCrop = CenterCrop
    Flip = Flip
    ResizeShortestEdge = ResizeShortestEdge
    MapImage = MapImage


def AugmentImageComponent(ds: Any, augmentors: list[_Augmentor], index: int = 0, copy: bool = True) -> Any:  # noqa: N802
    chain = AugmentorList(augmentors)
    return MapDataComponent(ds, lambda img: chain.augment(img.copy() if copy else img), index)
