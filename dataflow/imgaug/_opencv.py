"""OpenCV for the image layer, imported on first use (``import dataflow`` never imports it).

The OpenCV constants used as defaults (``interp=INTER_LINEAR``, ``border=BORDER_REPLICATE``)
are plain ints with OpenCV's values, so building an augmentor does not import OpenCV either.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "BORDER_CONSTANT",
    "BORDER_REPLICATE",
    "INTER_CUBIC",
    "INTER_LINEAR",
    "INTER_NEAREST",
    "cv2",
]

# OpenCV's values (cv2.INTER_LINEAR == 1 ...), stable since OpenCV 2.
INTER_NEAREST = 0
INTER_LINEAR = 1
INTER_CUBIC = 2
BORDER_CONSTANT = 0
BORDER_REPLICATE = 1


@functools.cache
def cv2() -> Any:
    """The ``cv2`` module; :class:`ImportError` naming the extra to install when it is missing."""
    try:
        import cv2 as module
    except ImportError as e:
        raise ImportError(
            "dataflow's image layer (dataflow.imgaug, ImageFromFile, AugmentImageComponent...) "
            'needs OpenCV: pip install "dataflow-ml[image]" (or opencv-python-headless)'
        ) from e
    return module
