"""Deterministic transforms: what an augmentor's ``get_transform(img)`` returns.

Every geometric transform maps coordinates (``apply_coords``, an ``N x 2`` array of ``x, y``)
exactly as it moves pixels (``apply_image``), in tensorpack's convention: pixel ``(row i,
column j)`` covers ``[j, j+1) x [i, i+1)``. ``apply_coords`` never modifies its input and
returns floats (float32 stays float32, integers become float64). ``apply_image`` may return a
view of, or modify, its input (as in tensorpack); images keep their number of dimensions.
"""

from __future__ import annotations

import inspect
import pprint
from collections.abc import Callable
from typing import Any

import numpy as np

from ._opencv import BORDER_CONSTANT, INTER_LINEAR, cv2

__all__ = [
    "CropTransform",
    "FlipTransform",
    "LazyTransform",
    "NoOpTransform",
    "PasteTransform",
    "PhotometricTransform",
    "ResizeTransform",
    "Transform",
    "TransformFactory",
    "TransformList",
    "TransposeTransform",
    "WarpAffineTransform",
]


def default_repr(obj: Any) -> str:
    """``imgaug.Name(arg=value, ...)`` for the ``__init__`` arguments kept as attributes that
    differ from their default; the plain object repr where they are not kept."""
    cls = type(obj)
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return object.__repr__(obj)
    parts = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or not hasattr(obj, p.name):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            return object.__repr__(obj)
        value = getattr(obj, p.name)
        if p.default is not p.empty and value is p.default:
            continue
        parts.append(f"{p.name}={pprint.pformat(value)}")
    return f"imgaug.{cls.__name__}({', '.join(parts)})"


def as_coords(coords: Any, stage: str) -> np.ndarray:
    """A float copy of an ``N x 2`` coordinate array, or a ``ValueError`` saying what is wrong."""
    arr = np.asarray(coords)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{stage}: coordinates must be an N x 2 array of (x, y), got shape {arr.shape}")
    if arr.dtype.kind == "f":
        return arr.copy()  # type: ignore[no-any-return]
    if arr.dtype.kind not in "iub":
        raise TypeError(f"{stage}: coordinates must be numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


#: dtypes every OpenCV function here takes (int64, bool and float16 go through numpy instead)
_CV_DTYPES = frozenset("uint8 int8 uint16 int16 int32 float32 float64".split())


def _cv_ok(img: np.ndarray) -> bool:
    return img.dtype.name in _CV_DTYPES and (img.ndim == 2 or img.shape[2] <= 4)


def _keep_ndim(img: np.ndarray, ret: np.ndarray) -> np.ndarray:
    return ret[:, :, np.newaxis] if img.ndim == 3 and ret.ndim == 2 else ret


class BaseTransform:
    """Base class of all transforms (for ``isinstance`` checks)."""

    def _init(self, params: dict[str, Any] | None = None) -> None:
        """tensorpack's helper: keep the ``__init__`` arguments (``locals()``) as attributes."""
        if params:
            for k, v in params.items():
                if k != "self" and not k.startswith("_"):
                    setattr(self, k, v)


class Transform(BaseTransform):
    """A deterministic change of an image. Subclasses implement ``apply_image`` and, when it
    applies, ``apply_coords``; any other ``apply_xxx`` raises ``NotImplementedError``."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):

            def missing(x: Any) -> Any:
                raise NotImplementedError(f"{type(self).__name__} does not implement {name}")

            return missing
        raise AttributeError(f"{type(self).__name__} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return default_repr(self)


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


class BoundPhotometricTransform(PhotometricTransform):
    """``aug._augment(img, param)``, the transform of a :class:`PhotometricAugmentor` (its name
    is built only when printed)."""

    def __init__(self, aug: Any, param: Any) -> None:
        self._aug, self._param = aug, param

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self._aug._augment(img, self._param)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"imgaug.PhotometricTransform(from {self._aug!r})"


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


class ResizeTransform(Transform):
    """Resize an ``(h, w)`` image to ``(new_h, new_w)`` with OpenCV interpolation ``interp``."""

    def __init__(self, h: int, w: int, new_h: int, new_w: int, interp: int) -> None:
        self.h, self.w, self.new_h, self.new_w, self.interp = int(h), int(w), int(new_h), int(new_w), interp

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if img.shape[:2] != (self.h, self.w):
            raise ValueError(
                f"ResizeTransform: made for images of {(self.h, self.w)}, applied to one of {img.shape[:2]}"
            )
        ret = cv2().resize(img, (self.new_w, self.new_h), interpolation=self.interp)
        return _keep_ndim(img, ret)

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "ResizeTransform")
        c[:, 0] *= self.new_w / self.w
        c[:, 1] *= self.new_h / self.h
        return c


class CropTransform(Transform):
    """Take the ``h x w`` region whose top-left pixel is ``(y0, x0)`` (a view, no copy)."""

    def __init__(self, y0: int, x0: int, h: int, w: int) -> None:
        self.y0, self.x0, self.h, self.w = int(y0), int(x0), int(h), int(w)

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return img[self.y0 : self.y0 + self.h, self.x0 : self.x0 + self.w]

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "CropTransform")
        c[:, 0] -= self.x0
        c[:, 1] -= self.y0
        return c


class WarpAffineTransform(Transform):
    """``cv2.warpAffine(img, mat, dsize, ...)``: ``mat`` is the 2 x 3 matrix in OpenCV's pixel
    index coordinates; ``apply_coords`` maps coordinates of the pixel-area convention through the
    same matrix (shifted by half a pixel, so a pixel's centre lands on the pixel it moved to)."""

    def __init__(
        self,
        mat: Any,
        dsize: Any,
        interp: int = INTER_LINEAR,
        borderMode: int = BORDER_CONSTANT,  # noqa: N803 - tensorpack's name
        borderValue: Any = 0,  # noqa: N803
    ) -> None:
        self.mat = np.asarray(mat, dtype=np.float64)
        if self.mat.shape != (2, 3):
            raise ValueError(f"WarpAffineTransform: mat must be 2 x 3, got shape {self.mat.shape}")
        self.dsize = (int(dsize[0]), int(dsize[1]))
        self.interp, self.borderMode, self.borderValue = interp, borderMode, borderValue

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        ret = cv2().warpAffine(
            img,
            self.mat,
            self.dsize,
            flags=self.interp,
            borderMode=self.borderMode,
            borderValue=self.borderValue,
        )
        return _keep_ndim(img, ret)

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "WarpAffineTransform")
        m = self.mat
        out = (c - 0.5) @ m[:, :2].T + (m[:, 2] + 0.5)
        return out.astype(c.dtype, copy=False)  # type: ignore[no-any-return]


class FlipTransform(Transform):
    """Flip an ``(h, w)`` image left-right (``horiz=True``: ``x -> w - x``) or upside down
    (``y -> h - y``)."""

    def __init__(self, h: int, w: int, horiz: bool = True) -> None:
        self.h, self.w, self.horiz = int(h), int(w), horiz

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if not _cv_ok(img):
            return img[:, ::-1] if self.horiz else img[::-1]
        return _keep_ndim(img, cv2().flip(img, 1 if self.horiz else 0))  # contiguous, as fast as a view

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "FlipTransform")
        if self.horiz:
            c[:, 0] = self.w - c[:, 0]
        else:
            c[:, 1] = self.h - c[:, 1]
        return c


class TransposeTransform(Transform):
    """Swap the image's rows and columns (``x, y -> y, x``)."""

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if not _cv_ok(img):
            return np.ascontiguousarray(img.swapaxes(0, 1))
        return _keep_ndim(img, cv2().transpose(img))

    def apply_coords(self, coords: Any) -> np.ndarray:
        return as_coords(coords, "TransposeTransform")[:, ::-1].copy()  # type: ignore[no-any-return]


class PasteTransform(Transform):
    """Paste an image at ``(y0, x0)`` of a ``background_shape`` canvas filled by
    ``background_filler`` (coordinates move by ``(x0, y0)``)."""

    def __init__(self, background_shape: Any, y0: int, x0: int, background_filler: Any) -> None:
        self.background_shape = (int(background_shape[0]), int(background_shape[1]))
        self.y0, self.x0, self.background_filler = int(y0), int(x0), background_filler

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        h, w = img.shape[:2]
        bh, bw = self.background_shape
        if self.y0 + h > bh or self.x0 + w > bw:
            raise ValueError(
                f"PasteTransform: an image of {(h, w)} does not fit at {(self.y0, self.x0)} of a "
                f"{(bh, bw)} background"
            )
        out = self.background_filler.fill(self.background_shape, img)
        out[self.y0 : self.y0 + h, self.x0 : self.x0 + w] = img
        return out  # type: ignore[no-any-return]

    def apply_coords(self, coords: Any) -> np.ndarray:
        c = as_coords(coords, "PasteTransform")
        c[:, 0] += self.x0
        c[:, 1] += self.y0
        return c


class NoOpTransform(Transform):
    """Changes nothing: every ``apply_xxx`` returns its input."""

    def apply_image(self, img: Any) -> Any:
        return img

    def apply_coords(self, coords: Any) -> Any:
        return coords

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return lambda x: x
        raise AttributeError(f"NoOpTransform object has no attribute {name!r}")
