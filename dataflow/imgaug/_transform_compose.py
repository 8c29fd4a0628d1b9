"""Photometric transforms and the transforms made of others: factories, lists and lazy ones
(re-exported by :mod:`dataflow.imgaug.transform`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._transform_base import BaseTransform, Transform

__all__ = [
    "BoundPhotometricTransform",
    "LazyTransform",
    "PhotometricTransform",
    "TransformFactory",
    "TransformList",
]


class PhotometricTransform(Transform):
    """Changes pixel values with ``func(img)``; coordinates pass unchanged."""

    def __init__(self, func: Callable[[np.ndarray], np.ndarray], name: str | None = None) -> None:
        self._func = func
        self._name = name

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self._func(img)

    def apply_coords(self, coords: Any) -> Any:
        return coords

    def __repr__(self) -> str:
        return f"imgaug.PhotometricTransform({self._name or ''})"

    __str__ = __repr__


class BoundPhotometricTransform(PhotometricTransform):
    """``aug._augment(img, param)``, the transform of a :class:`PhotometricAugmentor` (its name
    is built only when printed)."""

    def __init__(self, aug: Any, param: Any) -> None:
        self._aug, self._param = aug, param

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self._aug._augment(img, self._param)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"imgaug.PhotometricTransform(from {self._aug!r})"

    __str__ = __repr__


class TransformFactory(Transform):
    """A transform made of user functions: ``TransformFactory(apply_image=f, apply_coords=g)``."""

    def __init__(self, name: str | None = None, **kwargs: Callable[[Any], Any]) -> None:
        for k, v in kwargs.items():
            if not k.startswith("apply_"):
                raise KeyError(f"TransformFactory: unknown argument {k!r}; give apply_xxx=function")
            setattr(self, k, v)
        self._name = name

    def __repr__(self) -> str:
        return f"imgaug.TransformFactory({self._name or ''})"

    __str__ = __repr__


class TransformList(BaseTransform):
    """Apply ``tfms`` in order; ``+`` concatenates lists."""

    def __init__(self, tfms: list[Any]) -> None:
        for t in tfms:
            if not isinstance(t, BaseTransform):
                raise TypeError(f"TransformList: {t!r:.60} is not a Transform")
        self.tfms = tfms

    def apply_image(self, img: Any) -> Any:
        for t in self.tfms:
            img = t.apply_image(img)
        return img

    def apply_coords(self, coords: Any) -> Any:
        for t in self.tfms:
            coords = t.apply_coords(coords)
        return coords

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):

            def apply(x: Any) -> Any:
                for t in self.tfms:
                    x = getattr(t, name)(x)
                return x

            return apply
        raise AttributeError(f"TransformList object has no attribute {name!r}")

    def __repr__(self) -> str:
        inner = ",\n".join("  " + repr(t) for t in self.tfms)
        return f"imgaug.TransformList([\n{inner}])"

    __str__ = __repr__

    def __add__(self, other: Any) -> TransformList:
        return TransformList(self.tfms + (other.tfms if isinstance(other, TransformList) else [other]))

    def __iadd__(self, other: Any) -> TransformList:
        self.tfms.extend(other.tfms if isinstance(other, TransformList) else [other])
        return self

    def __radd__(self, other: Any) -> TransformList:
        return TransformList((other.tfms if isinstance(other, TransformList) else [other]) + self.tfms)


class LazyTransform(BaseTransform):
    """A transform made by ``get_transform(img)`` when ``apply_image`` first runs (what
    :class:`AugmentorList` uses for the augmentors that need the earlier ones' output)."""

    def __init__(self, get_transform: Callable[[np.ndarray], Any]) -> None:
        self.get_transform = get_transform
        self._transform: Any = None

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if self._transform is None:
            self._transform = self.get_transform(img)
        return self._transform.apply_image(img)  # type: ignore[no-any-return]

    def _apply(self, x: Any, meth: str) -> Any:
        if self._transform is None:
            raise RuntimeError(
                f"LazyTransform.{meth}: the transform is made when apply_image first runs; apply the "
                f"TransformList to the image before applying it to anything else"
            )
        return getattr(self._transform, meth)(x)

    def apply_coords(self, coords: Any) -> Any:
        return self._apply(coords, "apply_coords")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return lambda x: self._apply(x, name)
        raise AttributeError(f"LazyTransform object has no attribute {name!r}")

    def __repr__(self) -> str:
        if self._transform is None:
            return f"LazyTransform(get_transform={self.get_transform})"
        return repr(self._transform)

    __str__ = __repr__
