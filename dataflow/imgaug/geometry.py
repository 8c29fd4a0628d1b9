"""Affine warps: :class:`Shift`, :class:`Rotation`, :class:`RotationAndCropValid`,
:class:`Affine`. Each draws one 2 x 3 matrix and returns a
:class:`~dataflow.imgaug.transform.WarpAffineTransform` (plus a crop for
:class:`RotationAndCropValid`), so coordinates follow the pixels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._opencv import BORDER_REPLICATE, INTER_LINEAR, cv2
from .base import ImageAugmentor
from .transform import CropTransform, TransformList, WarpAffineTransform

__all__ = ["Affine", "Rotation", "RotationAndCropValid", "Shift"]


class _Rotating(ImageAugmentor):
    """What both rotations share: an angle in ``[-max_deg, max_deg]``, a multiple of
    ``step_deg`` when given (which needs ``max_deg=180``)."""

    def __init__(self, max_deg: float, interp: int, step_deg: float | None) -> None:
        if step_deg is not None and not (max_deg == 180 and max_deg % step_deg == 0):
            raise ValueError(
                f"{type(self).__name__}: step_deg needs max_deg=180 and a divisor of 180, got "
                f"{max_deg=} {step_deg=}"
            )
        self.max_deg, self.interp, self.step_deg = max_deg, interp, step_deg

    def _get_deg(self, img: np.ndarray) -> float:
        deg = self._rand_range(-self.max_deg, self.max_deg)
        if self.step_deg:
            deg = deg // self.step_deg * self.step_deg
        return float(deg)


class Shift(ImageAugmentor):
    """Shift by a random whole number of pixels, up to ``horiz_frac`` of the width and
    ``vert_frac`` of the height either way."""

    def __init__(
        self,
        horiz_frac: float = 0,
        vert_frac: float = 0,
        border: int = BORDER_REPLICATE,
        border_value: Any = 0,
    ) -> None:
        if not (0 <= horiz_frac < 1 and 0 <= vert_frac < 1):
            raise ValueError(
                f"Shift: horiz_frac and vert_frac must be in [0, 1), got {horiz_frac}, {vert_frac}"
            )
        self.horiz_frac, self.vert_frac = horiz_frac, vert_frac
        self.border, self.border_value = border, border_value

    def get_transform(self, img: np.ndarray) -> Any:
        max_dx = self.horiz_frac * img.shape[1]
        max_dy = self.vert_frac * img.shape[0]
        dx = np.round(self._rand_range(-max_dx, max_dx))
        dy = np.round(self._rand_range(-max_dy, max_dy))
        mat = np.array([[1, 0, dx], [0, 1, dy]], dtype=np.float64)
        return WarpAffineTransform(
            mat, img.shape[1::-1], borderMode=self.border, borderValue=self.border_value
        )


class Rotation(_Rotating):
    """Rotate by a random angle in ``[-max_deg, max_deg]`` around a random centre (a fraction
    of the image size drawn from ``center_range``); with ``step_deg`` the angle is a multiple
    of it (needs ``max_deg=180``)."""

    def __init__(
        self,
        max_deg: float,
        center_range: Any = (0, 1),
        interp: int = INTER_LINEAR,
        border: int = BORDER_REPLICATE,
        step_deg: float | None = None,
        border_value: Any = 0,
    ) -> None:
        super().__init__(max_deg, interp, step_deg)
        self.center_range, self.border, self.border_value = center_range, border, border_value

    def get_transform(self, img: np.ndarray) -> Any:
        center = img.shape[1::-1] * self._rand_range(self.center_range[0], self.center_range[1], (2,))
        deg = self._get_deg(img)
        # OpenCV's pixel centres are at integer indices: the image centre is size * 0.5 - 0.5
        mat = cv2().getRotationMatrix2D((float(center[0] - 0.5), float(center[1] - 0.5)), deg, 1.0)
        return WarpAffineTransform(
            mat, img.shape[1::-1], interp=self.interp, borderMode=self.border, borderValue=self.border_value
        )


class RotationAndCropValid(_Rotating):
    """Rotate around the centre (as :class:`Rotation`), then crop the largest axis-aligned
    rectangle without border pixels: the output size varies with the angle."""

    def __init__(self, max_deg: float, interp: int = INTER_LINEAR, step_deg: float | None = None) -> None:
        super().__init__(max_deg, interp, step_deg)

    def get_transform(self, img: np.ndarray) -> Any:
        deg = self._get_deg(img)
        h, w = img.shape[:2]
        cx, cy = w * 0.5, h * 0.5
        rot = cv2().getRotationMatrix2D((cx - 0.5, cy - 0.5), deg, 1.0)
        neww, newh = self.largest_rotated_rect(w, h, deg)
        neww, newh = min(neww, w), min(newh, h)
        crop = CropTransform(int(cy - newh * 0.5), int(cx - neww * 0.5), newh, neww)
        return TransformList([WarpAffineTransform(rot, (w, h), interp=self.interp), crop])

    @staticmethod
    def largest_rotated_rect(w: int, h: int, angle: float) -> tuple[int, int]:
        """``(width, height)`` of the largest axis-aligned rectangle inside a ``w x h`` rectangle
        rotated by ``angle`` degrees."""
        a = angle / 180.0 * math.pi
        if w <= 0 or h <= 0:
            return 0, 0
        width_is_longer = w >= h
        side_long, side_short = (w, h) if width_is_longer else (h, w)
        sin_a, cos_a = abs(math.sin(a)), abs(math.cos(a))
        if side_short <= 2.0 * sin_a * cos_a * side_long:
            x = 0.5 * side_short  # two corners touch the longer side
            wr, hr = (x / sin_a, x / cos_a) if width_is_longer else (x / cos_a, x / sin_a)
        else:
            cos_2a = cos_a * cos_a - sin_a * sin_a
            wr, hr = (w * cos_a - h * sin_a) / cos_2a, (h * cos_a - w * sin_a) / cos_2a
        return int(np.round(wr)), int(np.round(hr))


class Affine(ImageAugmentor):
    """A random affine transform around the image centre: scale in ``scale`` (a ``(lo, hi)``
    pair; none by default), translation up to ``translate_frac`` (``(fx, fy)``) of the size,
    rotation up to ``rotate_max_deg`` and shear up to ``shear`` degrees, either way."""

    def __init__(
        self,
        scale: Any = None,
        translate_frac: Any = None,
        rotate_max_deg: float = 0.0,
        shear: float = 0.0,
        interp: int = INTER_LINEAR,
        border: int = BORDER_REPLICATE,
        border_value: Any = 0,
    ) -> None:
        if scale is not None and not (isinstance(scale, tuple) and len(scale) == 2):
            raise ValueError(f"Affine: scale must be a tuple of two floats (lo, hi), got {scale!r}")
        if translate_frac is not None and not (
            isinstance(translate_frac, tuple) and len(translate_frac) == 2
        ):
            raise ValueError(f"Affine: translate_frac must be a tuple of two floats, got {translate_frac!r}")
        if not 0.0 <= shear <= 180.0:
            raise ValueError(f"Affine: shear must be between 0 and 180 degrees, got {shear!r}")
        self.scale, self.translate_frac = scale, translate_frac
        self.rotate_max_deg, self.shear = rotate_max_deg, shear
        self.interp, self.border, self.border_value = interp, border, border_value

    def get_transform(self, img: np.ndarray) -> Any:
        scale = float(self._rand_range(self.scale[0], self.scale[1])) if self.scale is not None else 1.0
        dx = dy = 0.0
        if self.translate_frac is not None:
            max_dx = self.translate_frac[0] * img.shape[1]
            max_dy = self.translate_frac[1] * img.shape[0]
            dx = float(np.round(self._rand_range(-max_dx, max_dx)))
            dy = float(np.round(self._rand_range(-max_dy, max_dy)))
        if self.shear > 0.0:
            shear = math.radians(float(self._rand_range(-self.shear, self.shear)))
            sin_shear, cos_shear = math.sin(shear), math.cos(shear)
        cx, cy = img.shape[1] * 0.5 - 0.5, img.shape[0] * 0.5 - 0.5
        deg = float(self._rand_range(-self.rotate_max_deg, self.rotate_max_deg))
        m = cv2().getRotationMatrix2D((cx, cy), deg, scale)
        if self.shear > 0.0:
            m00, m01, m10, m11 = m[0, 0], m[0, 1], m[1, 0], m[1, 1]
            m[0, 1] = m01 * cos_shear + m00 * sin_shear
            m[1, 1] = m11 * cos_shear + m10 * sin_shear
            m[0, 2] = cx * (1.0 - m00) - cy * m[0, 1]  # keep the centre in place
            m[1, 2] = -cx * m10 + cy * (1.0 - m[1, 1])
        m[0, 2] += dx
        m[1, 2] += dy
        return WarpAffineTransform(m, img.shape[1::-1], self.interp, self.border, self.border_value)
