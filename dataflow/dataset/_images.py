"""Decoding the image files of the dataset loaders (``ILSVRC12``, ``TinyImageNet``,
``Places365Standard``, ``BSDS500``): BGR ``uint8`` arrays as ``cv2.imread(f, cv2.IMREAD_COLOR)``
reads them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..adapters._require import require
from ..sources._indexed import Order
from ..sources._memory import DataFromArrays
from ._paths import FormatError

__all__ = ["DecodedImages", "imread"]


def imread(stage: str, fname: str) -> np.ndarray:
    """The BGR ``uint8`` image in ``fname``; :class:`FormatError` naming ``stage`` and the file if
    OpenCV cannot decode it, :class:`ImportError` naming the extra if OpenCV is missing."""
    cv2 = require("cv2", "image", f"{stage} (decoding images with OpenCV)")
    im = cv2.imread(fname, 1)  # cv2.IMREAD_COLOR: BGR
    if im is None:
        raise FormatError(f"{stage}: cannot decode the image {fname!r}")
    return im  # type: ignore[no-any-return]


class DecodedImages(DataFromArrays):
    """Arrays of ``[file name, label]`` that yield ``[BGR uint8 image, label]``: each file is
    decoded when its datapoint is yielded; positions, shuffling and sharding are the file
    list's."""

    def _open(self, order: Order, start: int) -> tuple[Iterator[Any], Iterator[int], Iterator[Any]]:
        items, cur, probe = super()._open(order, start)
        stage = type(self).__name__
        return ([imread(stage, f), label] for f, label in items), cur, probe
