"""OpenCV for the loaders that decode images, imported on first use."""

from __future__ import annotations

from typing import Any

__all__ = ["import_cv2"]


def import_cv2(stage: str) -> Any:
    try:
        import cv2
    except ImportError as e:
        raise ImportError(
            f"{stage} decodes images with OpenCV: pip install 'dataflow-ml[image]' "
            f"(or opencv-python-headless)"
        ) from e
    return cv2
