"""Flips, transposes and resizes: :class:`Flip`, :class:`Resize`, :class:`ResizeShortestEdge`,
:class:`RandomResize`, :class:`Transpose`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._warn import warn
from ._opencv import INTER_LINEAR
from .base import ImageAugmentor
from .transform import FlipTransform, NoOpTransform, ResizeTransform, TransposeTransform

__all__ = ["Flip", "RandomResize", "Resize", "ResizeShortestEdge", "Transpose", "shape2d"]


def shape2d(a: Any, stage: str = "imgaug") -> tuple[int, int]:
    """``n -> (n, n)``; ``(h, w) -> (h, w)``."""
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        return int(a), int(a)
    if isinstance(a, (list, tuple)) and len(a) == 2:
        return int(a[0]), int(a[1])
    raise ValueError(f"{stage}: a shape must be an int or an (h, w) pair, got {a!r}")


def _check_prob(stage: str, prob: float) -> None:
    if not 0 <= prob <= 1:
        raise ValueError(f"{stage}: prob must be in [0, 1], got {prob!r}")


class Flip(ImageAugmentor):
    """Flip the image left-right (``horiz=True``) or upside down (``vert=True``) with
    probability ``prob``; exactly one of ``horiz``/``vert`` must be set."""

    def __init__(self, horiz: bool = False, vert: bool = False, prob: float = 0.5) -> None:
        if horiz and vert:
            raise ValueError("Flip: cannot do both horiz and vert; use two Flip augmentors")
        if not horiz and not vert:
            raise ValueError("Flip: at least one of horiz or vert has to be True")
        _check_prob("Flip", prob)
        self.horiz, self.vert, self.prob = horiz, vert, prob

    def get_transform(self, img: np.ndarray) -> Any:
        if self.rng.random() < self.prob:
            return FlipTransform(img.shape[0], img.shape[1], self.horiz)
        return NoOpTransform()


class Resize(ImageAugmentor):
    """Resize to ``shape`` (``(h, w)`` or an int for a square)."""

    def __init__(self, shape: Any, interp: int = INTER_LINEAR) -> None:
        self.shape = shape2d(shape, "Resize")
        self.interp = interp

    def get_transform(self, img: np.ndarray) -> Any:
        return ResizeTransform(img.shape[0], img.shape[1], self.shape[0], self.shape[1], self.interp)


class ResizeShortestEdge(ImageAugmentor):
    """Resize so that the shorter edge is ``size``, keeping the aspect ratio (the longer edge
    is rounded to the nearest pixel)."""

    def __init__(self, size: int, interp: int = INTER_LINEAR) -> None:
        self.size = int(size)
        if self.size <= 0:
            raise ValueError(f"ResizeShortestEdge: size must be positive, got {size!r}")
        self.interp = interp

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        scale = self.size * 1.0 / min(h, w)
        if h < w:
            newh, neww = self.size, int(scale * w + 0.5)
        else:
            newh, neww = int(scale * h + 0.5), self.size
        return ResizeTransform(h, w, newh, neww, self.interp)


class RandomResize(ImageAugmentor):
    """Rescale width and height at random.

    ``xrange``/``yrange``: ``(min, max)`` scale factors (floats) or target sizes in pixels
    (ints). ``minimum``: ``(xmin, ymin)`` in pixels. ``aspect_ratio_thres``: redraw (up to 50
    times, then keep the size) when the aspect ratio changes by more than this fraction; ``0``
    keeps the aspect ratio (``yrange`` then unused)."""

    def __init__(
        self,
        xrange: Any,
        yrange: Any = None,
        minimum: Any = (0, 0),
        aspect_ratio_thres: float = 0.15,
        interp: int = INTER_LINEAR,
    ) -> None:
        if aspect_ratio_thres < 0:
            raise ValueError(f"RandomResize: aspect_ratio_thres must be >= 0, got {aspect_ratio_thres!r}")

        def is_float(tp: Any) -> bool:
            return isinstance(tp[0], float) or isinstance(tp[1], float)

        if yrange is not None and is_float(xrange) != is_float(yrange):
            raise ValueError("RandomResize: xrange and yrange must both be scales (float) or sizes (int)")
        self._is_scale = is_float(xrange)
        if aspect_ratio_thres == 0 and self._is_scale and not (yrange is None or yrange == xrange):
            raise ValueError(
                "RandomResize: with aspect_ratio_thres=0, yrange must be None or equal to xrange"
            )
        if aspect_ratio_thres > 0 and yrange is None:
            raise ValueError("RandomResize: yrange is needed unless aspect_ratio_thres=0")
        self.xrange, self.yrange, self.minimum = xrange, yrange, minimum
        self.aspect_ratio_thres, self.interp = aspect_ratio_thres, interp

    def _dest_size(self, h: int, w: int) -> tuple[int, int]:
        sx = self._rand_range(*self.xrange)
        if self._is_scale:
            sy = sx if self.aspect_ratio_thres == 0 else self._rand_range(*self.yrange)
            dx, dy = max(sx * w, self.minimum[0]), max(sy * h, self.minimum[1])
        else:
            sy = sx * 1.0 / w * h if self.aspect_ratio_thres == 0 else self._rand_range(*self.yrange)
            dx, dy = max(sx, self.minimum[0]), max(sy, self.minimum[1])
        return int(dx + 0.5), int(dy + 0.5)

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        for _ in range(51):
            dx, dy = self._dest_size(h, w)
            if self.aspect_ratio_thres > 0:
                oldr, newr = w / h, dx / dy
                if abs(newr - oldr) / oldr >= self.aspect_ratio_thres + 1e-5:
                    continue
            return ResizeTransform(h, w, dy, dx, self.interp)
        warn(
            "RandomResize: no size within aspect_ratio_thres in 51 draws; the image keeps its size",
            UserWarning,
        )
        return ResizeTransform(h, w, h, w, self.interp)


class Transpose(ImageAugmentor):
    """Transpose the image (swap rows and columns) with probability ``prob``."""

    def __init__(self, prob: float = 0.5) -> None:
        _check_prob("Transpose", prob)
        self.prob = prob

    def get_transform(self, _: Any) -> Any:
        return TransposeTransform() if self.rng.random() < self.prob else NoOpTransform()
