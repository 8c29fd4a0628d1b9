"""Pasting onto a larger canvas: :class:`CenterPaste`, :class:`RandomPaste` and the background
fillers :class:`BackgroundFiller`, :class:`ConstantBackgroundFiller`. Unlike tensorpack's, the
paste transforms also move coordinates (by the paste offset)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import ImageAugmentor
from .transform import LazyTransform, PasteTransform

__all__ = ["BackgroundFiller", "CenterPaste", "ConstantBackgroundFiller", "RandomPaste"]


class BackgroundFiller:
    """Makes the canvas an image is pasted onto. Subclasses implement ``_fill``."""

    def fill(self, background_shape: Any, img: np.ndarray) -> np.ndarray:
        """A new ``background_shape`` (``(h, w)``) canvas for ``img`` (same channels, dtype)."""
        return self._fill(tuple(background_shape), img)

    def _fill(self, background_shape: tuple[int, ...], img: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement _fill(background_shape, img)")


class ConstantBackgroundFiller(BackgroundFiller):
    """A canvas filled with ``value``."""

    def __init__(self, value: float) -> None:
        self.value = value

    def _fill(self, background_shape: tuple[int, ...], img: np.ndarray) -> np.ndarray:
        if img.ndim not in (2, 3):
            raise ValueError(
                f"ConstantBackgroundFiller: an image must be (h, w) or (h, w, c), got {img.shape}"
            )
        shape = background_shape + img.shape[2:]
        return np.full(shape, self.value, dtype=img.dtype)

    def __repr__(self) -> str:
        return f"ConstantBackgroundFiller({self.value!r})"


class CenterPaste(ImageAugmentor):
    """Paste the image at the centre of a ``background_shape`` (``(h, w)``) canvas made by
    ``background_filler`` (default: zeros)."""

    def __init__(self, background_shape: Any, background_filler: BackgroundFiller | None = None) -> None:
        self.background_shape = (int(background_shape[0]), int(background_shape[1]))
        self.background_filler = (
            ConstantBackgroundFiller(0) if background_filler is None else background_filler
        )

    def _check(self, img: Any, strict: bool) -> None:
        bh, bw = self.background_shape
        h, w = img.shape[:2]
        if (bh < h or bw < w) or (strict and (bh == h or bw == w)):
            need = "larger than" if strict else "at least as large as"
            raise ValueError(
                f"{type(self).__name__}: the background {self.background_shape} must be {need} the "
                f"image {(h, w)}"
            )

    def get_transform(self, img: np.ndarray | None = None) -> Any:
        """The paste of ``img`` (anything with ``.shape``) at the centre. Without an image
        (``None``, or nothing: tensorpack's ``get_transform(_)`` ignored its argument), the
        transform centres the first image ``apply_image`` gets, and uses that offset for
        ``apply_coords`` and later images (a :class:`~dataflow.imgaug.LazyTransform`)."""
        if img is None:
            return LazyTransform(self.get_transform)
        self._check(img, strict=False)
        y0 = int((self.background_shape[0] - img.shape[0]) * 0.5)
        x0 = int((self.background_shape[1] - img.shape[1]) * 0.5)
        return PasteTransform(self.background_shape, y0, x0, self.background_filler)


class RandomPaste(CenterPaste):
    """Paste the image at a random position of a ``background_shape`` canvas, which must be
    larger than the image in both dimensions."""

    def get_transform(self, img: np.ndarray | None = None) -> Any:
        """A paste of ``img`` at a random offset; without an image, drawn when ``apply_image``
        first runs (as :meth:`CenterPaste.get_transform`)."""
        if img is None:
            return LazyTransform(self.get_transform)
        self._check(img, strict=True)
        y0 = int(self._rand_range(self.background_shape[0] - img.shape[0]))
        x0 = int(self._rand_range(self.background_shape[1] - img.shape[1]))
        return PasteTransform(self.background_shape, y0, x0, self.background_filler)
