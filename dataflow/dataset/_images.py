"""Decoding the image files the ImageNet-style loaders list (``ILSVRC12``, ``TinyImageNet``,
``Places365Standard``): BGR ``uint8`` arrays as ``cv2.imread(f, cv2.IMREAD_COLOR)`` reads them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..adapters._require import require
from ._paths import FormatError

__all__ = ["decoded", "imread"]


def imread(stage: str, fname: str) -> np.ndarray:
    """The BGR ``uint8`` image in ``fname``; :class:`FormatError` naming ``stage`` and the file if
    OpenCV cannot decode it, :class:`ImportError` naming the extra if OpenCV is missing."""
    cv2 = require("cv2", "image", f"{stage} (decoding images with OpenCV)")
    im = cv2.imread(fname, 1)  # cv2.IMREAD_COLOR: BGR
    if im is None:
        raise FormatError(f"{stage}: cannot decode the image {fname!r}")
    return im  # type: ignore[no-any-return]


def decoded(stage: str, items: Iterable[Any]) -> Iterator[list[Any]]:
    """``[image, label]`` for each ``[file name, label]`` of ``items``, decoded lazily."""
    return ([imread(stage, f), label] for f, label in items)
